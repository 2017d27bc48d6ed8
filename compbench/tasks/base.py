"""TaskData (a grid of conjunctions, targets and a split) and split validation."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compbench.errors import CompbenchError


class SplitError(CompbenchError, ValueError):
    """A task's train/held-out split is invalid (empty side, or an unseen component value)."""


class TaskParamError(CompbenchError, ValueError):
    """A task's parameters are wrong at a known place: `loc` is the path inside the task's params.

    The suite loader reports it as `file:line: tasks[i].params.<loc>: message`, with the line of
    that very entry, so families raise it from `build` for checks pydantic cannot express.
    """

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        self.loc = tuple(loc)
        self.message = message
        super().__init__(f"{'.'.join(map(str, loc))}: {message}" if loc else message)


from compbench.records import TASK_KINDS  # noqa: E402 — one definition, in the leaf package


@dataclass(frozen=True)
class CellSamples:
    """Function-valued cells: each cell is a function of a continuous input x.

    Training samples (`x_train`, their cell `train_cells`, targets `y_train`) exist for training
    cells only. Evaluation uses one shared set of inputs `x_eval` (m × I), drawn apart from the
    training inputs, at every cell: `y_eval` is (n_cells, m) — (n_cells, m, K) for K outputs —
    so each cell's predictions at the same x can be decomposed across cells (additivity).
    Multi-class targets are integer classes.
    """

    x_train: np.ndarray
    train_cells: np.ndarray
    y_train: np.ndarray
    x_eval: np.ndarray
    y_eval: np.ndarray

    @property
    def n_eval(self) -> int:
        """Evaluation inputs per cell (m)."""
        return int(len(self.x_eval))


@dataclass(frozen=True)
class TaskData:
    """Conjunctions `cells` (n × C ints), targets `y`, and which cells are trained on.

    Target shapes: `y` (n,) floats (±1 for `classification`), (n, K) floats for K outputs, or
    (n,) integer classes for `multiclass` (with `n_classes`). Function-valued cells carry their
    samples in `samples` (then `y` is each cell's mean target, for display). `relevant` names the
    components the target depends on (None: unknown or all), which enables the irrelevant share.
    `iid` (declared by a family for its controls): every cell is trained and the held-out score is
    taken on `heldout` cells with new samples, so the encoding must draw fresh evaluation samples.
    """

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
    n_classes: int = 0
    relevant: tuple[int, ...] | None = None
    samples: CellSamples | None = None
    iid: bool = False
    heldout: np.ndarray | None = None
    # Continuous features of each component's values (component c: n_values[c] × d_c), e.g. a slot's
    # (x, y, brightness); the `latents` encoding feeds them to models instead of one-hot codes.
    value_features: tuple[np.ndarray, ...] | None = None
    # Names of the outputs of a K-output task, one per column of `y` (e.g. the factors a `sprites` task
    # regresses). Names "f=v" form one-hot blocks of a factor f scored as a class. Enables the per-factor
    # metrics (scoring/metrics.factor_metrics).
    output_names: tuple[str, ...] = ()
    # Whether the runner fits the conjunction-wise additivity decomposition (its features grow with every
    # subset of components: a family may switch it off for many-component grids, where it is costly).
    additivity: bool = True
    # Episode tasks (compbench.tasks.episodes): what sequences of context pairs and a query are drawn
    # from, for the `episodes` encoding; None for every other task.
    episodes: Any = None

    def label(self, c: int, v: int) -> str:
        """The label of value `v` of component `c` (`str(v)` when the task has no labels)."""
        return self.value_labels[c][v] if self.value_labels else str(v)

    @property
    def test_mask(self) -> np.ndarray:
        """Cells scored as held out: the untrained cells, or an `iid` control's declared cells."""
        return ~self.train_mask if self.heldout is None else np.asarray(self.heldout, dtype=bool)

    @property
    def n_outputs(self) -> int:
        """Outputs per cell: classes, the target's width, or 1."""
        if self.n_classes:
            return self.n_classes
        return int(self.y.shape[1]) if self.y.ndim == 2 else 1

    @property
    def vector_output(self) -> bool:
        """Whether models predict a vector per sample (multi-class or K outputs)."""
        return bool(self.n_classes) or self.y.ndim == 2

    @property
    def irrelevant(self) -> tuple[int, ...]:
        """Components the target ignores (empty when `relevant` is not declared)."""
        if self.relevant is None:
            return ()
        return tuple(c for c in range(self.n_components) if c not in self.relevant)

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
        return int(self.test_mask.sum())


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


def _check_classes(y: np.ndarray, n_classes: int, what: str) -> None:
    if y.dtype.kind not in "iu" or (y.size and (y.min() < 0 or y.max() >= n_classes)):
        raise SplitError(f"{what} of a multiclass task must be integer classes 0..{n_classes - 1}")


def _check_samples(task: TaskData) -> None:
    s = task.samples
    assert s is not None
    n, m = len(task.cells), s.n_eval
    if s.x_train.ndim != 2 or s.x_eval.ndim != 2 or s.x_train.shape[1] != s.x_eval.shape[1]:
        raise SplitError("samples: x_train and x_eval must be (samples × inputs) with the same number of inputs")
    if len(s.train_cells) != len(s.x_train) or len(s.y_train) != len(s.x_train):
        raise SplitError("samples: x_train, train_cells and y_train must have one row per training sample")
    if m == 0 or len(s.x_train) == 0:
        raise SplitError("samples: a function-valued task needs training and evaluation inputs")
    if not np.all(task.train_mask[s.train_cells]):
        raise SplitError("samples: every training sample must belong to a training cell")
    tail = (task.n_outputs,) if task.y.ndim == 2 else ()
    if s.y_eval.shape != (n, m, *tail):
        raise SplitError(f"samples: y_eval must have shape {(n, m, *tail)}, got {s.y_eval.shape}")
    if task.n_classes:
        _check_classes(np.asarray(s.y_train), task.n_classes, "samples.y_train")
        _check_classes(np.asarray(s.y_eval), task.n_classes, "samples.y_eval")
    elif not (np.all(np.isfinite(s.y_train)) and np.all(np.isfinite(s.y_eval))):
        raise SplitError("samples: targets must be finite")
    if not (np.all(np.isfinite(s.x_train)) and np.all(np.isfinite(s.x_eval))):
        raise SplitError("samples: inputs must be finite")
    # Evaluation inputs are drawn apart from the training inputs: none may coincide.
    shared = {r.tobytes() for r in np.ascontiguousarray(s.x_eval)} & {r.tobytes() for r in np.ascontiguousarray(s.x_train)}
    if shared:
        raise SplitError(f"samples: {len(shared)} evaluation input(s) also occur among the training inputs; draw them apart")


def validate_split(task: TaskData) -> None:
    """Reject empty train/held-out sets, unseen component values, bad targets."""
    if task.cells.ndim != 2 or len(task.cells) != len(task.y) or len(task.y) != len(task.train_mask):
        raise SplitError("cells, y and train_mask must have one row per cell")
    if task.kind not in TASK_KINDS:
        raise SplitError(f"task kind must be one of {', '.join(map(repr, TASK_KINDS))}, got {task.kind!r}")
    if (task.kind == "multiclass") != (task.n_classes > 0):
        raise SplitError("a multiclass task needs n_classes ≥ 2 (and only a multiclass task has classes)")
    if task.kind == "multiclass":
        if task.n_classes < 2:
            raise SplitError(f"a multiclass task needs n_classes ≥ 2, got {task.n_classes}")
        if task.y.ndim != 1:
            raise SplitError("multiclass targets are one integer class per cell")
        _check_classes(task.y, task.n_classes, "targets")
    else:
        if task.y.ndim not in (1, 2) or (task.y.ndim == 2 and task.y.shape[1] < 1):
            raise SplitError(f"targets must be (cells,) or (cells, K), got shape {task.y.shape}")
        if not np.all(np.isfinite(task.y)):
            raise SplitError("targets must be finite")
        if task.kind == "classification" and (task.y.ndim != 1 or not np.all(np.isin(task.y, (-1.0, 1.0)))):
            raise SplitError("classification targets must be exactly ±1")
    if task.relevant is not None:
        bad = [c for c in task.relevant if not 0 <= c < task.n_components]
        if bad or len(set(task.relevant)) != len(task.relevant):
            raise SplitError(f"relevant components must be distinct indices 0..{task.n_components - 1}, got {task.relevant}")
    if task.output_names and (task.y.ndim != 2 or len(task.output_names) != task.y.shape[1]):
        raise SplitError("output_names must name every column of a K-output task's targets")
    if task.samples is not None:
        _check_samples(task)
    if task.value_features is not None:
        vf = task.value_features
        if len(vf) != task.n_components or any(np.ndim(f) != 2 or len(f) != n for f, n in zip(vf, task.n_values)):
            raise SplitError("value_features must hold one (n_values × d) array per component")
        if not all(np.all(np.isfinite(f)) for f in vf):
            raise SplitError("value_features must be finite")
    if task.n_train == 0:
        raise SplitError("the split has no training cells")
    if task.heldout is not None:
        if np.asarray(task.heldout).shape != task.train_mask.shape:
            raise SplitError("heldout must be a mask with one entry per cell")
        if not task.iid and np.any(task.test_mask & task.train_mask):
            raise SplitError("held-out cells are also trained on, but the task is not declared an iid control")
    if task.iid and task.heldout is None:
        raise SplitError("an iid control must name its held-out cells (heldout)")
    if task.n_test == 0:
        raise SplitError("the split has no held-out cells")
    if task.allow_unseen_values:
        return
    train, test = task.cells[task.train_mask], task.cells[task.test_mask]
    for c in range(task.n_components):
        unseen = np.flatnonzero(~np.isin(test[:, c], train[:, c]))
        if len(unseen):
            cell = test[unseen[0]]
            name = task.component_names[c] if task.component_names else f"component {c}"
            raise SplitError(
                f"component {name!r} (index {c}) value {int(cell[c])} occurs in held-out cell "
                f"{tuple(int(v) for v in cell)} but in no training cell"
            )
