"""Symbolic addition: y = v_1(z_1) + v_2(z_2) + ...; 'comps' (anchor) or 'dispersed' splits."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from compbench.tasks.base import TaskData, grid
from compbench.tasks.registry import TaskParams, register_family

NINE = [-4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0]


class AdditiveParams(TaskParams):
    """Values per component and the split (anchors are value indices)."""

    values: list[list[float]] = Field(default_factory=lambda: [list(NINE), list(NINE)], min_length=1)
    split: Literal["comps", "dispersed"] = "comps"
    anchors: list[list[int]] = Field(default_factory=lambda: [[4], [4]])
    per_row: int = Field(default=2, ge=1)
    split_seed: int = 1

    @model_validator(mode="after")
    def _check(self) -> AdditiveParams:
        if any(len(v) == 0 for v in self.values):
            raise ValueError("every component needs at least one value")
        if self.split == "comps":
            if len(self.anchors) != len(self.values):
                raise ValueError(f"anchors needs one list per component ({len(self.values)}), got {len(self.anchors)}")
            for c, (anchor, vals) in enumerate(zip(self.anchors, self.values)):
                for a in anchor:
                    if not 0 <= a < len(vals):
                        raise ValueError(f"anchor index {a} of component {c} is out of range 0..{len(vals) - 1}")
        elif len(self.values) != 2 or len(self.values[0]) != len(self.values[1]):
            raise ValueError("the dispersed split needs 2 components with the same number of values")
        elif self.per_row > len(self.values[0]):
            raise ValueError(f"per_row {self.per_row} exceeds the {len(self.values[0])} values per row")
        return self


def dispersed_matrix(n: int, per_row: int, seed: int) -> np.ndarray:
    """Circulant band of `per_row` ones per row and column, rows shuffled by the seed (reference code)."""
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    m = ((j - i) % n) <= per_row - 1
    np.random.default_rng(seed).shuffle(m)
    return m


@register_family("additive", AdditiveParams)
def build_additive(p: AdditiveParams) -> TaskData:
    """Symbolic addition over value lists; memorization leak shrinks held-out predictions."""
    n_values = tuple(len(v) for v in p.values)
    cells = grid(n_values)
    y = np.sum([np.asarray(p.values[c])[cells[:, c]] for c in range(len(n_values))], axis=0).astype(np.float64)
    if p.split == "comps":
        train = np.zeros(len(cells), dtype=bool)
        for c, anchor in enumerate(p.anchors):
            train |= np.isin(cells[:, c], anchor)
    else:
        m = dispersed_matrix(n_values[0], p.per_row, p.split_seed)
        train = m[cells[:, 0], cells[:, 1]]
    names = tuple(f"value {c + 1}" for c in range(len(n_values)))
    return TaskData("additive", cells, y, train, n_values, "regression", p.model_dump(), names)
