"""Context dependence (CD-1/2/3): the context says which feature determines the response."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from compbench.tasks.base import TaskData, grid
from compbench.tasks.registry import TaskParams, register_family

SIGN = [-1.0, -1.0, -1.0, 1.0, 1.0, 1.0]  # low feature values → -1, high → +1

# The paper's naming (its figures); the reference config files number them the other way round.
PRESETS: dict[str, list[dict[int, list[int]]]] = {
    "CD-1": [{1: [0], 2: [3]}],
    "CD-2": [{1: [0, 1], 2: [3, 4]}],
    "CD-3": [{1: [0, 1, 2], 2: [3, 4, 5]}],
}


class ContextDependenceParams(TaskParams):
    """Contexts × features; held-out blocks by preset or explicit `held_out` dicts."""

    preset: Literal["CD-1", "CD-2", "CD-3"] | None = "CD-1"
    contexts: int = Field(default=2, ge=1)
    features: list[int] = Field(default_factory=lambda: [6, 6], min_length=1)
    context_to_feature: list[int] = Field(default_factory=lambda: [0, 1])
    responses: list[list[float]] = Field(default_factory=lambda: [list(SIGN), list(SIGN)])
    held_out: list[dict[int, list[int]]] | None = None

    @model_validator(mode="after")
    def _check(self) -> ContextDependenceParams:
        if len(self.context_to_feature) != self.contexts:
            raise ValueError(f"context_to_feature needs one entry per context ({self.contexts})")
        if any(not 0 <= k < len(self.features) for k in self.context_to_feature):
            raise ValueError("context_to_feature entries must index a feature")
        if len(self.responses) != len(self.features) or any(len(r) != n for r, n in zip(self.responses, self.features)):
            raise ValueError("responses needs one list per feature, one response per feature value")
        if self.held_out is None and self.preset is None:
            raise ValueError("give a preset (CD-1, CD-2, CD-3) or held_out blocks")
        for block in self.held_out or []:
            for comp in block:
                if not 0 <= comp <= len(self.features):
                    raise ValueError(f"held_out component {comp} does not exist (0 = context, 1.. = features)")
        return self


@register_family("context_dependence", ContextDependenceParams)
def build_context_dependence(p: ContextDependenceParams) -> TaskData:
    """Context 0 → response to feature 1, context 1 → feature 2; held-out blocks invite a context shortcut."""
    n_values = (p.contexts, *p.features)
    cells = grid(n_values)
    k = np.asarray(p.context_to_feature)[cells[:, 0]]
    y = np.array([p.responses[kk][cell[kk + 1]] for kk, cell in zip(k, cells)], dtype=np.float64)
    blocks = p.held_out if p.held_out is not None else PRESETS[p.preset]  # type: ignore[index]
    test = np.zeros(len(cells), dtype=bool)
    for block in blocks:
        hit = np.ones(len(cells), dtype=bool)
        for comp, vals in block.items():
            hit &= np.isin(cells[:, comp], vals)
        test |= hit
    names = ("context", *(f"feature {i + 1}" for i in range(len(p.features))))
    kind = "classification" if np.all(np.isin(y, (-1.0, 1.0))) else "regression"
    return TaskData("context_dependence", cells, y, ~test, n_values, kind, p.model_dump(), names)
