"""The built-in claims (THEORY.md §6), each a registered `Claim` with its own params model."""

from __future__ import annotations

import fnmatch
from collections.abc import Callable
from typing import Any, ClassVar, Literal, NamedTuple

import numpy as np
from pydantic import Field

from compbench.claims.base import (
    Claim,
    ClaimParams,
    Record,
    Subject,
    Verdict,
    by_member,
    failed,
    mean_of,
    member_means,
    register_claim,
    unusable,
    usable,
)
from compbench.records import as_records
from compbench.records.metric_facts import METRICS, PER_FACTOR, SEED_STATISTICS, headline_metric, theory_partner


def _headline(ok: list[Record]) -> str:
    """The headline score of the subject's task, as the leaderboard shows it (metric_facts.headline_metric)."""
    return headline_metric(ok[0].kind if ok else None, ok[0].metrics if ok else ())


class _Reading(NamedTuple):
    """What a per-cell claim read off a subject: the value, the bar it needed, whether it passed, and how it was read."""

    measured: float
    threshold: str
    passed: bool
    detail: str


class _PerMember(Claim):
    """A per-cell claim read off each member's value of its metrics (`_per_member`), one verdict per subject.

    Where a metric cannot be measured (a failed cell, none finished, a metric missing or not applicable)
    the verdict is the failed one saying why; else `read` gives it from the ok records, each member's
    values (in the order of `compared`) and the tolerance.
    """

    compares: ClassVar[tuple[str, ...]] = ()

    def compared(self, params: Any, ok: list[Record]) -> tuple[str, ...]:
        """The metrics each member's values are taken of, given the subject's ok records (by default `compares`)."""
        return self.compares

    def read(self, params: Any, ok: list[Record], values: list[tuple[float, ...]], tol: float) -> _Reading:
        """The verdict's value, threshold, pass and detail."""
        raise NotImplementedError

    def judge(self, params: Any, expectation: str, subject: Subject) -> Verdict:
        """The failed verdict of `_per_member`, or the one `read` gives."""
        bad, ok, values = _per_member(self, expectation, subject, *self.compared(params, [r for r in subject.records if r.ok]))
        if bad:
            return bad
        return Verdict(expectation, self.name, subject.name, subject.task, *self.read(params, ok, values, self.tolerance(params)))


class MatchesKernelParams(ClaimParams):
    """R²(model, theory) ≥ 1 − tolerance, and optionally max |model − theory| ≤ max_abs_diff."""

    max_abs_diff: float | None = Field(default=None, ge=0, description="also require max |model − theory| ≤ this")


@register_claim("matches_kernel")
class MatchesKernel(_PerMember):
    """The model's held-out predictions equal its own kernel-theory prediction (worst seed)."""

    Params = MatchesKernelParams
    default_tolerance = 0.05
    compares = ("theory_r2", "theory_max_abs_diff")

    def read(self, params: MatchesKernelParams, ok: list[Record], values: list[tuple[float, ...]], tol: float) -> _Reading:
        worst_diff = max(float(r.metrics["theory_max_abs_diff"]) for r in ok)
        # An R² against a constant theory is 0 or 1 by convention (metric_facts.r2_not_applicable): where the
        # expectation gives max_abs_diff, such a seed is judged by max |model − theory| alone; without one the
        # convention stands (1 for a model that is its constant theory, as a kernel is).
        judged = ok if params.max_abs_diff is None else [r for r in ok if "theory_r2" not in r.not_applicable]
        worst_r2 = min((float(r.metrics["theory_r2"]) for r in judged), default=float("nan"))
        passed = not judged or worst_r2 >= 1 - tol
        threshold = f"R² ≥ {1 - tol:g}"
        if params.max_abs_diff is not None:
            passed = passed and worst_diff <= params.max_abs_diff
            threshold += f", max|Δ| ≤ {params.max_abs_diff:g}"
        r2_text = f"worst R²(model, theory) {worst_r2:.6f}" if judged else "R²(model, theory) n/a (theory constant)"
        return _Reading(worst_r2 if judged else worst_diff, threshold, passed, f"{r2_text}, max |model − theory| {worst_diff:.2e} over {_n(ok)}")


@register_claim("additive")
class Additive(_PerMember):
    """Held-out conjunction-wise additivity R² ≥ 1 − tolerance (worst member, mean over seeds)."""

    default_tolerance = 0.05
    compares = ("additivity",)

    def read(self, params: ClaimParams, ok: list[Record], values: list[tuple[float, ...]], tol: float) -> _Reading:
        val = min(v for (v,) in values)
        return _Reading(val, f"≥ {1 - tol:g}", val >= 1 - tol, f"held-out additivity R² (worst of {_n(ok)})")


@register_claim("at_chance")
class AtChance(_PerMember):
    """Held-out accuracy within `tolerance` of ½ (the member farthest from it, mean over seeds)."""

    kinds = ("classification",)
    default_tolerance = 0.15

    def compared(self, params: ClaimParams, ok: list[Record]) -> tuple[str, ...]:
        """The task's headline accuracy: over images where its cells hold several (the papers' count), else over cells."""
        return (_headline(ok),)

    def read(self, params: ClaimParams, ok: list[Record], values: list[tuple[float, ...]], tol: float) -> _Reading:
        (metric,) = self.compared(params, ok)
        val = max((a for (a,) in values), key=lambda a: abs(a - 0.5))
        return _Reading(val, f"|acc − 0.5| ≤ {tol:g}", abs(val - 0.5) <= tol,
                       f"{METRICS[metric].label}, mean over seeds; separation {mean_of(ok, 'separation'):+.3g}")


@register_claim("beats_kernel")
class BeatsKernel(_PerMember):
    """Held-out score above the model's own kernel-theory score by ≥ tolerance (worst member)."""

    default_tolerance = 0.2

    def compared(self, params: ClaimParams, ok: list[Record]) -> tuple[str, ...]:
        """The task's headline score (accuracy on a class task, over images where its cells hold several; else R²) and
        its theory partner."""
        metric = _headline(ok)
        return metric, theory_partner(metric) or ""

    def read(self, params: ClaimParams, ok: list[Record], values: list[tuple[float, ...]], tol: float) -> _Reading:
        metric, partner = self.compared(params, ok)
        val = min(m - t for m, t in values)
        return _Reading(val, f"{metric} − {partner} ≥ {tol:g}", val >= tol,
                       f"{metric} {mean_of(ok, metric):.3f} vs its kernel theory {mean_of(ok, partner):.3f}")


class SlopeParams(ClaimParams):
    """Slope ≤ 1 − tolerance with correlation ≥ min_corr (and slope ≥ min_slope when given)."""

    min_corr: float = Field(default=0.5, ge=-1, le=1, description="the predictions must still follow the truth")
    min_slope: float | None = Field(default=None, description="a lower bound: the model must still generalise this much "
                                                              "(a network that predicts nothing has slope 0)")


@register_claim("slope_below_one")
class SlopeBelowOne(_PerMember):
    """Memorization leak: held-out slope of prediction vs truth ≤ 1 − tolerance, correlation ≥ min_corr."""

    Params = SlopeParams
    kinds = ("regression",)
    default_tolerance = 0.05
    compares = ("slope", "corr")

    def read(self, params: SlopeParams, ok: list[Record], values: list[tuple[float, ...]], tol: float) -> _Reading:
        slopes = [s for s, _ in values]
        corr = min(c for _, c in values)
        low = params.min_slope
        # The member farthest outside [min_slope, 1 − tolerance] is the one reported.
        slope = min(slopes) if low is not None and min(slopes) < low and max(slopes) <= 1 - tol else max(slopes)
        threshold = (f"{low:g} ≤ slope ≤ {1 - tol:g}" if low is not None else f"slope ≤ {1 - tol:g}") + f", corr ≥ {params.min_corr:g}"
        passed = max(slopes) <= 1 - tol and (low is None or min(slopes) >= low) and corr >= params.min_corr
        return _Reading(slope, threshold, passed, f"held-out slope vs truth (corr {corr:.3f})")


class BoundParams(ClaimParams):
    """A metric's mean over seeds against a bound (worst member)."""

    metric: str = Field(description="the metric compared with the bound")
    bound: float = Field(description="the bound")


def _per_member(claim: Claim, expectation: str, subject: Subject, *metrics: str) -> tuple[Verdict | None, list[Record], list[tuple[float, ...]]]:
    """(None, the ok records, each member's value of each metric), or a failed verdict saying why nothing can be measured.

    A member's value of a per-record metric is its mean over seeds; of a seed statistic (seed_var_ratio),
    the statistic of its seeds taken together.
    """
    from compbench.scoring.seed_spread import seed_statistic

    refused, ok = usable(claim, expectation, subject, tuple(m for m in metrics if m not in SEED_STATISTICS))
    if refused:
        return refused, [], []
    if not any(m in SEED_STATISTICS for m in metrics):
        return None, ok, list(member_means(ok, metrics).values())
    values = []
    for member, rs in by_member(ok).items():
        row = []
        for m in metrics:
            if m in SEED_STATISTICS:
                v, na = seed_statistic(rs, m)
                if na:
                    return failed(expectation, claim.name, subject, f"not applicable: {m} of {member} says nothing here ({na})"), [], []
                row.append(v)
            else:
                row.append(mean_of(rs, m))
        values.append(tuple(row))
    return None, ok, values


def _over_seeds(metric: str) -> str:
    """How a member's value of `metric` comes from its seeds, as a verdict's detail says it."""
    return "of the seeds together" if metric in SEED_STATISTICS else "mean over seeds"


class _Bound(_PerMember):
    Params = BoundParams
    metrics = tuple(METRICS) + tuple(PER_FACTOR) + tuple(SEED_STATISTICS)  # a per-factor metric is base.factor (factor_slope.scale)
    sign = 1.0  # +1: must be ≥ bound; −1: must be ≤ bound

    def compared(self, params: BoundParams, ok: list[Record]) -> tuple[str, ...]:
        return (params.metric,)

    def read(self, params: BoundParams, ok: list[Record], values: list[tuple[float, ...]], tol: float) -> _Reading:
        means = [m for (m,) in values]
        worst = min(means) if self.sign > 0 else max(means)
        passed = worst >= params.bound - tol if self.sign > 0 else worst <= params.bound + tol
        op = "≥" if self.sign > 0 else "≤"
        return _Reading(worst, f"{params.metric} {op} {params.bound:g}" + (f" (± {tol:g})" if tol else ""), passed,
                       f"{params.metric}, {_over_seeds(params.metric)}, worst of {_n(ok)}")


@register_claim("above")
class Above(_Bound):
    """A metric (mean over seeds) at least `bound`, for every member."""


@register_claim("below")
class Below(_Bound):
    """A metric (mean over seeds) at most `bound`, for every member."""

    sign = -1.0


class NearParams(ClaimParams):
    """|metric − target| ≤ tolerance (mean over seeds, every member)."""

    metric: str = Field(description="the metric compared with the target")
    target: float = Field(description="the value the theory or the paper says it takes")


@register_claim("near")
class Near(_PerMember):
    """A metric (mean over seeds) within `tolerance` of `target`, for every member: two-sided, unlike `above`/`below`."""

    Params = NearParams
    metrics = tuple(METRICS) + tuple(PER_FACTOR) + tuple(SEED_STATISTICS)
    default_tolerance = 0.05

    def compared(self, params: NearParams, ok: list[Record]) -> tuple[str, ...]:
        return (params.metric,)

    def read(self, params: NearParams, ok: list[Record], values: list[tuple[float, ...]], tol: float) -> _Reading:
        val = max((m for (m,) in values), key=lambda v: abs(v - params.target))
        return _Reading(val, f"|{params.metric} − {params.target:g}| ≤ {tol:g}", abs(val - params.target) <= tol,
                       f"{params.metric}, {_over_seeds(params.metric)}, farthest of {_n(ok)}")


class NearTheoryParams(ClaimParams):
    """|metric − the theory's value of it| ≤ tolerance (mean over seeds, every member)."""

    metric: str = Field(description="a metric with a theory partner (slope → theory_slope, heldout_r2 → theory_heldout_r2, …)")


@register_claim("near_theory")
class NearTheory(_PerMember):
    """A metric (mean over seeds) within `tolerance` of the same metric of the model's own kernel theory, for every member."""

    Params = NearTheoryParams
    metrics = tuple(m for m in METRICS if theory_partner(m))
    default_tolerance = 0.03

    def compared(self, params: NearTheoryParams, ok: list[Record]) -> tuple[str, ...]:
        return params.metric, theory_partner(params.metric) or ""

    def read(self, params: NearTheoryParams, ok: list[Record], values: list[tuple[float, ...]], tol: float) -> _Reading:
        partner = theory_partner(params.metric) or ""
        model, theory = max(values, key=lambda p: abs(p[0] - p[1]))
        return _Reading(model - theory, f"|{params.metric} − {partner}| ≤ {tol:g}", abs(model - theory) <= tol,
                       f"{params.metric} {model:.3f} vs its theory's {theory:.3f} (mean over seeds)")


class RelativeParams(ClaimParams):
    """metric ≤ ratio × reference (means over seeds, every member)."""

    metric: str = Field(description="the metric that must be the smaller")
    reference: str = Field(description="the metric it is compared with (e.g. another factor's slope)")
    ratio: float = Field(default=1.0, gt=0, description="metric ≤ ratio × reference")


@register_claim("below_ratio")
class BelowRatio(_PerMember):
    """A metric at most `ratio` times a reference metric of the same model and task (means over seeds, every member).

    Measured as metric − ratio × reference, so a reference near 0 cannot blow the value up.
    """

    Params = RelativeParams
    metrics = tuple(METRICS) + tuple(PER_FACTOR)

    def validate(self, params: RelativeParams, expectation: Any) -> list[tuple[str, str]]:
        from compbench.records.metric_facts import metric_allowed

        if not metric_allowed(params.reference, self.metrics):
            return [("reference", f"unknown metric {params.reference!r}")]
        return []

    def compared(self, params: RelativeParams, ok: list[Record]) -> tuple[str, ...]:
        return params.metric, params.reference

    def read(self, params: RelativeParams, ok: list[Record], values: list[tuple[float, ...]], tol: float) -> _Reading:
        a, b = max(values, key=lambda p: p[0] - params.ratio * p[1])
        gap = a - params.ratio * b
        return _Reading(gap, f"{params.metric} − {params.ratio:g}·{params.reference} ≤ {tol:g}", gap <= tol,
                       f"{params.metric} {a:.3f}, {params.reference} {b:.3f} (means over seeds)")


class OrderedParams(ClaimParams):
    """Decreasing order of a statistic of `metric` over the listed tasks (or models)."""

    # Signed for `ordered`: each gap must exceed it, so a negative value is a one-sided slack ("a later entry
    # exceeds an earlier one by at most |tolerance|", e.g. a model at most a noise margin above its ceiling).
    tolerance: float | None = Field(
        default=None, description="ordered: each gap must exceed this (negative: a later entry may exceed an earlier by "
        "at most its size); close: the largest spread allowed (≥ 0)"
    )
    metric: str = Field(description="the metric whose statistic is ordered")
    over: Literal["tasks", "models"] = "tasks"
    statistic: Literal["mean", "count_perfect"] = "mean"


@register_claim("ordered")
class Ordered(Claim):
    """A statistic of a metric decreases along the listed tasks (or models), each gap > tolerance."""

    Params = OrderedParams
    per_cell = False
    metrics = ("heldout_acc", "heldout_acc_samples", "train_acc", "heldout_r2", "train_r2", "r2_gap", "heldout_mse", "slope", "additivity", "theory_r2", "theory_acc",
               "separation", "irrelevant_share", "theory_irrelevant_share", "factor_r2", "theory_factor_r2", "factor_slope",
               "theory_factor_slope", "class_acc", "theory_class_acc", "probe_r2", "probe_acc", "nearest_train_similarity")

    def validate(self, params: OrderedParams, expectation: Any) -> list[tuple[str, str]]:
        listed = expectation.tasks if params.over == "tasks" else expectation.models
        if len(listed) < 2:
            return [(params.over, "'ordered' needs at least 2 entries, in decreasing order")]
        return []

    def _statistic(self, params: OrderedParams, recs: list[Record]) -> float:
        ok = [r for r in recs if r.ok]
        per_member = [v for (v,) in member_means(ok, (params.metric,)).values()]
        if params.statistic == "count_perfect":
            return float(sum(v >= 1 - 1e-9 for v in per_member))
        return float(np.mean(per_member)) if per_member else float("nan")

    def judge_all(self, params: OrderedParams, expectation: Any, records: list[Record], selects: Callable[[Record, str], bool]) -> list[Verdict]:
        tol = self.tolerance(params)
        name = expectation.id
        records = as_records(records)
        out = []
        # One pass over the records per grouping (a suite's sweeps give thousands): each record is
        # filed under its group or task once, and each distinct name is matched once per pattern.
        task_hits: dict[tuple[str, str], bool] = {}

        def task_is(task: str, pattern: str) -> bool:
            if (task, pattern) not in task_hits:
                task_hits[(task, pattern)] = fnmatch.fnmatchcase(task, pattern)
            return task_hits[(task, pattern)]

        if params.over == "tasks":
            by_group: dict[str, list[Record]] = {}
            chosen: set[str] = set()
            for r in records:
                by_group.setdefault(r.group, []).append(r)
                if r.group not in chosen and any(selects(r, p) for p in expectation.models):
                    chosen.add(r.group)
            for subject in sorted(chosen):
                recs = by_group[subject]
                groups = [[r for r in recs if task_is(r.task, p)] for p in expectation.tasks]
                out.append(self._verdict(params, name, subject, " > ".join(expectation.tasks), groups, tol))
        else:
            by_task: dict[str, list[Record]] = {}
            for r in records:
                by_task.setdefault(r.task, []).append(r)
            tasks = sorted(t for t in by_task if any(task_is(t, p) for p in expectation.tasks))
            for task in tasks:
                recs = by_task[task]
                groups = [[r for r in recs if selects(r, p)] for p in expectation.models]
                out.append(self._verdict(params, name, " > ".join(expectation.models), task, groups, tol))
        return out

    def _values(self, params: OrderedParams, groups: list[list[Record]]) -> list[float] | str:
        """Each group's statistic, or why a group cannot be judged."""
        for recs in groups:
            why = unusable(recs, (params.metric,))
            if why:
                return why
        return [self._statistic(params, recs) for recs in groups]

    def _verdict(self, params: OrderedParams, name: str, subject: str, task: str, groups: list[list[Record]], tol: float) -> Verdict:
        values = self._values(params, groups)
        if isinstance(values, str):
            return Verdict(name, self.name, subject, task, float("nan"), f"each gap > {tol:g}", False, values)
        gaps = [a - b for a, b in zip(values, values[1:])]
        gap = min(gaps) if gaps else float("nan")
        fmt = "{:.0f}" if params.statistic == "count_perfect" else "{:.3f}"
        shown = " > ".join(fmt.format(v) for v in values)
        return Verdict(name, self.name, subject, task, gap, f"each gap > {tol:g}", bool(gap > tol),
                       f"{params.statistic} of {params.metric}: {shown}")


def _n(ok: list[Record]) -> str:
    members = by_member(ok)
    return f"{len(members)} model(s)" if len(members) > 1 else f"{len(ok)} seed(s)"



@register_claim("close")
class Close(Ordered):
    """A statistic of a metric agrees across the listed tasks (or models): max − min ≤ tolerance."""

    default_tolerance = 0.05

    def validate(self, params: OrderedParams, expectation: Any) -> list[tuple[str, str]]:
        listed = expectation.tasks if params.over == "tasks" else expectation.models
        problems: list[tuple[str, str]] = [] if len(listed) >= 2 else [(params.over, "'close' needs at least 2 entries to compare")]
        if params.tolerance is not None and params.tolerance < 0:
            problems.append(("tolerance", f"'close' allows a spread up to its tolerance, which must be ≥ 0, got {params.tolerance:g}"))
        return problems

    def _verdict(self, params: OrderedParams, name: str, subject: str, task: str, groups: list[list[Record]], tol: float) -> Verdict:
        values = self._values(params, groups)
        if isinstance(values, str):
            return Verdict(name, self.name, subject, task, float("nan"), f"spread ≤ {tol:g}", False, values)
        spread = max(values) - min(values)
        shown = ", ".join(f"{v:.3f}" for v in values)
        return Verdict(name, self.name, subject.replace(" > ", " ≈ "), task.replace(" > ", " ≈ "), spread, f"spread ≤ {tol:g}",
                       bool(spread <= tol), f"{params.statistic} of {params.metric}: {shown}")
