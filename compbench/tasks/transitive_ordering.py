"""Transitive ordering: +1 if a < b over ordered items; train adjacent pairs (additive: solvable)."""

from __future__ import annotations

import numpy as np
from pydantic import Field, model_validator

from compbench.tasks.base import TaskData, grid
from compbench.tasks.registry import TaskParams, register_family


class TransitiveOrderingParams(TaskParams):
    """Number of items and the trained pair distances."""

    n_items: int = Field(default=7, ge=3)
    train_distances: list[int] = Field(default_factory=lambda: [1], min_length=1)

    @model_validator(mode="after")
    def _check(self) -> TransitiveOrderingParams:
        bad = [d for d in self.train_distances if not 1 <= d < self.n_items]
        if bad:
            raise ValueError(f"train_distances {bad} out of range 1..{self.n_items - 1}")
        return self


@register_family("transitive_ordering", TransitiveOrderingParams)
def build_transitive_ordering(p: TransitiveOrderingParams) -> TaskData:
    """Pairs a ≠ b; a rank-difference (additive) rule that kernels can generalize."""
    n = p.n_items
    cells = grid((n, n))
    cells = cells[cells[:, 0] != cells[:, 1]]
    y = np.where(cells[:, 0] < cells[:, 1], 1.0, -1.0)
    train = np.isin(np.abs(cells[:, 0] - cells[:, 1]), p.train_distances)
    return TaskData("transitive_ordering", cells, y, train, (n, n), "classification", p.model_dump(), ("item 1", "item 2"))
