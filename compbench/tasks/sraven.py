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

Not yet a registered task family: compbench's function-valued cells evaluate every cell at one
shared set of inputs, while an sRAVEN instance's panels depend on its latent, so its samples need
per-sample class targets in scoring (see docs/episodes.md, "sRAVEN").
"""

from __future__ import annotations

from itertools import combinations_with_replacement
from typing import Any

import numpy as np

__all__ = ["RULES", "instances", "latents", "rule_grid", "split_latents"]

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
