"""Symmetry (our family; the paper has no task of this name): invariance, partial exposure, swap."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from compbench.tasks.base import TaskData, grid
from compbench.tasks.registry import TaskParams, register_family


class SymmetryParams(TaskParams):
    """Which variant; `n_items` and `relation_seed` are for 'swap'."""

    variant: Literal["invariance", "partial_exposure", "swap"] = "invariance"
    # 2 items leave a single held-out pair, which can never carry both labels.
    n_items: int = Field(default=6, ge=3)
    relation_seed: int = 0


def _swap_relation(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    while True:
        upper = np.triu(rng.choice([-1.0, 1.0], size=(n, n)))
        rel = upper + np.triu(upper, 1).T
        held = rel[np.tril_indices(n, -1)]
        if len(np.unique(held)) == 2:  # both labels among held-out cells
            return rel


@register_family("symmetry", SymmetryParams)
def build_symmetry(p: SymmetryParams) -> TaskData:
    """(a) invariance to an unseen nuisance value, (b) partial exposure, (c) a symmetric relation."""
    if p.variant == "swap":
        n = p.n_items
        cells = grid((n, n))
        rel = _swap_relation(n, p.relation_seed)
        y = rel[cells[:, 0], cells[:, 1]]
        train = cells[:, 0] <= cells[:, 1]
        return TaskData("symmetry", cells, y, train, (n, n), "classification", p.model_dump(), ("item 1", "item 2"))
    cells = grid((2, 2))
    y = np.where(cells[:, 0] == 1, 1.0, -1.0)
    if p.variant == "invariance":
        train = cells[:, 1] == 0
    else:
        train = ~((cells[:, 0] == 1) & (cells[:, 1] == 1))
    # Invariance holds out the nuisance value (component 2 = 1) itself: the test is whether the
    # model ignores a value it never saw, so here, and only here, an unseen value is the point.
    return TaskData(
        "symmetry", cells, y, train, (2, 2), "classification", p.model_dump(), ("component 1", "component 2"),
        allow_unseen_values=p.variant == "invariance",
    )
