"""The `table` family: a compositional task declared entirely in suite YAML (docs/how-to/tasks.md)."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BeforeValidator, Discriminator, Field, FiniteFloat, Tag, model_validator

from compbench.tasks.base import TaskData, TaskParamError, grid
from compbench.tasks.registry import TaskParams, register_family

MAX_CELLS = 100_000  # kernel regression on more cells than this is out of reach anyway
MAX_DRAWS = 1000  # random split: draws tried before giving up on covering every value
_SHOWN = 5  # cells named in a message before "and N more"


def _label_text(v: Any) -> str | None:
    """A label as text: strings as they are, numbers as str(); None for anything else."""
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    return None


def _as_label(v: Any) -> Any:
    if isinstance(v, bool):
        # YAML 1.1 reads yes/no/on/off/true/false as booleans: name the trap.
        raise ValueError(f"a label must be text or a number, got the boolean {v}; quote it (YAML reads yes/no/on/off as booleans)")
    text = _label_text(v)
    return v if text is None else text


Label = Annotated[str, BeforeValidator(_as_label)]


def _as_class_label(v: Any) -> str:
    if isinstance(v, bool):
        raise ValueError(f"a class label must be text or an integer, got the boolean {v}; quote it (YAML reads yes/no/on/off as booleans)")
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        if not v:
            raise ValueError("a class label must not be empty")
        return v
    raise ValueError(f"a class label must be text or an integer, got {v!r}")


ClassLabel = Annotated[str, BeforeValidator(_as_class_label)]


def _entry_kind(v: Any) -> str:
    return "vector" if isinstance(v, list) else "number"


# A target value: one number, or a K-vector (a list) for K-output regression. The tag keeps
# a scalar mistake's pydantic error exactly as it was before vectors existed (one error, no union noise).
Entry = Annotated[
    Annotated[FiniteFloat, Tag("number")] | Annotated[list[FiniteFloat], Field(min_length=1), Tag("vector")],
    Discriminator(_entry_kind),
]


class Component(TaskParams):
    """A component: its name and its value labels (`values`), or `n` values labelled "0".."n-1"."""

    name: Label
    values: list[Label] | None = Field(default=None, min_length=1, description="value labels, in order")
    n: int | None = Field(default=None, ge=1, le=MAX_CELLS, description="number of values, labelled 0..n-1")

    @model_validator(mode="after")
    def _values_or_n(self) -> Component:
        if (self.values is None) == (self.n is None):
            raise ValueError("give exactly one of 'values' (a list of labels) or 'n' (a number of values, labelled 0..n-1)")
        return self

    @property
    def labels(self) -> tuple[str, ...]:
        """The value labels in order."""
        return tuple(self.values) if self.values is not None else tuple(str(v) for v in range(self.n or 0))


class PairTerm(TaskParams):
    """An interaction term: `values[i][j]` is added where the first component has value i and the second j."""

    components: list[Label] = Field(min_length=2, max_length=2)
    values: list[list[Entry]]


class Target(TaskParams):
    """Targets: `sum` of per-component values (plus `pairs`), or `cells` listing every cell's target."""

    sum: dict[Label, list[Entry]] | None = Field(default=None, description="component name -> value (number or K-vector) per label")
    pairs: list[PairTerm] = Field(default_factory=list, description="interaction terms added to the sum")
    cells: list[list[Any]] | None = Field(default=None, description="rows [label, ..., label, target], every cell once")
    classes: list[ClassLabel] | None = Field(
        default=None, min_length=2, description="kind: multiclass: the class labels, in class-index order (default: sorted)"
    )


class RandomSplit(TaskParams):
    """Hold out round(random · n_cells) cells drawn with numpy.random.default_rng(seed)."""

    random: float = Field(gt=0, lt=1)
    seed: int = Field(default=0, ge=0)


class TableParams(TaskParams):
    """A compositional task declared in YAML: labelled components, targets, a held-out set."""

    components: list[Component] = Field(min_length=1)
    target: Target
    kind: Literal["regression", "classification", "multiclass"] = "regression"
    held_out: list[list[Label]] | None = Field(default=None, description="held-out cells as label rows")
    split: RandomSplit | None = None
    relevant: list[Label] | None = Field(default=None, description="the components the target depends on (enables the irrelevant share)")


class _Grid:
    """Names, labels and the cells of a table, with label lookup and cell formatting."""

    def __init__(self, components: list[Component]) -> None:
        self.names = tuple(c.name for c in components)
        self.labels = tuple(c.labels for c in components)
        for i, comp in enumerate(components):
            if not comp.name:
                raise TaskParamError(("components", i, "name"), "a component name must not be empty")
            if comp.name in self.names[:i]:
                j = self.names.index(comp.name)
                raise TaskParamError(
                    ("components", i, "name"), f"component name {comp.name!r} is used twice (components[{j}] and components[{i}]); names must differ"
                )
            for k, label in enumerate(self.labels[i]):
                if not label:
                    raise TaskParamError(("components", i, "values", k), "a label must not be empty")
                if label in self.labels[i][:k]:
                    raise TaskParamError(
                        ("components", i, "values", k), f"{comp.name} label {label!r} is listed twice; labels of a component must differ"
                    )
        self.n_values = tuple(len(labels) for labels in self.labels)
        n_cells = math.prod(self.n_values)
        if n_cells > MAX_CELLS:
            raise TaskParamError(
                ("components",), f"the grid has {' × '.join(map(str, self.n_values))} = {n_cells} cells; at most {MAX_CELLS} are supported"
            )
        self.index = [{label: v for v, label in enumerate(labels)} for labels in self.labels]
        self.cells = grid(self.n_values)

    def component(self, name: str, loc: tuple[str | int, ...]) -> int:
        """Index of the component called `name`, or a TaskParamError at `loc`."""
        if name not in self.names:
            raise TaskParamError(loc, f"unknown component {name!r}; known: {', '.join(self.names)}")
        return self.names.index(name)

    def cell_index(self, row: list[Any], loc: tuple[str | int, ...], what: str) -> int:
        """Grid index of a row of labels (one per component, in order), or a TaskParamError at `loc`."""
        if len(row) != len(self.names):
            raise TaskParamError(
                loc, f"{what} needs {len(self.names)} labels, one per component ({', '.join(self.names)}), got {len(row)}"
            )
        values = []
        for c, raw in enumerate(row):
            text = _label_text(raw)
            if text is None or text not in self.index[c]:
                raise TaskParamError(loc, f"unknown {self.names[c]} label {raw!r}; known: {', '.join(self.labels[c])}")
            values.append(self.index[c][text])
        return int(np.ravel_multi_index(tuple(values), self.n_values))

    def fmt(self, i: int) -> str:
        """A cell as '(red, circle)'."""
        return "(" + ", ".join(self.labels[c][int(v)] for c, v in enumerate(self.cells[i])) + ")"

    def fmt_many(self, indices: np.ndarray | list[int]) -> str:
        """Up to _SHOWN cells, then how many more."""
        shown = ", ".join(self.fmt(int(i)) for i in indices[:_SHOWN])
        return shown + (f" and {len(indices) - _SHOWN} more" if len(indices) > _SHOWN else "")


def _loc_text(loc: tuple[str | int, ...]) -> str:
    """A params location as the suite writes it: target.sum.colour[0]."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _width_text(k: int) -> str:
    return "a number" if k == 0 else f"a vector of {k} numbers"


class _Width:
    """The targets' width, fixed by the first value seen: 0 for numbers, K for K-vectors."""

    def __init__(self) -> None:
        self.k: int | None = None
        self.where = ""

    def check(self, value: Any, loc: tuple[str | int, ...]) -> None:
        """Record the first value's width; a later value of another width is a TaskParamError at `loc`."""
        k = len(value) if isinstance(value, list) else 0
        if self.k is None:
            self.k, self.where = k, _loc_text(loc)
        elif k != self.k:
            raise TaskParamError(
                loc, f"is {_width_text(k)}, but {self.where} is {_width_text(self.k)}; every target value must be a number, "
                "or every one a vector of the same length (one number per output)",
            )

    def zeros(self, n: int) -> np.ndarray:
        """Zero targets for n cells: (n,) for numbers (or no values at all), (n, K) for K-vectors."""
        return np.zeros((n, self.k) if self.k else n)


def _sum_targets(t: Target, g: _Grid) -> np.ndarray:
    width = _Width()
    terms: list[tuple[np.ndarray, np.ndarray]] = []  # (per-value table, its row index per cell), summed once widths agree
    for name, values in (t.sum or {}).items():
        loc: tuple[str | int, ...] = ("target", "sum", name)
        c = g.component(name, loc)
        if len(values) != g.n_values[c]:
            raise TaskParamError(
                loc, f"needs {g.n_values[c]} values, one per {name} label ({', '.join(g.labels[c])}), got {len(values)}"
            )
        for v, value in enumerate(values):
            width.check(value, (*loc, v))
        terms.append((np.asarray(values, dtype=np.float64), g.cells[:, c]))
    for k, pair in enumerate(t.pairs):
        at: tuple[str | int, ...] = ("target", "pairs", k)
        a, b = (g.component(name, (*at, "components", j)) for j, name in enumerate(pair.components))
        if a == b:
            raise TaskParamError(
                (*at, "components", 1), f"names component {g.names[a]!r} twice; a pair term needs two different components"
            )
        if len(pair.values) != g.n_values[a]:
            raise TaskParamError(
                (*at, "values"),
                f"needs {g.n_values[a]} rows, one per {g.names[a]} label ({', '.join(g.labels[a])}), got {len(pair.values)}",
            )
        for i, row in enumerate(pair.values):
            if len(row) != g.n_values[b]:
                raise TaskParamError(
                    (*at, "values", i),
                    f"row {i} ({g.names[a]} {g.labels[a][i]!r}) needs {g.n_values[b]} values, one per {g.names[b]} label "
                    f"({', '.join(g.labels[b])}), got {len(row)}",
                )
            for j, value in enumerate(row):
                width.check(value, (*at, "values", i, j))
        table = np.asarray(pair.values, dtype=np.float64)
        terms.append((table.reshape(-1, *table.shape[2:]), g.cells[:, a] * g.n_values[b] + g.cells[:, b]))
    y = width.zeros(len(g.cells))
    for table, index in terms:
        y += table[index]
    return y


def _cell_value(raw: Any, loc: tuple[str | int, ...], multiclass: bool) -> Any:
    """A row's target: a class label (text) for multiclass, else a float or a list of floats."""
    if multiclass:
        if isinstance(raw, bool) or not isinstance(raw, (str, int)) or raw == "":
            raise TaskParamError(loc, f"a multiclass target (the last entry) must be a class label, text or an integer, got {raw!r}")
        return str(raw)
    if isinstance(raw, list):
        if not raw:
            raise TaskParamError(loc, "the target vector (the last entry) is empty; give one number per output")
        out = [_finite(x) for x in raw]
        if any(math.isnan(x) for x in out):
            raise TaskParamError(loc, f"the target vector (the last entry) must hold finite numbers, got {raw!r}")
        return out
    value = _finite(raw)
    if math.isnan(value):
        hint = " (class labels need kind: multiclass)" if isinstance(raw, str) else ""
        raise TaskParamError(loc, f"the target (the last entry) must be a finite number, got {raw!r}{hint}")
    return value


def _finite(raw: Any) -> float:
    """A YAML number as a finite float; NaN for anything else (text, booleans, infinities)."""
    if not isinstance(raw, (int, float)) or isinstance(raw, bool):
        return math.nan
    try:
        value = float(raw)
    except OverflowError:
        return math.nan
    return value if math.isfinite(value) else math.nan


def _class_order(labels: list[str]) -> list[str]:
    """Inferred class order: numerically when every label is an integer, else as text."""
    if all(re.fullmatch(r"-?[0-9]+", label) for label in labels):
        return sorted(labels, key=lambda label: (int(label), label))
    return sorted(labels)


def _cell_targets(t: Target, g: _Grid, multiclass: bool) -> tuple[np.ndarray, list[int], tuple[str, ...]]:
    """Targets by grid index, for each grid index the row that gave it, and the class labels (multiclass)."""
    rows = t.cells or []
    values: list[Any] = [None] * len(g.cells)
    row_of = [-1] * len(g.cells)
    n_comp = len(g.names)
    width = _Width()
    for k, row in enumerate(rows):
        loc: tuple[str | int, ...] = ("target", "cells", k)
        if len(row) != n_comp + 1:
            raise TaskParamError(
                loc, f"a row is {n_comp} labels ({', '.join(g.names)}) then the target, {n_comp + 1} entries; got {len(row)}"
            )
        i = g.cell_index(row[:n_comp], loc, "a row")
        value = _cell_value(row[n_comp], loc, multiclass)
        if row_of[i] >= 0:
            raise TaskParamError(loc, f"cell {g.fmt(i)} is listed twice (first at cells[{row_of[i]}]); list every cell exactly once")
        if not multiclass:
            width.check(value, loc)
        values[i], row_of[i] = value, k
    missing = np.flatnonzero(np.asarray(row_of) < 0)
    if len(missing):
        raise TaskParamError(
            ("target", "cells"), f"{len(missing)} of {len(g.cells)} cells are missing: {g.fmt_many(missing)}; list every cell exactly once"
        )
    if not multiclass:
        return np.asarray(values, dtype=np.float64), row_of, ()
    classes = _classes(t, values, row_of)
    index = {label: c for c, label in enumerate(classes)}
    return np.asarray([index[v] for v in values], dtype=np.int64), row_of, classes


def _classes(t: Target, values: list[str], row_of: list[int]) -> tuple[str, ...]:
    """The class labels in index order: declared in `classes`, or the labels the cells use, sorted."""
    if t.classes is None:
        used = _class_order(list(set(values)))
        if len(used) < 2:
            raise TaskParamError(
                ("target", "cells"), f"every cell has class {used[0]!r}; a multiclass task needs at least 2 classes"
            )
        return tuple(used)
    for k, label in enumerate(t.classes):
        if label in t.classes[:k]:
            raise TaskParamError(("target", "classes", k), f"class {label!r} is listed twice (first at classes[{t.classes.index(label)}])")
    known = set(t.classes)
    for i in sorted(range(len(values)), key=lambda i: row_of[i]):
        if values[i] not in known:
            raise TaskParamError(
                ("target", "cells", row_of[i]), f"unknown class {values[i]!r}; known (target.classes): {', '.join(t.classes)}"
            )
    return tuple(t.classes)


def _targets(p: TableParams, g: _Grid) -> tuple[np.ndarray, tuple[str, ...]]:
    """The targets by grid index, and the class labels of a multiclass task (else empty)."""
    t = p.target
    if t.sum is not None and t.cells is not None:
        raise TaskParamError(("target", "cells"), "give exactly one of 'sum' or 'cells', got both")
    if t.sum is None and t.cells is None:
        raise TaskParamError(
            ("target",), "give exactly one of 'sum' (per-component values, plus optional 'pairs'; 'sum: {}' for pairs alone) or 'cells' (every cell's target)"
        )
    if t.classes is not None and p.kind != "multiclass":
        raise TaskParamError(("target", "classes"), f"names the classes of a kind: multiclass task, but this task is kind: {p.kind}")
    row_of: list[int] = []
    classes: tuple[str, ...] = ()
    if t.cells is not None:
        if t.pairs:
            raise TaskParamError(("target", "pairs"), "'pairs' add to 'sum'; with 'cells' every target is given directly, so drop 'pairs' or use 'sum'")
        y, row_of, classes = _cell_targets(t, g, p.kind == "multiclass")
    else:
        if p.kind == "multiclass":
            raise TaskParamError(
                ("target", "sum"), "kind: multiclass takes one class label per cell from 'cells'; 'sum' adds up numbers"
            )
        y = _sum_targets(t, g)
        if not np.all(np.isfinite(y)):
            bad = np.flatnonzero(~np.all(np.isfinite(y.reshape(len(y), -1)), axis=1))
            raise TaskParamError(("target",), f"targets overflow to infinity at {g.fmt_many(bad)}")
    if p.kind == "classification":
        loc: tuple[str | int, ...] = ("target", "cells", row_of[0]) if row_of else ("target", "sum")
        if y.ndim == 2:
            raise TaskParamError(
                loc, f"kind: classification takes one target of -1 or +1 per cell, but the targets are vectors of {y.shape[1]} numbers; "
                "use kind: regression for several outputs (or kind: multiclass with class labels)",
            )
        bad = np.flatnonzero(~np.isin(y, (-1.0, 1.0)))
        if len(bad):
            i = int(bad[0])
            loc = ("target", "cells", row_of[i]) if row_of else ("target", "sum")
            more = f" (and {len(bad) - 1} more cells)" if len(bad) > 1 else ""
            raise TaskParamError(
                loc, f"classification targets must be exactly -1 or +1, but cell {g.fmt(i)} has {y[i]:g}{more}; use kind: regression or targets of ±1"
            )
    return y, classes


def _relevant(p: TableParams, g: _Grid, y: np.ndarray, classes: tuple[str, ...]) -> tuple[int, ...] | None:
    """Indices of the declared relevant components, after checking the target ignores the rest."""
    if p.relevant is None:
        return None
    if not p.relevant:
        raise TaskParamError(("relevant",), "is empty; list the components the target depends on (at least one), or leave 'relevant' out")
    chosen: list[int] = []
    for k, name in enumerate(p.relevant):
        c = g.component(name, ("relevant", k))
        if c in chosen:
            raise TaskParamError(("relevant", k), f"component {name!r} is listed twice (first at relevant[{p.relevant.index(name)}])")
        chosen.append(c)
    rest = [c for c in range(len(g.names)) if c not in chosen]
    if rest:
        # Every cell must have the target of the cell with the same relevant values and value 0 of the rest.
        base = g.cells.copy()
        base[:, rest] = 0
        ref = np.ravel_multi_index(tuple(base.T), g.n_values)
        rows = y.reshape(len(y), -1)
        bad = np.flatnonzero(np.any(rows != rows[ref], axis=1))
        if len(bad):
            i = int(bad[0])
            j = int(ref[i])

            def show(cell: int) -> str:
                if classes:
                    return f"class {classes[int(y[cell])]!r}"
                return f"{y[cell]:g}" if y.ndim == 1 else "[" + ", ".join(f"{v:g}" for v in y[cell]) + "]"

            left_out = ", ".join(g.names[c] for c in rest)
            raise TaskParamError(
                ("relevant",),
                f"the target depends on components relevant leaves out ({left_out}): {g.fmt(j)} has {show(j)} but {g.fmt(i)} has "
                f"{show(i)}; list every component the target depends on",
            )
    return tuple(sorted(chosen))


def _unseen(g: _Grid, train: np.ndarray) -> list[tuple[int, int]]:
    """(component, value) pairs that occur in no training cell."""
    seen = [np.bincount(g.cells[train, c], minlength=g.n_values[c]) for c in range(len(g.names))]
    return [(c, int(v)) for c in range(len(g.names)) for v in np.flatnonzero(seen[c] == 0)]


def _explicit_split(rows: list[list[str]], g: _Grid) -> np.ndarray:
    if not rows:
        raise TaskParamError(("held_out",), "is empty; list at least one held-out cell (a row of labels, one per component)")
    entry_of: dict[int, int] = {}
    for k, row in enumerate(rows):
        i = g.cell_index(row, ("held_out", k), "a held-out cell")
        if i in entry_of:
            raise TaskParamError(("held_out", k), f"cell {g.fmt(i)} is listed twice (first at held_out[{entry_of[i]}])")
        entry_of[i] = k
    held = list(entry_of)
    train = np.ones(len(g.cells), dtype=bool)
    train[held] = False
    unseen = _unseen(g, train)
    if unseen:
        # Blame the entry that held out the last training cell with that value.
        blamed = []
        for c, v in unseen:
            cells = np.flatnonzero(g.cells[:, c] == v)
            blamed.append((max(entry_of[int(i)] for i in cells), c, v, cells))
        k, c, v, cells = min(blamed, key=lambda b: b[0])
        label = g.labels[c][v]
        raise TaskParamError(
            ("held_out", k),
            f"holding out {g.fmt(held[k])} leaves {g.names[c]} {label!r} in no training cell (every cell with it is "
            f"held out: {g.fmt_many(cells)}); keep at least one of them in training",
        )
    return train


def _random_split(split: RandomSplit, g: _Grid) -> np.ndarray:
    n = len(g.cells)
    k = round(split.random * n)
    if k == 0:
        raise TaskParamError(("split", "random"), f"holds out round({split.random} × {n} cells) = 0 cells; raise it to hold out at least one")
    widest = int(np.argmax(g.n_values))
    most = n - g.n_values[widest]
    if k > most:
        raise TaskParamError(
            ("split", "random"),
            f"holds out round({split.random} × {n}) = {k} cells, but at most {most} can be held out with every value of every "
            f"component in some training cell ({g.names[widest]} alone has {g.n_values[widest]} values)",
        )
    rng = np.random.default_rng(split.seed)
    for _ in range(MAX_DRAWS):
        train = np.ones(n, dtype=bool)
        train[rng.choice(n, size=k, replace=False)] = False
        if not _unseen(g, train):
            return train
    raise TaskParamError(
        ("split",),
        f"none of {MAX_DRAWS} draws of {k} held-out cells with seed {split.seed} leaves every value of every component in "
        "training; lower 'random' or try another seed",
    )


@register_family("table", TableParams)
def build_table(p: TableParams) -> TaskData:
    """A task declared in YAML: labelled components, targets by sum (+ pairs) or by cell, a held-out set."""
    g = _Grid(p.components)
    y, classes = _targets(p, g)
    if (p.held_out is None) == (p.split is None):
        both = p.held_out is not None
        raise TaskParamError(
            ("split",) if both else (),
            f"give exactly one of 'held_out' (a list of cells) or 'split: {{random: fraction, seed: s}}', got {'both' if both else 'neither'}",
        )
    train = _explicit_split(p.held_out, g) if p.held_out is not None else _random_split(p.split, g)  # type: ignore[arg-type]
    relevant = _relevant(p, g, y, classes)
    return TaskData(
        "table", g.cells, y, train, g.n_values, p.kind, p.model_dump(), g.names, value_labels=g.labels,
        n_classes=len(classes), relevant=relevant,
    )
