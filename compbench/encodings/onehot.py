"""Disentangled one-hot encoding: one one-hot block per component."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def onehot(cells: np.ndarray, n_values: Sequence[int]) -> np.ndarray:
    """Concatenate one one-hot block per component (x·x' = number of agreeing components)."""
    cells = np.asarray(cells, dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(n_values)[:-1]]).astype(np.int64)
    x = np.zeros((len(cells), int(sum(n_values))), dtype=np.float64)
    rows = np.repeat(np.arange(len(cells)), cells.shape[1])
    x[rows, (cells + offsets).ravel()] = 1.0
    return x
