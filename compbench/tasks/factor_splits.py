"""Split rules over factor values, for any grid task (docs/explanation/suites/factor-grid.md).

A grid task's cells are value combinations of named factors (components); a rule says which cells
are held out from the values they take. Every rule is a pure function of the cells, so any family
whose cells form a grid can use it (the `sprites` family does; see `split_mask`):

* `random`: a seeded fraction of cells, redrawn until every value of every factor is trained.
* `corner`: a block of two or more factors' values held out together; a cell is held out when
  *every* listed factor takes a listed value (composition: each value is trained with the other
  factors' remaining values). A number n stands for the values n, n+1, …, the top of the factor.
* `interior`: a cell is held out when *any* listed factor takes a listed value; listed values must
  be interior (neither the first nor the last), so they are bracketed by trained values
  (interpolation). The listed values are then in no training cell: as for `beyond`, the task must
  declare `allow_unseen_values: true`.
* `beyond`: a cell is held out when any listed factor takes a value ≥ its threshold
  (extrapolation). Such values are in no training cell, which a task must declare with
  `allow_unseen_values: true`; without it the split is refused.

Values are indices 0..n−1 of each factor, as in the cells.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field

from compbench.tasks.base import TaskParamError
from compbench.tasks.registry import TaskParams

MAX_DRAWS = 1000  # random: draws tried before giving up on training every value

RULES = ("random", "corner", "interior", "beyond")


class FactorSplit(TaskParams):
    """A split rule over factor values: random, corner (composition), interior (interpolation), beyond (extrapolation)."""

    rule: Literal["random", "corner", "interior", "beyond"] = Field(description="which rule holds cells out")
    fraction: float = Field(default=0.25, gt=0, lt=1, description="random: fraction of cells held out")
    seed: int = Field(default=0, ge=0, description="random: seeds the draw")
    values: dict[str, int | list[int]] = Field(
        default_factory=dict,
        description="corner/interior: held-out values per factor (a number n: the values n..top); beyond: the threshold per factor",
    )


def _values(rule: str, name: str, spec: int | list[int], n: int, loc: tuple[str | int, ...]) -> np.ndarray:
    """The held-out value indices of one factor, checked against its n values."""
    if isinstance(spec, int):
        if not 0 < spec < n:
            raise TaskParamError(loc, f"{name} has values 0..{n - 1}; a threshold must be 1..{n - 1} (a number n holds out n..{n - 1}), got {spec}")
        return np.arange(spec, n)
    if rule == "beyond":
        raise TaskParamError(loc, f"'beyond' takes one threshold per factor (values ≥ it are held out), got the list {spec}")
    if not spec:
        raise TaskParamError(loc, f"lists no values of {name}")
    bad = [v for v in spec if not 0 <= v < n]
    if bad:
        raise TaskParamError(loc, f"{name} has values 0..{n - 1}, got {bad}")
    if len(set(spec)) != len(spec):
        raise TaskParamError(loc, f"lists a value of {name} twice: {spec}")
    if len(spec) == n:
        raise TaskParamError(loc, f"holds out every value of {name}; leave at least one in training")
    return np.asarray(sorted(spec), dtype=np.int64)


def split_mask(split: FactorSplit, cells: np.ndarray, n_values: tuple[int, ...], names: tuple[str, ...],
               allow_unseen_values: bool = False, loc: tuple[str | int, ...] = ("split",)) -> np.ndarray:
    """The training mask a rule gives on a grid's cells (n × C value indices); TaskParamError at `loc` when it cannot."""
    n_values = tuple(int(n) for n in n_values)
    if split.rule == "random":
        if split.values:
            raise TaskParamError((*loc, "values"), "'random' takes fraction and seed, not values")
        return _random(split, cells, n_values, names, loc)
    if not split.values:
        raise TaskParamError((*loc, "values"), f"'{split.rule}' needs values: the held-out values (or thresholds) per factor")
    need = 2 if split.rule == "corner" else 1
    if len(split.values) < need:
        raise TaskParamError((*loc, "values"), "'corner' holds out a block of two or more factors' values; list at least two factors")
    held_parts = []
    for name, spec in split.values.items():
        at = (*loc, "values", name)
        if name not in names:
            raise TaskParamError(at, f"unknown factor {name!r}; known: {', '.join(names)}")
        c = names.index(name)
        vals = _values(split.rule, name, spec, n_values[c], at)
        if split.rule == "interior":
            ends = [int(v) for v in vals if v in (0, n_values[c] - 1)]
            if ends:
                raise TaskParamError(
                    at, f"value(s) {ends} of {name} are not interior (its values are 0..{n_values[c] - 1}): holding out an end "
                    "value is extrapolation; use rule 'beyond' (with allow_unseen_values: true)",
                )
        held_parts.append(np.isin(cells[:, c], vals))
    held = np.logical_and.reduce(held_parts) if split.rule == "corner" else np.logical_or.reduce(held_parts)
    train = ~held
    if not train.any():
        raise TaskParamError((*loc, "values"), "holds out every cell; hold out fewer values")
    if not held.any():
        raise TaskParamError((*loc, "values"), "holds out no cell")
    unseen = unseen_values(cells, train, n_values)
    if unseen and not allow_unseen_values:
        c, v = unseen[0]
        more = f" (and {len(unseen) - 1} more value(s))" if len(unseen) > 1 else ""
        kind = {"beyond": "extrapolation: ", "interior": "interpolation: "}.get(split.rule, "")
        why = kind + f"every cell with {names[c]} = {v} is held out"
        raise TaskParamError(
            (*loc, "rule"),
            f"rule '{split.rule}' leaves {names[c]} value {v} in no training cell{more} ({why}); a split whose held-out "
            "values are never trained must say so: set allow_unseen_values: true in the task's params",
        )
    return train


def unseen_values(cells: np.ndarray, train: np.ndarray, n_values: tuple[int, ...]) -> list[tuple[int, int]]:
    """(factor, value) pairs that occur in no training cell."""
    out = []
    for c, n in enumerate(n_values):
        seen = np.bincount(cells[train, c], minlength=n)
        out += [(c, int(v)) for v in np.flatnonzero(seen == 0)]
    return out


def _random(split: FactorSplit, cells: np.ndarray, n_values: tuple[int, ...], names: tuple[str, ...],
            loc: tuple[str | int, ...]) -> np.ndarray:
    n = len(cells)
    k = round(split.fraction * n)
    if not 0 < k < n:
        raise TaskParamError((*loc, "fraction"), f"holds out round({split.fraction} × {n}) = {k} of {n} cells; it must hold out some and keep some")
    rng = np.random.default_rng(split.seed)
    for _ in range(MAX_DRAWS):
        train = np.ones(n, dtype=bool)
        train[rng.choice(n, size=k, replace=False)] = False
        if not unseen_values(cells, train, n_values):
            return train
    raise TaskParamError(
        (*loc, "fraction"), f"none of {MAX_DRAWS} draws of {k} held-out cells (seed {split.seed}) trains every value of every factor; hold out fewer"
    )
