"""Transitive equivalence: +1 for pairs of items of the same class; held-out pairs of non-anchors."""

from __future__ import annotations

import numpy as np
from pydantic import Field, model_validator

from compbench.tasks.base import TaskData, grid
from compbench.tasks.registry import TaskParams, register_family


class TransitiveEquivalenceParams(TaskParams):
    """Class sizes and how many items of each class are anchors ("training items")."""

    classes: list[int] = Field(default_factory=lambda: [2, 2], min_length=2)
    train_items: list[int] = Field(default_factory=lambda: [1, 1])

    @model_validator(mode="after")
    def _check(self) -> TransitiveEquivalenceParams:
        if len(self.train_items) != len(self.classes):
            raise ValueError("train_items needs one count per class")
        if any(not 0 <= t <= n for t, n in zip(self.train_items, self.classes)) or any(n < 1 for n in self.classes):
            raise ValueError("each class needs ≥ 1 item and 0..size anchors")
        return self


@register_family("transitive_equivalence", TransitiveEquivalenceParams)
def build_transitive_equivalence(p: TransitiveEquivalenceParams) -> TaskData:
    """Train every pair containing an anchor; kernels predict exactly 0 on the held-out pairs."""
    n = sum(p.classes)
    cells = grid((n, n))  # sized first: huge classes are refused before anything is allocated
    cls = np.repeat(np.arange(len(p.classes)), p.classes)
    starts = np.concatenate([[0], np.cumsum(p.classes)[:-1]])
    anchor = np.zeros(len(cls), dtype=bool)
    for s, t in zip(starts, p.train_items):
        anchor[s : s + t] = True
    y = np.where(cls[cells[:, 0]] == cls[cells[:, 1]], 1.0, -1.0)
    train = anchor[cells[:, 0]] | anchor[cells[:, 1]]
    return TaskData("transitive_equivalence", cells, y, train, (n, n), "classification", p.model_dump(), ("item 1", "item 2"))
