"""Batch: model inputs with the task cells they render (the encodings → adapters interface)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Batch:
    """Model inputs, one row per sample; `cell_ids[i]` is the task cell that sample i renders.

    One-hot encodings have one sample per cell; image encodings several, drawn from disjoint
    image pools for training and evaluation; function-valued cells one per drawn input.

    Targets `y`, by task shape: (n,) floats for a scalar task; (n, K) floats for K outputs;
    (n,) integer classes 0..n_classes−1 for a multi-class task (`n_classes` > 0). Adapters
    predict `n_outputs` values per sample ((n,) when it is 1 and the task is not multi-class).

    Sequence inputs (input kind "sequence", the `episodes` encoding): `x` is (n, length, features)
    and `mask` (n, length) bool marks the real tokens (False: padding). A training batch may carry
    a `stream`, a seeded source of fresh samples (`EpisodeStream`): a sequence adapter trains on
    it, and `x`, `y` are then a fixed sample of the same distribution (for f₀ and theory). Every
    other batch leaves both None.
    """

    x: np.ndarray
    cells: np.ndarray
    cell_ids: np.ndarray
    n_values: tuple[int, ...]
    y: np.ndarray | None = None
    n_classes: int = 0
    mask: np.ndarray | None = None
    stream: Any = None

    def __len__(self) -> int:
        return len(self.x)

    @property
    def n_outputs(self) -> int:
        """Output units a model needs: the classes, the target's width, or 1."""
        if self.n_classes:
            return self.n_classes
        return int(self.y.shape[1]) if self.y is not None and self.y.ndim == 2 else 1

    @property
    def vector_output(self) -> bool:
        """Whether predictions are (n, n_outputs) rather than (n,): multi-class or K-output tasks."""
        return bool(self.n_classes) or (self.y is not None and self.y.ndim == 2)

    @property
    def prediction_shape(self) -> tuple[int, ...]:
        """The shape an adapter's predictions on this batch must have."""
        return (len(self), self.n_outputs) if self.vector_output else (len(self),)

    def target_matrix(self) -> np.ndarray:
        """Regression targets (n, n_outputs) float64: one-hot rows for classes (MSE on one-hot)."""
        if self.y is None:
            raise ValueError("this batch has no targets")
        if self.n_classes:
            return np.eye(self.n_classes)[np.asarray(self.y, dtype=np.int64)]
        y = np.asarray(self.y, dtype=np.float64)
        return y if y.ndim == 2 else y[:, None]

    def regression_targets(self) -> np.ndarray:
        """Targets as a model regresses them: (n,) for a scalar task, else `target_matrix()`."""
        return self.target_matrix() if self.vector_output else np.asarray(self.y, dtype=np.float64)
