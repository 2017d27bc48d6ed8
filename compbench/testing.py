"""Conformance kit for plugin authors: run an adapter (or a task family) on tiny tasks and name
every break of compbench's contract, as scikit-learn's `check_estimator` does for estimators.

    from compbench.testing import check_adapter

    def test_my_adapter_conforms():
        check_adapter(MyAdapter, {"width": 16}).raise_if_failed()

`check_task_family` and `check_claim` do the same for a task family and a claim.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from compbench.errors import CompbenchError
from compbench.records import CellError, CellRecord, Status

from compbench.adapters.base import (
    Adapter,
    AdapterParams,
    ContractBreak,
    Fitted,
    check_fitted,
    check_kernels,
    theory_options_of,
)
from compbench.theory.options import TheoryOptionsError

__all__ = ["ConformanceError", "ConformanceReport", "check_adapter", "check_claim", "check_task_family"]

SEEDS = [0, 1]
# Tiny one-hot tasks: a regression (min-norm / ridge theory) and a ±1 classification (SVM theory).
ONEHOT_TASKS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("additive-4x4", "additive", {"values": [[0, 1, 2, 3], [0, 2, 4, 6]], "anchors": [[1], [1]]}),
    ("transitive-equivalence", "transitive_equivalence", {}),
)
IMAGE_TASK = ("additive-4x4-digits", "additive", {"values": [[0, 1, 2, 3], [0, 2, 4, 6]], "anchors": [[1], [1]]})


class ConformanceError(CompbenchError, AssertionError):
    """Raised by `ConformanceReport.raise_if_failed` when something broke the contract."""


@dataclass
class ConformanceReport:
    """What `check_adapter` / `check_task_family` found: contract breaks by name, and notes."""

    subject: str
    breaks: list[tuple[str, ContractBreak]] = field(default_factory=list)  # (where, break)
    notes: list[str] = field(default_factory=list)  # not failures: e.g. "does not accept images"

    @property
    def ok(self) -> bool:
        """True when nothing broke the contract."""
        return not self.breaks

    @property
    def names(self) -> set[str]:
        """The names of the breaks found (e.g. {"predictions-length", "deterministic-seeds"})."""
        return {b.name for _, b in self.breaks}

    def add(self, where: str, name: str, message: str) -> None:
        """Record one break found on `where` (a task, or "params")."""
        self.breaks.append((where, ContractBreak(name, message)))

    def raise_if_failed(self) -> None:
        """Raise ConformanceError listing every break (for a plugin's own test suite)."""
        if not self.ok:
            raise ConformanceError(str(self))

    def __str__(self) -> str:
        head = f"{self.subject}: " + ("conforms" if self.ok else f"{len(self.breaks)} contract break(s)")
        lines = [head] + [f"  [{b.name}] on {where}: {b.message}" for where, b in self.breaks]
        return "\n".join(lines + [f"  note: {n}" for n in self.notes])


def _params(cls: type[Adapter], params: dict[str, Any] | AdapterParams | None, report: ConformanceReport) -> AdapterParams | None:
    try:
        cls.Params()
    except Exception as exc:  # noqa: BLE001 — a pydantic ValidationError, or anything a validator raises
        if params is None:
            report.add("params", "params-defaults", f"{cls.__name__}.Params() does not validate; pass params=... ({exc})")
        else:
            report.notes.append(f"{cls.__name__}.Params() has no usable defaults: `--model {cls.name or cls.__name__}` cannot add it to a suite")
    if isinstance(params, AdapterParams):
        return params
    try:
        return cls.Params(**(params or {}))
    except Exception as exc:  # noqa: BLE001
        if params is not None:
            report.add("params", "params-invalid", f"the given params do not validate: {exc}")
        return None


def _check_on(cls: type[Adapter], params: AdapterParams, where: str, enc: Any, report: ConformanceReport, device: str) -> None:
    """Every contract check of one adapter on one encoded task."""
    n_train, n_eval = len(enc.train), len(enc.evaluate)
    adapter = cls(params, device=device)
    fitted = adapter.fit_seeds(enc.train, enc.evaluate, list(SEEDS))
    if not isinstance(fitted, (list, tuple)) or len(fitted) != len(SEEDS):
        got = len(fitted) if isinstance(fitted, (list, tuple)) else type(fitted).__name__
        report.add(where, "fitted-count", f"fit_seeds returned {got} Fitted for {len(SEEDS)} seeds")
        return
    for seed, fit in zip(SEEDS, fitted):
        for b in check_fitted(fit, n_train, n_eval):
            report.add(f"{where}, seed {seed}", b.name, b.message)
    try:
        options = theory_options_of(adapter, cls.__name__)
    except TheoryOptionsError as exc:
        options = None
        for problem in exc.problems:
            report.add(where, "theory-options", problem)
    if not isinstance(adapter.theory_kernel_name(), str):
        report.add(where, "theory-kernel-name", "theory_kernel_name() must return a str")
    shared = None
    if any(isinstance(f, Fitted) and f.kernels is None for f in fitted):
        K_tt = adapter.kernel(enc.train, enc.train)
        if K_tt is not None:
            shared = (K_tt, adapter.kernel(enc.evaluate, enc.train))
            for b in check_kernels(shared, n_train, n_eval):
                report.add(where, b.name, f"kernel(): {b.message}")
    if report.breaks or options is None:  # the checks below need well-formed output
        return
    for seed, fit in zip(SEEDS, fitted):
        kernels = fit.kernels or shared
        if fit.error is None and fit.theory_predictions is None and kernels is not None:
            try:
                options.predict(kernels[0], kernels[1], enc.train.y, f0_train=fit.initial_train, f0_eval=fit.initial_eval)
            except Exception as exc:  # noqa: BLE001
                report.add(f"{where}, seed {seed}", "theory-solve", f"the theory engine cannot use this output: {type(exc).__name__}: {exc}")
    again = cls(params, device=device).fit_seeds(enc.train, enc.evaluate, list(SEEDS))
    for seed, a, b in zip(SEEDS, fitted, again):
        if a.error is None and not np.array_equal(np.asarray(a.predictions), np.asarray(b.predictions)):
            diff = float(np.max(np.abs(np.asarray(a.predictions, float) - np.asarray(b.predictions, float))))
            report.add(f"{where}, seed {seed}", "deterministic-seeds", f"the same seed gave different predictions on a second fit (max |Δ| = {diff:.3g})")
    if cls.deterministic and all(f.error is None for f in fitted):
        if not np.array_equal(np.asarray(fitted[0].predictions), np.asarray(fitted[1].predictions)):
            report.add(where, "deterministic-flag", "deterministic = True, yet seeds 0 and 1 gave different predictions (the suite would run only one)")


def check_adapter(
    adapter_class: type[Adapter], params: dict[str, Any] | AdapterParams | None = None, *, device: str = "cpu", images: bool | None = None
) -> ConformanceReport:
    """Run an adapter on tiny tasks with two seeds and name every break of the adapter contract.

    One-hot tasks when the adapter's `inputs` include "vector"; a tiny digit-image task when they
    include "image" (an adapter that declares no `inputs` of its own gets both, and an exception
    on images is then a note, not a break). `images` forces the image task on or off.
    """
    from compbench.encodings import encode
    from compbench.tasks import make_task

    report = ConformanceReport(f"adapter {adapter_class.__name__}")
    if not (isinstance(adapter_class, type) and issubclass(adapter_class, Adapter)):
        report.add("class", "adapter-class", f"{adapter_class!r} is not a subclass of compbench.adapters.Adapter")
        return report
    if not (isinstance(adapter_class.Params, type) and issubclass(adapter_class.Params, AdapterParams)):
        report.add("class", "params-class", "Params must be a subclass of compbench.adapters.AdapterParams")
        return report
    p = _params(adapter_class, params, report)
    if p is None:
        return report
    # What the adapter class itself (or a base of its own) declares it accepts; Adapter's default
    # counts as undeclared, so images are tried and a failure on them is only a note.
    declared = next((c.__dict__["inputs"] for c in adapter_class.__mro__ if c is not Adapter and "inputs" in c.__dict__), None)
    vectors = declared is None or "vector" in declared or "onehot" in declared
    kinds = [("onehot", t) for t in ONEHOT_TASKS] if vectors else []
    want_images = images if images is not None else (declared is None or "image" in declared)
    if want_images:
        kinds.append(("digits", IMAGE_TASK))
    try:
        objective = theory_options_of(adapter_class(p, device=device), adapter_class.__name__).objective
    except Exception:  # noqa: BLE001 — reported as a break by the checks below
        objective = None
    for encoding, (where, family, task_params) in kinds:
        task = make_task(family, **task_params)
        if objective == "svm" and task.kind != "classification":
            report.notes.append(f"{where} skipped: a max-margin (svm) model needs ±1 targets")
            continue
        enc = encode(encoding, task, **({"samples_per_cell": 1} if encoding == "digits" else {}))
        strict = declared is not None or encoding == "onehot" or bool(images)
        try:
            _check_on(adapter_class, p, where, enc, report, device)
        except Exception as exc:  # noqa: BLE001 — any exception the adapter raises on a task it should accept
            if strict:
                report.add(where, "raises", f"{type(exc).__name__}: {exc}")
            else:
                report.notes.append(f"does not accept images ({where}: {type(exc).__name__}: {exc}); declare `inputs = (\"vector\",)`")
        except SystemExit as exc:
            report.add(where, "sys-exit", f"the adapter called sys.exit({exc.code!r})")
    return report


def check_task_family(name_or_builder: str | Callable[..., Any], params: dict[str, Any] | None = None) -> ConformanceReport:
    """Build a task family (default params unless given) and check the TaskData it returns.

    Names the breaks: `build-raises`, `taskdata-type`, `taskdata-fields` (shapes and dtypes of
    cells, y, train_mask, n_values), `split` (validate_split rejects it), `deterministic`.
    """
    from compbench.tasks import TaskData, make_task
    from compbench.tasks.base import validate_split

    if isinstance(name_or_builder, str):
        report = ConformanceReport(f"task family {name_or_builder!r}")
        build: Callable[[], Any] = lambda: make_task(name_or_builder, **(params or {}))  # noqa: E731
    else:
        report = ConformanceReport(f"task family {getattr(name_or_builder, '__name__', name_or_builder)!r}")
        build = lambda: name_or_builder(**(params or {}))  # noqa: E731
    try:
        first, second = build(), build()
    except Exception as exc:  # noqa: BLE001
        report.add("build", "build-raises", f"{type(exc).__name__}: {exc}")
        return report
    if not isinstance(first, TaskData):
        report.add("build", "taskdata-type", f"the builder returned {type(first).__name__}, not TaskData")
        return report
    t = first
    cells, y, mask = np.asarray(t.cells), np.asarray(t.y), np.asarray(t.train_mask)
    problems = []
    if cells.ndim != 2 or cells.dtype.kind not in "iu":
        problems.append(f"cells must be an (n, C) int array, got {cells.dtype} of shape {cells.shape}")
    elif len(t.n_values) != cells.shape[1] or np.any(cells < 0) or np.any(cells.max(axis=0, initial=-1) >= np.asarray(t.n_values)):
        problems.append(f"cells must index values below n_values {tuple(t.n_values)} in each of their {cells.shape[1]} columns")
    elif len(np.unique(cells, axis=0)) != len(cells):
        problems.append("cells lists a conjunction twice")
    if getattr(t, "n_classes", 0):
        if y.shape != (len(cells),) or y.dtype.kind not in "iu":
            problems.append(f"y of a multiclass task must be an int array of shape ({len(cells)},), got {y.dtype} of shape {y.shape}")
    elif y.ndim not in (1, 2) or len(y) != len(cells) or y.dtype.kind != "f":
        problems.append(f"y must be a float array of shape ({len(cells)},) or ({len(cells)}, K), got {y.dtype} of shape {y.shape}")
    if mask.shape != (len(cells),) or mask.dtype != bool:
        problems.append(f"train_mask must be a bool array of shape ({len(cells)},), got {mask.dtype} of shape {mask.shape}")
    if t.component_names and len(t.component_names) != len(t.n_values):
        problems.append(f"{len(t.component_names)} component_names for {len(t.n_values)} components")
    for message in problems:
        report.add("taskdata", "taskdata-fields", message)
    if problems:
        return report
    try:
        validate_split(t)
    except ValueError as exc:
        report.add("split", "split", str(exc))
    same = isinstance(second, TaskData) and all(
        np.array_equal(np.asarray(getattr(first, f)), np.asarray(getattr(second, f))) for f in ("cells", "y", "train_mask")
    )
    if not same:
        report.add("build", "deterministic", "building the task twice with the same params gave different cells, targets or split")
    return report


def _claim_records(kind: str, status: str, seeds: int = 3) -> list[CellRecord]:
    """Synthetic records of one model on one task: every metric of the task kind set to a typical value."""
    from compbench.records.metric_facts import metrics_for

    out = []
    for seed in range(seeds):
        ok = status == "ok"
        out.append(CellRecord(key=f"k{seed}", task="t", model="m", group="m", seed=seed, status=Status(status), kind=kind,
                              metrics={m: 0.5 for m in metrics_for(kind)} if ok else {},
                              error=None if ok else CellError("training diverged (synthetic)")))
    return out


def check_claim(claim: Any, params: dict[str, Any] | None = None) -> ConformanceReport:
    """Judge synthetic records with a claim (a `Claim` subclass, or a registered name) and name its contract breaks.

    Breaks: `params-defaults` (no params given and `Params()` does not validate), `registers` (the
    registry refuses the class), `judge-raises`, `verdict-type` (not a Verdict, or mistyped fields),
    `passes-on-errors` (passes when every cell failed), `passes-on-nothing` (passes with no records).
    """
    from compbench.claims import CLAIMS, Claim, Verdict
    from compbench.claims.base import Subject
    from compbench.registry import PluginError
    from compbench.suite.schema import Expectation

    name = claim if isinstance(claim, str) else getattr(claim, "__name__", repr(claim))
    report = ConformanceReport(f"claim {name!r}")
    try:
        instance: Claim = CLAIMS.get(claim) if isinstance(claim, str) else CLAIMS._check("conformance-check", claim)  # type: ignore[misc]
    except (PluginError, ValueError) as exc:
        report.add("registration", "registers", str(exc))
        return report
    try:
        validated = instance.Params.model_validate(params or {})
    except Exception as exc:  # noqa: BLE001
        report.add("params", "params-defaults", f"{type(exc).__name__}: {exc}" + ("" if params else " (pass params=...)"))
        return report
    exp = Expectation(id="conformance", claim=instance.name or name, models=["m"], tasks=["t"], **(params or {}))
    exp._params = validated

    def judge(records: list[CellRecord]) -> list[Any]:
        if instance.per_cell:
            return [instance.judge(validated, "conformance", Subject("m", "t", records))]
        return instance.judge_all(validated, exp, records, lambda r, p: r.model == p)

    for kind in instance.kinds:
        for where, records, must_fail in (
            (f"{kind}: ok records", _claim_records(kind, "ok"), None),
            (f"{kind}: every cell failed", _claim_records(kind, "error"), "passes-on-errors"),
            (f"{kind}: no records", [], "passes-on-nothing"),
        ):
            try:
                verdicts = judge(records)
            except Exception as exc:  # noqa: BLE001
                report.add(where, "judge-raises", f"{type(exc).__name__}: {exc}")
                continue
            for v in verdicts:
                if not isinstance(v, Verdict) or not isinstance(v.passed, bool) or not isinstance(v.measured, (int, float)):
                    report.add(where, "verdict-type", f"judge returned {v!r}: expected a Verdict with a float `measured` and a bool `passed`")
                elif must_fail and v.passed:
                    report.add(where, must_fail, f"the claim passed ({v.detail}) although {where.split(': ', 1)[1]}")
    return report
