"""Modular teacher ("Discovering modular solutions that generalize compositionally", Schug et al. 2024).

M modules; a cell is a set of 1..K active modules, a row of an (n_cells × M) 0/1 array (each module
a component with values off/on). The teacher is a one-hidden-layer ReLU network whose hidden
weights and biases are the active modules' sum, scaled by 1/√K; the readout is fixed and shared:

    teacher(x; z) = R^T relu(W(z̃)^T x + b(z̃)),  W(z̃) = Σ_m z̃_m Θ_m,  b(z̃) = Σ_m z̃_m β_m,  z̃ = z/√K.

A cell is a function of x ~ U[−1, 1]^I. This follows the authors' follow-up code
(github.com/smonsays/scale-compositionality at 1edd45f, compscale/data/teacher.py `HyperTeacher`,
compscale/data/utils.py `make_latents`, `split_module_combinations`): Θ_m and R truncated-normal
variance scaling (fan-in, `scale`, default √3 as configs/teacher.py), β_m ~ U[0, 0.5), targets not
standardised (the authors score R² against each task's own variance instead).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import numpy as np
from pydantic import Field

from compbench.tasks.base import CellSamples, TaskData, TaskParamError
from compbench.tasks.registry import TaskParams, register_family

# flax's variance_scaling "truncated_normal": a standard normal cut at ±2, rescaled to unit variance.
_TRUNC_STD = 0.87962566103423978
_BIAS_MAX = 0.5
_SPLIT_ATTEMPTS = 1000


class ModularTeacherParams(TaskParams):
    """M modules, cells = sets of 1..K active modules; a seeded modular teacher MLP; four splits."""

    modules: int = Field(default=8, ge=2, description="number of modules M (components m0..m{M-1})")
    max_active: int = Field(default=2, ge=1, description="K: cells are all sets of 1..K active modules")
    inputs: int = Field(default=8, ge=1, description="teacher input dimension I (x ~ U[-1, 1]^I)")
    hidden: int = Field(default=16, ge=1, description="teacher hidden units H")
    outputs: int = Field(default=1, ge=1, description="teacher outputs (1: scalar targets; more: K-output targets)")
    scale: float = Field(default=math.sqrt(3.0), gt=0, description="variance scale of the truncated-normal weights (fan-in)")
    split: Literal["random", "connected", "disconnected", "non_compositional"] = Field(
        default="random", description="which module combinations are trained (LITERATURE.md §2)"
    )
    heldout_fraction: float = Field(default=0.25, gt=0, lt=1, description="random: fraction of combinations held out")
    heldout: Literal["shared", "untrained"] = Field(
        default="shared",
        description="connected/disconnected: 'shared' scores the pairs neither support trains (the authors' code; "
        "the same held-out pairs for both), 'untrained' every untrained pair",
    )
    samples_per_cell: int = Field(default=256, ge=1, description="training inputs per training cell")
    eval_samples: int = Field(default=256, ge=1, description="evaluation inputs, shared by every cell")
    relevant: list[int] | None = Field(
        default=None, description="modules the teacher uses (the others get zero weights and biases); None: all"
    )
    seed: int = Field(default=0, ge=0, description="seeds the teacher, the random split and the inputs")


@dataclass(frozen=True)
class Teacher:
    """The teacher's weights: per-module hidden weights Θ (M × I × H), biases β (M × H), readout R (H × O)."""

    theta: np.ndarray
    bias: np.ndarray
    readout: np.ndarray
    max_active: int

    def __call__(self, x: np.ndarray, z: np.ndarray) -> np.ndarray:
        """Targets (n × O) of the cell with module mask `z` (M,) at inputs `x` (n × I)."""
        s = np.asarray(z, dtype=np.float64) / math.sqrt(self.max_active)
        w = np.einsum("mih,m->ih", self.theta, s)
        b = self.bias.T @ s
        return np.maximum(np.asarray(x, dtype=np.float64) @ w + b, 0.0) @ self.readout


def _truncated_normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> np.ndarray:
    """Normal(0, 1) cut at ±2 (by rejection), times std / 0.8796 (flax's truncated variance scaling)."""
    out = rng.standard_normal(shape)
    bad = np.abs(out) > 2
    while bad.any():
        out[bad] = rng.standard_normal(int(bad.sum()))
        bad = np.abs(out) > 2
    return out * (std / _TRUNC_STD)


def make_teacher(p: ModularTeacherParams, rng: np.random.Generator) -> Teacher:
    """Draw the teacher's weights; modules outside `relevant` are zeroed after drawing (the rest unchanged)."""
    theta = _truncated_normal(rng, (p.modules, p.inputs, p.hidden), math.sqrt(p.scale / p.inputs))
    bias = rng.uniform(0.0, _BIAS_MAX, size=(p.modules, p.hidden))
    readout = _truncated_normal(rng, (p.hidden, p.outputs), math.sqrt(p.scale / p.hidden))
    if p.relevant is not None:
        off = np.setdiff1d(np.arange(p.modules), p.relevant)
        theta[off] = 0.0
        bias[off] = 0.0
    return Teacher(theta, bias, readout, p.max_active)


def _streams(seed: int) -> list[np.random.SeedSequence]:
    """Independent seed streams: the teacher, the random split, training inputs, evaluation inputs."""
    return np.random.SeedSequence(seed).spawn(4)


def teacher_of(p: ModularTeacherParams) -> Teacher:
    """The teacher a task with these params uses."""
    return make_teacher(p, np.random.default_rng(_streams(p.seed)[0]))


def module_combinations(modules: int, max_active: int) -> np.ndarray:
    """All sets of 1..K of M modules as 0/1 rows: the 1-hot first, then 2-hot in itertools order (make_latents)."""
    rows = []
    for k in range(1, max_active + 1):
        for active in combinations(range(modules), k):
            row = np.zeros(modules, dtype=np.int64)
            row[list(active)] = 1
            rows.append(row)
    return np.array(rows, dtype=np.int64)


def _compositional_and_connected(train: np.ndarray) -> bool:
    """Every module is in a training cell, and modules linked by co-occurring in one form a single group."""
    use = train.astype(np.int64)
    if not np.all(use.sum(axis=0) > 0):
        return False
    reach = (use.T @ use) > 0
    for _ in range(max(1, math.ceil(math.log2(use.shape[1])))):
        reach = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
    return bool(reach.all())


def split_masks(cells: np.ndarray, p: ModularTeacherParams, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(train, held-out) masks over the combinations, as the authors' split_module_combinations."""
    m = p.modules
    hot = cells.sum(axis=1)
    if p.split == "random":
        n = len(cells)
        n_out = int(n * p.heldout_fraction)
        if n_out == 0:
            raise TaskParamError(("heldout_fraction",), f"is {p.heldout_fraction}, which holds out none of the {n} combinations")
        # As the authors: redraw until the training combinations use every module and connect them all.
        for _ in range(_SPLIT_ATTEMPTS):
            perm = rng.permutation(n)
            held = np.zeros(n, dtype=bool)
            held[perm[n - n_out:]] = True
            if _compositional_and_connected(cells[~held]):
                return ~held, held
        raise TaskParamError(
            ("heldout_fraction",),
            f"no random split holding out {n_out} of {n} combinations in {_SPLIT_ATTEMPTS} draws trains every module "
            "with its modules connected; hold out fewer",
        )
    if p.split == "non_compositional":
        held = cells[:, m - 1] == 1
        return ~held, held
    if p.max_active != 2 or m < 6 or m % 2:
        raise TaskParamError(
            ("split",), f"{p.split!r} is defined for max_active = 2 and an even number of modules ≥ 6 (the authors' "
            f"assertion), got max_active = {p.max_active}, modules = {m}",
        )
    i = np.arange(m)
    pairs = {frozenset((int(a), int(b))) for a, b in zip(i, (i + 1) % m)} | {frozenset((int(a), int(b))) for a, b in zip(i, (i + 2) % m)}
    sets = [frozenset(np.flatnonzero(c).tolist()) for c in cells]
    connected = np.array([h == 1 or s in pairs for h, s in zip(hot, sets)])
    low = cells[:, m // 2:].sum(axis=1) == 0
    high = cells[:, : m // 2].sum(axis=1) == 0
    disconnected = low | high
    train = connected if p.split == "connected" else disconnected
    held = ~(connected | disconnected) if p.heldout == "shared" else ~train
    return train, held


@register_family("modular_teacher", ModularTeacherParams)
def build_modular_teacher(p: ModularTeacherParams) -> TaskData:
    """Sets of active modules as function-valued cells of a seeded modular teacher MLP."""
    from compbench.limits import TooLargeError, limits

    if p.max_active > p.modules:
        raise TaskParamError(("max_active",), f"is {p.max_active}, more than the {p.modules} modules")
    if p.relevant is not None:
        bad = [r for r in p.relevant if not 0 <= r < p.modules]
        if bad or len(set(p.relevant)) != len(p.relevant) or not p.relevant:
            raise TaskParamError(("relevant",), f"must be distinct module indices 0..{p.modules - 1} (at least one), got {p.relevant}")
    n_cells = sum(math.comb(p.modules, k) for k in range(1, p.max_active + 1))
    if n_cells > limits().cells_per_task:
        raise TooLargeError(f"the task's module combinations ({p.modules} modules, up to {p.max_active} active)", n_cells, limits().cells_per_task, "--max-cells")
    n_samples = n_cells * (p.samples_per_cell + p.eval_samples)
    if n_samples > limits().samples_per_task:
        raise TooLargeError("the task's samples (cells × (samples_per_cell + eval_samples))", n_samples, limits().samples_per_task, "--max-cells")
    _, split_ss, train_ss, eval_ss = _streams(p.seed)
    teacher = teacher_of(p)
    cells = module_combinations(p.modules, p.max_active)
    train, held = split_masks(cells, p, np.random.default_rng(split_ss))

    train_ids = np.flatnonzero(train)
    x_train = np.random.default_rng(train_ss).uniform(-1.0, 1.0, size=(len(train_ids) * p.samples_per_cell, p.inputs))
    train_cells = np.repeat(train_ids, p.samples_per_cell)
    x_eval = np.random.default_rng(eval_ss).uniform(-1.0, 1.0, size=(p.eval_samples, p.inputs))
    y_train = np.empty((len(x_train), p.outputs))
    for j, c in enumerate(train_ids):
        rows = slice(j * p.samples_per_cell, (j + 1) * p.samples_per_cell)
        y_train[rows] = teacher(x_train[rows], cells[c])
    y_eval = np.stack([teacher(x_eval, z) for z in cells])  # (n_cells, m, O)
    if p.outputs == 1:
        y_train, y_eval = y_train[:, 0], y_eval[:, :, 0]
    samples = CellSamples(x_train, train_cells, y_train, x_eval, y_eval)
    # Cells neither trained nor scored (connected/disconnected with heldout: shared) have heldout False.
    heldout = None if np.array_equal(held, ~train) else held
    return TaskData(
        "modular_teacher", cells, y_eval.mean(axis=1), train, (2,) * p.modules, "regression", p.model_dump(),
        tuple(f"m{i}" for i in range(p.modules)),
        allow_unseen_values=p.split == "non_compositional",
        value_labels=(("off", "on"),) * p.modules,
        relevant=None if p.relevant is None else tuple(sorted(p.relevant)),
        samples=samples, heldout=heldout,
    )
