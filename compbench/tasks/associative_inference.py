"""Associative inference (our formalisation of the paper's Fig. 1 chains A_k–B_k–C_k).

Items are ordered A_0, B_0, C_0, A_1, ... (item = 3k + position). A pair is +1 when both items
belong to the same chain. Held out: every pair of one A item and one C item, in either order —
the same-chain A–C links the task is about, and the cross-chain A–C pairs, so the held-out set has
both labels (2 chains: 8 held-out cells, 4 positive). Everything else is trained: A–B and B–C
links, cross-chain negatives, identity pairs. By the chain-permutation symmetry plus
conjunction-wise additivity, a kernel model predicts the same value for linked and unlinked
held-out pairs.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from compbench.tasks.base import TaskData, grid
from compbench.tasks.registry import TaskParams, register_family


class AssociativeInferenceParams(TaskParams):
    """Number of A–B–C chains."""

    chains: int = Field(default=2, ge=2)


@register_family("associative_inference", AssociativeInferenceParams)
def build_associative_inference(p: AssociativeInferenceParams) -> TaskData:
    """Infer A–C from trained A–B and B–C links."""
    n = 3 * p.chains
    cells = grid((n, n))  # sized first: a huge chain count is refused before anything is allocated
    chain, pos = np.arange(n) // 3, np.arange(n) % 3
    a, b = cells[:, 0], cells[:, 1]
    y = np.where(chain[a] == chain[b], 1.0, -1.0)
    a_c = ((pos[a] == 0) & (pos[b] == 2)) | ((pos[a] == 2) & (pos[b] == 0))
    return TaskData("associative_inference", cells, y, ~a_c, (n, n), "classification", p.model_dump(), ("item 1", "item 2"))
