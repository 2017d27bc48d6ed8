"""TaskData (a grid of conjunctions, targets and a split) and split validation."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np


class SplitError(ValueError):
    """A task's train/held-out split is invalid (empty side, or an unseen component value)."""


class TaskParamError(ValueError):
    """A task's parameters are wrong at a known place: `loc` is the path inside the task's params.

    The suite loader reports it as `file:line: tasks[i].params.<loc>: message`, with the line of
    that very entry, so families raise it from `build` for checks pydantic cannot express.
    """

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        self.loc = tuple(loc)
        self.message = message
        super().__init__(f"{'.'.join(map(str, loc))}: {message}" if loc else message)


@dataclass(frozen=True)
class TaskData:
    """Conjunctions `cells` (n × C ints), targets `y`, and which cells are trained on."""

    family: str
    cells: np.ndarray
    y: np.ndarray
    train_mask: np.ndarray
    n_values: tuple[int, ...]
    kind: str
    params: dict[str, Any] = field(default_factory=dict)
    component_names: tuple[str, ...] = ()
    allow_unseen_values: bool = False
    value_labels: tuple[tuple[str, ...], ...] = ()

    def label(self, c: int, v: int) -> str:
        """The label of value `v` of component `c` (`str(v)` when the task has no labels)."""
        return self.value_labels[c][v] if self.value_labels else str(v)

    @property
    def test_mask(self) -> np.ndarray:
        """Held-out cells."""
        return ~self.train_mask

    @property
    def n_components(self) -> int:
        """Number of components C."""
        return self.cells.shape[1]

    @property
    def n_train(self) -> int:
        """Number of training cells."""
        return int(self.train_mask.sum())

    @property
    def n_test(self) -> int:
        """Number of held-out cells."""
        return int((~self.train_mask).sum())


def grid(n_values: tuple[int, ...] | list[int]) -> np.ndarray:
    """All conjunctions in itertools.product order (last component fastest); sized before allocating."""
    from compbench.limits import TooLargeError, limits

    size = 1
    for n in n_values:
        size *= int(n)
    if size > limits().cells_per_task:
        raise TooLargeError(f"the task's grid ({_shape(n_values)}) in cells", size, limits().cells_per_task, "--max-cells")
    # np.indices in C order is itertools.product order, without a Python tuple per cell.
    return np.indices(tuple(int(n) for n in n_values), dtype=np.int64).reshape(len(n_values), -1).T.copy()


def _shape(n_values: tuple[int, ...] | list[int]) -> str:
    """'9 × 9' for few components; '40 components of 9 values' rather than forty factors."""
    ns = [int(n) for n in n_values]
    if len(ns) <= 6:
        return " × ".join(str(n) for n in ns)
    lo, hi = min(ns), max(ns)
    return f"{len(ns)} components of {lo if lo == hi else f'{lo}..{hi}'} values"


def validate_split(task: TaskData) -> None:
    """Reject empty train/held-out sets, unseen component values, bad targets."""
    if task.cells.ndim != 2 or len(task.cells) != len(task.y) or len(task.y) != len(task.train_mask):
        raise SplitError("cells, y and train_mask must have one row per cell")
    if task.kind not in ("classification", "regression"):
        raise SplitError(f"task kind must be 'classification' or 'regression', got {task.kind!r}")
    if not np.all(np.isfinite(task.y)):
        raise SplitError("targets must be finite")
    if task.kind == "classification" and not np.all(np.isin(task.y, (-1.0, 1.0))):
        raise SplitError("classification targets must be exactly ±1")
    if task.n_train == 0:
        raise SplitError("the split has no training cells")
    if task.n_test == 0:
        raise SplitError("the split has no held-out cells")
    if task.allow_unseen_values:
        return
    train, test = task.cells[task.train_mask], task.cells[~task.train_mask]
    for c in range(task.n_components):
        unseen = np.flatnonzero(~np.isin(test[:, c], train[:, c]))
        if len(unseen):
            cell = test[unseen[0]]
            name = task.component_names[c] if task.component_names else f"component {c}"
            raise SplitError(
                f"component {name!r} (index {c}) value {int(cell[c])} occurs in held-out cell "
                f"{tuple(int(v) for v in cell)} but in no training cell"
            )
