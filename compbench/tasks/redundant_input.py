"""Redundant input ("Gradient descent resists compositionality"): the target depends on Y1 only.

Two components Y1, Y2 of n values. Setting A (`split: band`) trains the cells on a diagonal band,
Y2 − Y1 mod n in {0, …, band − 1}, so on training cells Y2 is partly informative of the target;
the other cells are held out. Setting B (`split: iid`) is the control: every cell is trained and
the same off-band cells are scored with new samples. The authors' data code (github.com/
yuanpeng16/BCDLSG at efb6c20, mnist.py `_get_y`) draws Y2 = (Y1 + randint(0, 1)) mod 10 for A,
Y2 uniform for B, and tests on Y2 = (Y1 + 2 + randint(0, 7)) mod 10: band = 2 here.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from compbench.tasks.base import TaskData, TaskParamError, grid
from compbench.tasks.registry import TaskParams, register_family


class RedundantInputParams(TaskParams):
    """Y1 × Y2 (n values each); train on the band Y2 − Y1 mod n < band, or every cell (iid control)."""

    n: int = Field(default=10, ge=2, description="values of Y1 and of Y2")
    band: int = Field(default=2, ge=1, description="training cells: Y2 − Y1 mod n in {0, …, band − 1}; fewer than n")
    target: Literal["block", "value", "class"] = Field(
        default="block", description="block: +1 if Y1 < n/2 else −1; value: Y1 (regression); class: Y1 (n-way multiclass)"
    )
    split: Literal["band", "iid"] = Field(
        default="band", description="band: train the band, hold out the rest; iid: train every cell, score the band split's held-out cells"
    )


@register_family("redundant_input", RedundantInputParams)
def build_redundant_input(p: RedundantInputParams) -> TaskData:
    """Target of Y1 only, trained on a Y2 ≈ Y1 band (Y2 redundant) or on every cell (iid control)."""
    if p.band >= p.n:
        raise TaskParamError(("band",), f"is {p.band}, but a band of width n = {p.n} or more trains every cell and holds none out; use 1..{p.n - 1}")
    cells = grid((p.n, p.n))
    y1, y2 = cells[:, 0], cells[:, 1]
    in_band = (y2 - y1) % p.n < p.band
    n_classes = 0
    if p.target == "block":
        # A block, not a parity: with parity the two band cells of a row cancel and hide the leak (LITERATURE.md §1).
        kind, y = "classification", np.where(y1 < p.n / 2, 1.0, -1.0)
    elif p.target == "value":
        kind, y = "regression", y1.astype(np.float64)
    else:
        kind, y, n_classes = "multiclass", y1.copy(), p.n
    if p.split == "band":
        train, heldout, iid = in_band, None, False
    else:
        train, heldout, iid = np.ones(len(cells), dtype=bool), ~in_band, True
    return TaskData(
        "redundant_input", cells, y, train, (p.n, p.n), kind, p.model_dump(), ("Y1", "Y2"),
        n_classes=n_classes, relevant=(0,), iid=iid, heldout=heldout,
    )
