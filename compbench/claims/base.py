"""The claim contract and its registry."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from pydantic import Field

from compbench.records import TASK_KINDS, CellRecord, Status, as_records
from compbench.records.metric_facts import NA_UNJUDGEABLE
from compbench.params import StrictParams
from compbench.registry import PluginError, Registry, named_instance, require_subclass

ENTRY_POINT_GROUP = "compbench.claims"
Record = CellRecord  # claims judge typed records (a read-only mapping view keeps schema-1 plugins working)


class ClaimParams(StrictParams):
    """Base of every claim's parameters (given inline in the expectation; unknown keys are errors; a boolean is not a number)."""

    tolerance: float | None = Field(default=None, ge=0, description="how far from the ideal still passes (claim's default if unset)")


def needs_text(threshold: str, measured: float) -> str:
    """'needs T', or why a verdict has no threshold: every face words a verdict's bar alike (never "needs ")."""
    if threshold:
        return f"needs {threshold}"
    # A claim that could not judge (a failed cell, a missing metric) returns no threshold: say so.
    return "no threshold: the claim had no value to judge" if measured != measured else "no threshold: the claim gave none"


@dataclass(frozen=True)
class Verdict:
    """One checked claim for one subject (model or sweep) on one task (or task list)."""

    expectation: str
    claim: str
    subject: str
    task: str
    measured: float
    threshold: str
    passed: bool
    detail: str = ""
    known_failure: str = ""  # in the scope of a declared known failure: its reason (XFAIL if it fails, XPASS if it passes)
    warning: str = ""  # something a reader should see although it decides nothing (a known failure's value out of its range)

    @property
    def status(self) -> str:
        """PASS, FAIL, XFAIL (fails, as the suite declares) or XPASS (passes where the suite declares a failure)."""
        if self.known_failure:
            return "XPASS" if self.passed else "XFAIL"
        return "PASS" if self.passed else "FAIL"

    @property
    def fails(self) -> bool:
        """Whether this verdict fails the suite: FAIL, or XPASS (strict: a declaration that no longer holds is removed)."""
        return self.status in ("FAIL", "XPASS")

    def line(self) -> str:
        """The verdict as one line, worded alike by every command: status, expectation, claim, subject, task, value, threshold."""
        value = f"measured {self.measured:.4g}" if self.measured == self.measured else "not measured"
        needs = f" ({needs_text(self.threshold, self.measured)})"
        extra = "".join(f"; {x}" for x in (self.detail, (f"known failure: {self.known_failure}" if self.known_failure else ""),
                                            self.warning) if x)
        return f"{self.status} {self.expectation} [{self.claim}] {self.subject} on {self.task}: {value}{needs}{extra}"


@dataclass(frozen=True)
class Subject:
    """What one verdict is about: a model (or sweep group) on a task, with its records."""

    name: str
    task: str
    records: list[Record]

    def __post_init__(self) -> None:
        object.__setattr__(self, "records", as_records(self.records))  # schema-1 dicts from a plugin's caller


class Claim:
    """Base of claims: `Params`, the task kinds and metrics it applies to, and `judge`.

    A per-cell claim (`per_cell = True`) gets one `judge` call per (model or sweep, task); a
    cross-cell claim overrides `judge_all`, which sees every matched record at once: the records, in suite order, of
    each sweep group with a member its model patterns select and of each task its task patterns match.
    """

    name: ClassVar[str] = ""
    Params: ClassVar[type[ClaimParams]] = ClaimParams
    kinds: ClassVar[tuple[str, ...]] = TASK_KINDS
    metrics: ClassVar[tuple[str, ...] | None] = None  # allowed values of a `metric` param (None: it takes none)
    per_cell: ClassVar[bool] = True
    default_tolerance: ClassVar[float] = 0.0
    min_tasks: ClassVar[int] = 1
    min_models: ClassVar[int] = 1

    def tolerance(self, params: ClaimParams) -> float:
        """The expectation's tolerance, or the claim's default."""
        return params.tolerance if params.tolerance is not None else self.default_tolerance

    def judge(self, params: Any, expectation: str, subject: Subject) -> Verdict:
        """The verdict on one subject's records (per-cell claims)."""
        raise NotImplementedError

    def judge_all(self, params: Any, expectation: Any, records: list[Record], selects: Callable[[Record, str], bool]) -> list[Verdict]:
        """Every verdict of a cross-cell claim; `selects(record, model_pattern)` matches models."""
        raise NotImplementedError

    def validate(self, params: Any, expectation: Any) -> list[tuple[str, str]]:
        """Problems beyond the params model, as (field, message)."""
        return []


def _check_claim(name: str, obj: object) -> Claim:
    obj = require_subclass("claim", name, obj, Claim, "compbench.claims.Claim")
    if not (isinstance(obj.Params, type) and issubclass(obj.Params, ClaimParams)):
        raise PluginError(f"claim {name!r}: Params must subclass compbench.claims.ClaimParams")
    if obj.per_cell and obj.judge is Claim.judge:
        raise PluginError(f"claim {name!r} is per-cell but does not implement judge(params, expectation, subject)")
    if not obj.per_cell and obj.judge_all is Claim.judge_all:
        raise PluginError(f"claim {name!r} is cross-cell but does not implement judge_all(...)")
    bad = set(obj.kinds) - set(TASK_KINDS)
    if bad:
        raise PluginError(f"claim {name!r}: kinds may name {', '.join(TASK_KINDS)}, got {sorted(bad)}")
    return named_instance(obj, name)


CLAIMS: Registry[Claim] = Registry("claim", ENTRY_POINT_GROUP, _check_claim)


def register_claim(name: str) -> Callable[[type[Claim]], type[Claim]]:
    """Class decorator registering a claim under `name`."""
    return CLAIMS.register(name)  # type: ignore[return-value]


def get_claim(name: str) -> Claim:
    """The claim registered as `name`."""
    return CLAIMS.get(name)


# Helpers shared by the claims.


def finite(vals: Any) -> list[float]:
    """The finite floats among `vals` (None and NaN dropped)."""
    out = []
    for v in vals:
        if v is None:
            continue
        f = float(v)
        if math.isfinite(f):  # np.isfinite's answer on a float, without a NumPy call per value (15k records)
            out.append(f)
    return out


def mean_of(records: list[Record], metric: str) -> float:
    """Mean of a metric over records (NaN when none has it)."""
    records = as_records(records)
    vals = finite(r.metrics.get(metric) for r in records)
    if len(vals) == 1:
        return vals[0]  # what np.mean gives (x / 1 is exact), without its overhead: one seed per member is common
    return float(np.mean(vals)) if vals else float("nan")


def member_means(records: list[Record], metrics: tuple[str, ...]) -> dict[str, tuple[float, ...]]:
    """Each member's (model id's) `mean_of` of each metric, in the records' member order: one pass over the records."""
    # A sweep's claims read thousands of one-seed members: a member with one record takes its value as mean_of
    # would (finite, else NaN) without a list and a call per (member, metric); several seeds go through mean_of.
    members: dict[str, list[Record]] = {}
    for r in as_records(records):
        rs = members.get(r.model)
        if rs is None:
            members[r.model] = [r]
        else:
            rs.append(r)
    out: dict[str, tuple[float, ...]] = {}
    nan = float("nan")
    for member, rs in members.items():
        if len(rs) == 1:
            got = rs[0].metrics
            row = []
            for metric in metrics:
                v = got.get(metric)
                f = nan if v is None else float(v)
                row.append(f if math.isfinite(f) else nan)
            out[member] = tuple(row)
        else:
            out[member] = tuple(mean_of(rs, metric) for metric in metrics)
    return out


def by_member(records: list[Record]) -> dict[str, list[Record]]:
    """Records per model id (sweep member)."""
    out: dict[str, list[Record]] = defaultdict(list)
    for r in as_records(records):
        out[r.model].append(r)
    return dict(out)


def usable(claim: Claim, expectation: str, subject: Subject, needs: tuple[str, ...] = ()) -> tuple[Verdict | None, list[Record]]:
    """(None, the subject's ok records), or (a failed verdict saying why no verdict can be reached (`unusable`), [])."""
    why = unusable(subject.records, needs)
    if why:
        return failed(expectation, claim.name, subject, why), []
    return None, [r for r in subject.records if r.ok]


def unusable(records: list[Record], needs: tuple[str, ...] = ()) -> str | None:
    """Why these records cannot support a verdict (failed cells, none finished, a metric missing), or None."""
    errors: list[Record] = []
    ok: list[Record] = []
    for r in as_records(records):
        status = r.status  # compared here, not through r.failed and r.ok: thousands of records per cross-cell claim
        if status is Status.ERROR:
            errors.append(r)
        elif status is Status.OK:
            ok.append(r)
    if errors:
        return f"{len(errors)} cell(s) failed: {errors[0].message}"
    if not ok:
        return "no finished cells"
    for metric in needs:
        # The reasons keep their order: not applicable, then missing, then not finite (checked once none is missing).
        na = next((r for r in ok if metric in r.not_applicable), None) if metric in NA_UNJUDGEABLE else None
        if na is not None:
            return f"not applicable: {metric} of {na.model} says nothing here ({na.not_applicable[metric]})"
        missing = next((r for r in ok if r.metrics.get(metric) is None), None)
        if missing is not None:
            why = " (the model has no kernel-theory prediction)" if metric.startswith("theory") else ""
            return f"not applicable: {missing['model']} does not produce {metric}{why}"
        if not all(math.isfinite(float(r.metrics[metric])) for r in ok):  # every one has it (none is missing)
            return f"{metric} is not finite for some seed"
    return None


def failed(name: str, claim: str, subject: Subject, why: str) -> Verdict:
    """A failing verdict that says why no value could be measured."""
    return Verdict(name, claim, subject.name, subject.task, float("nan"), "", False, why)
