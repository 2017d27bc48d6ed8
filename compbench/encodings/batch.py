"""Batch: model inputs with the task cells they render (the encodings → adapters interface)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Batch:
    """Model inputs, one row per sample; `cell_ids[i]` is the task cell that sample i renders.

    One-hot encodings have one sample per cell; image encodings several, drawn from disjoint
    image pools for training and evaluation.
    """

    x: np.ndarray
    cells: np.ndarray
    cell_ids: np.ndarray
    n_values: tuple[int, ...]
    y: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.x)
