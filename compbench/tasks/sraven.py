"""Symbolic Raven matrices (sRAVEN), "Attention as a hypernetwork" (Schug et al., ICLR 2025; LITERATURE.md §6).

The rules, latents, split and instances of the authors' `SymbolicRavenGenerator`
(github.com/smonsays/hypernetwork-attention at af9805f, `hyla/data/raven.py`), in numpy. A task
latent is a multiset of `features` rules, one per feature (`combinations_with_replacement` of the
8 rules, in that order); an instance is, per feature, a grid × grid array of values 0..V−1 that
follows its rule row by row; the panels are the grid's cells in row-major order, each panel the
vector of its features' values. A model sees the first grid² − 1 panels and predicts the last
panel's features.

The 8 rules (each row drawn independently, as the authors' `num_examples` axis):

| index | rule | a row |
|---|---|---|
| 0 | constant | (c, c, c), c ~ U{0..V−1} |
| 1–4 | progression +1, +2, −1, −2 | (s, s + δ, s + 2δ) mod V, s ~ U{0..V−1} |
| 5 | arithmetic add | (a, b, (a + b) mod V) |
| 6 | arithmetic subtract | (a, b, (a − b) mod V) |
| 7 | distribute-three | a permutation of `grid` distinct symbols, the same symbols in every row, each row permuted independently |

Where this differs from the authors' code:

- numpy's generators instead of jax's: the same rules and split *procedure*, other draws (the
  held-out latents for seed s are not the authors' for seed s);
- the split redraws its permutation until every rule occurs among the held-out latents (the
  authors draw once and only log a warning when a rule is missing; issue 27 asks for coverage);
- `permute_features` permutes the features per column position of the grid, the same
  permutation in every row, as the authors' code does (LITERATURE.md says "per row"; the code's
  vectorised axis is the column).

The task family `sraven`. A cell is a latent (the sorted rule tuple, one component per feature,
8 values each). An instance is a deterministic function of the latent and of an input
u ∈ [0, 1)^(F + 1): feature k's draws come from a generator seeded by u_k, the feature permutation
from u_F. So the cells are *function-valued* (compbench.tasks.base.CellSamples): training
instances are drawn per training latent, and every latent is evaluated at one shared set of u,
drawn apart from the training ones, like the modular teacher's inputs. The target, the last
panel's F features, is one class of V^F (the features' values as the digits of a base-V number):
a panel counts as right only when every feature is, where the authors score each feature's class
(their loss is a cross-entropy per feature). The encodings (compbench.encodings.raven): `raven_onehot`
(the 8 panels' one-hot features, flattened, for kernels and MLPs) and `raven_panels` (panel tokens
for the sequence adapters, training instances streamed).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations_with_replacement
from typing import Any

import numpy as np
from pydantic import Field

from compbench.tasks.base import CellSamples, TaskData, TaskParamError
from compbench.tasks.registry import TaskParams, register_family

__all__ = ["RULES", "RavenParams", "RavenSpec", "instance_of", "instances", "latents", "rule_grid", "split_latents"]

RULES = ("constant", "progression+1", "progression+2", "progression-1", "progression-2", "add", "subtract", "distribute_three")
_INCREMENTS = {1: 1, 2: 2, 3: -1, 4: -2}
_SPLIT_ATTEMPTS = 1000


def rule_grid(rule: int, values: int, rng: Any, grid: int = 3) -> np.ndarray:
    """One feature's (grid × grid) values 0..V−1 under `rule` (an index into RULES), rows drawn independently."""
    if rule == 0:
        c = rng.integers(0, values, size=(grid, 1))
        return np.broadcast_to(c, (grid, grid)).copy()
    if rule in _INCREMENTS:
        start = rng.integers(0, values, size=(grid, 1))
        return (start + _INCREMENTS[rule] * np.arange(grid)[None, :]) % values
    if rule in (5, 6):
        xs = rng.integers(0, values, size=(grid, grid - 1))
        signed = xs.copy()
        if rule == 6:
            signed[:, 1:] *= -1
        return np.concatenate([xs, signed.sum(axis=1, keepdims=True) % values], axis=1)
    if rule == 7:
        if values < grid:
            raise ValueError(f"distribute-three needs at least {grid} values, got {values}")
        symbols = rng.choice(values, size=grid, replace=False)
        return np.stack([symbols[rng.permutation(grid)] for _ in range(grid)])
    raise ValueError(f"rule must be 0..{len(RULES) - 1}, got {rule}")


def latents(features: int) -> np.ndarray:
    """Every multiset of `features` rules, one row each, sorted within the row (the authors' order)."""
    return np.array(list(combinations_with_replacement(range(len(RULES)), features)), dtype=np.int64)


def split_latents(features: int, heldout_fraction: float = 0.25, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(train, held-out) masks over `latents(features)`: int(n · fraction) held out at random, redrawn until
    every rule occurs among the held-out latents."""
    lat = latents(features)
    n = len(lat)
    n_out = int(n * heldout_fraction)
    if n_out == 0 or n_out == n:
        raise ValueError(f"heldout_fraction {heldout_fraction} holds out {n_out} of {n} latents")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 6]))
    for _ in range(_SPLIT_ATTEMPTS):
        perm = rng.permutation(n)
        held = np.zeros(n, dtype=bool)
        held[perm[:n_out]] = True
        if len(np.unique(lat[held])) == len(RULES):
            return ~held, held
    raise ValueError(f"no split holding out {n_out} of {n} latents covers every rule in {_SPLIT_ATTEMPTS} draws")


def instances(latent: np.ndarray, n: int, values: int, rng: np.random.Generator, grid: int = 3,
              permute_features: bool = False) -> np.ndarray:
    """n instances of a latent: (n, grid², features) panel values, panels in row-major order."""
    latent = np.asarray(latent)
    f = len(latent)
    out = np.empty((n, grid, grid, f), dtype=np.int64)
    for i in range(n):
        for k, rule in enumerate(latent):
            out[i, :, :, k] = rule_grid(int(rule), values, rng, grid)
        if permute_features:
            for j in range(grid):  # one permutation per column position, the same in every row
                out[i, :, j, :] = out[i, :, j, :][:, rng.permutation(f)]
    return out.reshape(n, grid * grid, f)


_U_SCALE = float(2**53)


def instance_of(latent: np.ndarray, u: np.ndarray, values: int, grid: int = 3, permute_features: bool = False) -> np.ndarray:
    """The (grid², F) panel values of a latent at input u ∈ [0, 1)^(F + 1): feature k drawn from a generator
    seeded by u_k, the per-column feature permutation by u_F (a deterministic function of (latent, u))."""
    latent = np.asarray(latent)
    f = len(latent)
    out = np.empty((grid, grid, f), dtype=np.int64)
    for k, rule in enumerate(latent):
        out[:, :, k] = rule_grid(int(rule), values, np.random.default_rng(int(u[k] * _U_SCALE)), grid)
    if permute_features:
        rng = np.random.default_rng(int(u[f] * _U_SCALE))
        for j in range(grid):
            out[:, j, :] = out[:, j, :][:, rng.permutation(f)]
    return out.reshape(grid * grid, f)


class RavenParams(TaskParams):
    """Symbolic Raven matrices: F features of V values, 8 rules, a quarter of the rule multisets held out."""

    features: int = Field(default=2, ge=1, le=6, description="F: features per panel (the authors: 4)")
    values: int = Field(default=5, ge=3, description="V: values per feature (distribute-three needs ≥ 3)")
    heldout_fraction: float = Field(default=0.25, gt=0, lt=1, description="fraction of latents held out (the authors: 0.25)")
    permute_features: bool = Field(default=False, description="permute the features per column position (the authors: yes)")
    samples_per_cell: int = Field(default=32, ge=1, description="training instances per training latent (fixed-sample models)")
    eval_samples: int = Field(default=32, ge=1, description="evaluation inputs u, shared by every latent")
    seed: int = Field(default=0, ge=0, description="seeds the split, the training and the evaluation inputs")


@dataclass(frozen=True)
class RavenSpec:
    """What sRAVEN instances are drawn from (for the encodings): latents, training latents, F, V, permutation."""

    latents: np.ndarray
    train_ids: np.ndarray
    features: int
    values: int
    permute_features: bool
    seed: int
    grid: int = 3

    def panels(self, cell_ids: np.ndarray, u: np.ndarray) -> np.ndarray:
        """(n, grid², F) panel values of latent `cell_ids[i]` at input `u[i]`."""
        return np.stack([instance_of(self.latents[c], uu, self.values, self.grid, self.permute_features)
                         for c, uu in zip(np.asarray(cell_ids), np.asarray(u))])

    def classes(self, panels: np.ndarray) -> np.ndarray:
        """The last panel's features as one class of V^F (base-V digits, feature 0 lowest)."""
        last = panels[:, -1, :]
        return (last * self.values ** np.arange(self.features)).sum(axis=1).astype(np.int64)

    def rng(self, seed: int) -> np.random.Generator:
        """A training seed's generator of fresh instances."""
        return np.random.default_rng(np.random.SeedSequence([int(self.seed), 6, 2, int(seed)]))

    def draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
        """n fresh training instances: (latent ids (n,), panels (n, grid², F))."""
        ids = self.train_ids[rng.integers(0, len(self.train_ids), size=n)]
        u = rng.random((n, self.features + 1))
        return ids, self.panels(ids, u)


@register_family("sraven", RavenParams)
def build_sraven(p: RavenParams) -> TaskData:
    """Latents (rule multisets) as function-valued cells whose samples are Raven instances; the last panel as a class."""
    from compbench.limits import TooLargeError, limits

    if p.values ** p.features > 4096:
        raise TaskParamError(("values",), f"V^F = {p.values}^{p.features} classes is more than 4096")
    lat = latents(p.features)
    n = len(lat)
    if n * (p.samples_per_cell + p.eval_samples) > limits().samples_per_task:
        raise TooLargeError("the task's instances (latents × (samples_per_cell + eval_samples))",
                            n * (p.samples_per_cell + p.eval_samples), limits().samples_per_task, "--max-cells")
    try:
        train, held = split_latents(p.features, p.heldout_fraction, p.seed)
    except ValueError as exc:
        raise TaskParamError(("heldout_fraction",), str(exc)) from None
    train_ids = np.flatnonzero(train)
    spec = RavenSpec(lat, train_ids, p.features, p.values, p.permute_features, p.seed)
    streams = np.random.SeedSequence([p.seed, 6, 1]).spawn(2)
    u_train = np.random.default_rng(streams[0]).random((len(train_ids) * p.samples_per_cell, p.features + 1))
    train_cells = np.repeat(train_ids, p.samples_per_cell)
    u_eval = np.random.default_rng(streams[1]).random((p.eval_samples, p.features + 1))
    y_train = spec.classes(spec.panels(train_cells, u_train))
    y_eval = np.stack([spec.classes(spec.panels(np.full(p.eval_samples, c), u_eval)) for c in range(n)])
    mode = np.array([np.bincount(row).argmax() for row in y_eval], dtype=np.int64)
    return TaskData(
        "sraven", lat, mode, train, (len(RULES),) * p.features, "multiclass", p.model_dump(),
        tuple(f"f{k}" for k in range(p.features)), allow_unseen_values=True,
        value_labels=(RULES,) * p.features, n_classes=p.values ** p.features,
        samples=CellSamples(u_train, train_cells, y_train, u_eval, y_eval), episodes=spec,
    )
