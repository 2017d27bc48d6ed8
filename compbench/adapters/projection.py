"""The `additive_projection` adapter: the best additive fit of the targets over EVERY cell, a ceiling.

Not a model: a reference. It fits the evaluation targets of every cell, held-out cells included, so
every model of this adapter carries the tag `ceiling` (the adapter's own), which the leaderboard
shows but never marks best, and the `scores` plot draws as a line.

What it computes, for a latent z (the cell's encoding: the k-hot or one-hot code, or `latent_dim`
leading columns) followed by an input x: the least-squares projection of the targets onto

    f(z, x) = F₀(x) + Σ_m z_m F_m(x),      F₀, F_m any functions of x,

fit on all cells with equal weight. With k-hot codes this is the module-additive class of the
kernel theory (LITERATURE §2: a kernel model predicts F₀ + F_a + F_b on a held-out pair), and the
projection is "the best module-additive fit of the teacher" that bounds it. With one-hot codes it
is the purely additive fit Σ_c g_c(z_c) of the grid.

Why exact and pointwise. The class puts no constraint across x, so the squared error over cells and
inputs, ∫ Σ_c (y(x, c) − [1, z_c]·F(x))² dx, is minimised at every x separately: F(x) is the least-
squares solution of a (cells × (1 + M)) linear system whose right-hand side is the targets of every
cell at that x. So the projection at an input needs the targets of every cell at that very input,
which function-valued tasks give (every cell is evaluated at one shared x_eval), and it is exact: no
estimation error, no kernel, no sample size. A kernel regression on every cell's *training* samples
(e.g. (1 + z·z′)·k(x, x′) fit on all combinations) estimates the same projection from finite samples and
stays below it by an estimation error that depends on the kernel: on modular-teacher `random`,
256 samples per combination, it gave 0.864 held-out R² with the ReLU NTK on x without bias (whose
F_m are positively homogeneous in x; the teacher's biases are not) and 0.898 with σ_b² = 1, against
the projection's 0.921 — a ceiling that a better estimator could beat is no ceiling. The price: a
held-out cell's own target enters its prediction (with the projection's leverage of that cell, about
(1 + M) / cells), as it must in a fit on every cell; that is why this is a reference and not a model.

The |z| question (k-hot codes). A fully connected network's kernel on concat(z, x) depends on z
through z·z′ and |z|, so on cells with k active modules it predicts G_k(x) + Σ_m z_m F_m^{(k)}(x):
module-additive among cells of one order. A per-order intercept G_k is not added to the class: for
cells of 1 or 2 active modules 1[|z| = 2] = Σ_m z_m − 1, already in it, so adding G₂ changes no
prediction. Order-wise module functions F^{(k)} are not added either: the theory's statement is one
F_m per module (LITERATURE §2), and with them the 1-hot cells (M + 1 parameters for M cells) would
constrain nothing and the fit of the pairs would stand alone.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from compbench.adapters.base import Adapter, AdapterParams, Batch, Fitted
from compbench.adapters.registry import register_adapter


class ProjectionParams(AdapterParams):
    """Parameters of the additive projection (a reference fit on every cell)."""

    latent_dim: int | None = Field(
        default=None, ge=0, description="leading input columns that are z (None: the k-hot or one-hot cell code)"
    )


@register_adapter("additive_projection")
class AdditiveProjection(Adapter):
    """Least-squares projection of every cell's targets onto F₀(x) + Σ_m z_m F_m(x): a ceiling, not a model."""

    Params = ProjectionParams
    deterministic = True
    inputs = ("vector",)
    # Every model of this adapter is a ceiling: it reads the held-out cells' targets, so it must never compete.
    tags = ("ceiling",)
    params: ProjectionParams

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Project the evaluation targets of every cell, input by input (the same fit for every seed)."""
        preds, info = additive_projection(evaluate, self.params.latent_dim)
        fitted = Fitted(preds, info=info)
        return [fitted for _ in seeds]


def additive_projection(evaluate: Batch, latent_dim: int | None = None) -> tuple[np.ndarray, dict[str, object]]:
    """(predictions, info): the projection of `evaluate`'s targets onto F₀(x) + Σ_m z_m F_m(x), fit on all its rows.

    Rows are grouped by their input x (the columns after the latent); every group must hold every
    cell exactly once, since the projection at x needs the targets of every cell at that x.
    """
    from compbench.adapters.hypernet import latent_width

    if evaluate.y is None:
        raise ValueError("the additive projection fits the evaluation targets, and this evaluation batch has none")
    n = len(evaluate)
    x = np.asarray(evaluate.x, dtype=np.float64).reshape(n, -1)
    la = latent_width(evaluate, latent_dim)
    ids = np.asarray(evaluate.cell_ids, dtype=np.int64)
    cells, cell_of = np.unique(ids, return_inverse=True)
    inputs, input_of = np.unique(x[:, la:], axis=0, return_inverse=True)
    input_of = input_of.reshape(-1)
    counts = np.bincount(input_of * len(cells) + cell_of, minlength=len(inputs) * len(cells))
    if np.any(counts != 1):
        raise ValueError(
            f"the additive projection needs every cell at every evaluation input once; {int(np.sum(counts == 0))} "
            f"(input, cell) pairs are missing and {int(np.sum(counts > 1))} repeated among {len(inputs)} inputs and "
            f"{len(cells)} cells (an encoding that draws fresh inputs per cell cannot give it)"
        )
    first = np.zeros(len(cells), dtype=np.int64)
    first[cell_of[::-1]] = np.arange(n)[::-1]  # a row of each cell
    z = x[first, :la]
    if not np.array_equal(x[:, :la], z[cell_of]):
        raise ValueError("the additive projection needs one latent per cell; rows of one cell carry different latents")
    y = evaluate.regression_targets()
    tail = y.shape[1:]
    # Y[c, i, ...]: cell c's target at input i; one least-squares system, every input a right-hand side
    Y = np.empty((len(cells), len(inputs), *tail))
    Y[cell_of, input_of] = y
    design = np.concatenate([np.ones((len(cells), 1)), z], axis=1)
    coef, _, rank, _ = np.linalg.lstsq(design, Y.reshape(len(cells), -1), rcond=None)
    fit = (design @ coef).reshape(Y.shape)
    info: dict[str, object] = {"reference": "fit on every cell's evaluation targets", "class_rank": int(rank),
                               "cells": len(cells), "inputs": len(inputs)}
    return fit[cell_of, input_of], info
