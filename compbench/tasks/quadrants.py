"""The 2-D toy of "Gradient descent resists compositionality" (Li et al., ICLR 2021 submission).

Two binary components Y1, Y2; a cell (Y1, Y2) is a unit square of the plane, its samples
X = Y − U with U ~ U[0, 1]², so X_i lies in [Y_i − 1, Y_i]. The target depends on Y1 only:
+1 where Y1 = 1 (X1 ≥ 0), −1 where Y1 = 0. Three quadrants are trained; the fourth, (1, 1), is
held out. On the training quadrants X2 ≥ 0 only occurs with the label −1, so X2 is redundant
with the label there, and a model that uses it pulls the held-out quadrant towards −1.

This follows the authors' TensorFlow-playground generator (github.com/yuanpeng16/BCDLSG at
efb6c20, dataset.ts `classifyXORData`: label = sign(x), points kept where x ≤ 0 or y ≤ 0),
rescaled to unit squares as the paper writes it. The samples are the offsets −U (the `coordinates`
encoding with `samples: add` turns them into X); they are drawn from `seed`, a data seed apart
from the models' seeds, so every seed of every model sees the same points.
"""

from __future__ import annotations

import numpy as np
from pydantic import Field

from compbench.tasks.base import CellSamples, TaskData, TaskParamError, grid
from compbench.tasks.registry import TaskParams, register_family

HELD_OUT = (1, 1)


class QuadrantsParams(TaskParams):
    """Y1, Y2 ∈ {0, 1}; X = Y − U[0, 1]²; target ±1 by Y1; quadrant (1, 1) held out."""

    samples_per_cell: int = Field(default=64, ge=1, description="training points per trained quadrant")
    eval_samples: int = Field(default=256, ge=1, description="evaluation offsets U, shared by every quadrant")
    seed: int = Field(default=0, ge=0, description="data seed of the points (independent of the models' seeds)")


@register_family("quadrants", QuadrantsParams)
def build_quadrants(p: QuadrantsParams) -> TaskData:
    """Three unit-square quadrants trained on a label of X1 only; the fourth held out (the paper's 2-D toy)."""
    from compbench.limits import TooLargeError, limits

    n_samples = 4 * (p.samples_per_cell + p.eval_samples)
    if n_samples > limits().samples_per_task:
        raise TooLargeError("the task's samples (4 × (samples_per_cell + eval_samples))", n_samples, limits().samples_per_task, "--max-cells")
    cells = grid((2, 2))
    train = ~np.all(cells == HELD_OUT, axis=1)
    y = np.where(cells[:, 0] == 1, 1.0, -1.0)
    train_ss, eval_ss = np.random.SeedSequence(p.seed).spawn(2)
    train_ids = np.flatnonzero(train)
    # Offsets −U: the encoding adds them to the cell's coordinates (Y1, Y2), giving X = Y − U.
    x_train = -np.random.default_rng(train_ss).uniform(0.0, 1.0, size=(len(train_ids) * p.samples_per_cell, 2))
    x_eval = -np.random.default_rng(eval_ss).uniform(0.0, 1.0, size=(p.eval_samples, 2))
    if np.any(x_train == 0.0) or np.any(x_eval == 0.0):
        # U = 0 puts a point on an axis, where the label's sign is ambiguous; uniform() never draws 1.
        raise TaskParamError(("seed",), f"is {p.seed}, which draws a point on an axis; use another seed")
    train_cells = np.repeat(train_ids, p.samples_per_cell)
    y_train = y[train_cells]
    y_eval = np.repeat(y[:, None], p.eval_samples, axis=1)
    return TaskData(
        "quadrants", cells, y, train, (2, 2), "classification", p.model_dump(), ("Y1", "Y2"),
        relevant=(0,), samples=CellSamples(x_train, train_cells, y_train, x_eval, y_eval),
    )
