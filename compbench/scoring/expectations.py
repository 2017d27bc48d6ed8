"""Suite-level expectation verdicts: the theory's claims checked on scored records."""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np

from compbench.suite import Expectation, matches

DEFAULT_TOLERANCE = {
    "matches_kernel": 0.05,
    "additive": 0.05,
    "at_chance": 0.15,
    "beats_kernel": 0.2,
    "slope_below_one": 0.05,
    "ordered": 0.0,
}


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

    @property
    def status(self) -> str:
        """PASS or FAIL."""
        return "PASS" if self.passed else "FAIL"


def _mean(records: list[dict[str, Any]], metric: str) -> float:
    vals = [r[metric] for r in records if r.get(metric) is not None]
    vals = [v for v in vals if not (isinstance(v, float) and np.isnan(v))]
    return float(np.mean(vals)) if vals else float("nan")


def _by_member(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        out[r["model"]].append(r)
    return out


def _subjects(records: list[dict[str, Any]], exp: Expectation, task_patterns: Iterable[str]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if matches(r["model"], exp.models, r["group"]) and any(fnmatch.fnmatchcase(r["task"], p) for p in task_patterns):
            groups[(r["group"], r["task"])].append(r)
    return groups


def _cell_claim(exp: Expectation, name: str, subject: str, task: str, recs: list[dict[str, Any]]) -> Verdict:
    tol = exp.tolerance if exp.tolerance is not None else DEFAULT_TOLERANCE[exp.claim]
    errors = [r for r in recs if r["status"] == "error"]
    ok = [r for r in recs if r["status"] == "ok"]
    if errors or not ok:
        msg = errors[0]["error"] if errors else "no finished cells"
        return Verdict(name, exp.claim, subject, task, float("nan"), "", False, f"{len(errors)} cell(s) failed: {msg}")
    members = _by_member(ok)
    n = f"{len(members)} model(s)" if len(members) > 1 else f"{len(ok)} seed(s)"
    if exp.claim == "matches_kernel":
        worst_r2 = min(r["theory_r2"] for r in ok)
        worst_diff = max(r["theory_max_abs_diff"] for r in ok)
        passed = worst_r2 >= 1 - tol
        threshold = f"R² ≥ {1 - tol:g}"
        if exp.max_abs_diff is not None:
            passed = passed and worst_diff <= exp.max_abs_diff
            threshold += f", max|Δ| ≤ {exp.max_abs_diff:g}"
        return Verdict(name, exp.claim, subject, task, worst_r2, threshold, passed,
                       f"worst R²(model, theory) {worst_r2:.6f}, max |model − theory| {worst_diff:.2e} over {n}")
    per_member = {m: rs for m, rs in members.items()}
    if exp.claim == "additive":
        val = min(_mean(rs, "additivity") for rs in per_member.values())
        return Verdict(name, exp.claim, subject, task, val, f"≥ {1 - tol:g}", val >= 1 - tol, f"held-out additivity R² (worst of {n})")
    if exp.claim == "at_chance":
        accs = [_mean(rs, "heldout_acc") for rs in per_member.values()]
        val = max(accs, key=lambda a: abs(a - 0.5))
        return Verdict(name, exp.claim, subject, task, val, f"|acc − 0.5| ≤ {tol:g}", abs(val - 0.5) <= tol,
                       f"held-out accuracy, mean over seeds; separation {_mean(ok, 'separation'):+.3g}")
    if exp.claim == "beats_kernel":
        metric, theory_metric = ("heldout_acc", "theory_acc") if "heldout_acc" in ok[0] else ("heldout_r2", "theory_heldout_r2")
        gaps = [_mean(rs, metric) - _mean(rs, theory_metric) for rs in per_member.values()]
        val = min(gaps)
        return Verdict(name, exp.claim, subject, task, val, f"{metric} − {theory_metric} ≥ {tol:g}", val >= tol,
                       f"{metric} {_mean(ok, metric):.3f} vs its kernel theory {_mean(ok, theory_metric):.3f}")
    if exp.claim == "slope_below_one":
        slope = max(_mean(rs, "slope") for rs in per_member.values())
        corr = min(_mean(rs, "corr") for rs in per_member.values())
        return Verdict(name, exp.claim, subject, task, slope, f"slope ≤ {1 - tol:g}, corr ≥ 0.5",
                       slope <= 1 - tol and corr >= 0.5, f"held-out slope vs truth (corr {corr:.3f})")
    raise ValueError(f"not a per-cell claim: {exp.claim}")


def _statistic(exp: Expectation, recs: list[dict[str, Any]]) -> float:
    ok = [r for r in recs if r["status"] == "ok"]
    members = _by_member(ok)
    per_member = [_mean(rs, exp.metric or "") for rs in members.values()]
    if exp.statistic == "count_perfect":
        return float(sum(v >= 1 - 1e-9 for v in per_member))
    return float(np.mean(per_member)) if per_member else float("nan")


def _ordered(exp: Expectation, name: str, records: list[dict[str, Any]]) -> list[Verdict]:
    tol = exp.tolerance if exp.tolerance is not None else DEFAULT_TOLERANCE["ordered"]
    out = []
    if exp.over == "tasks":
        subjects = sorted({r["group"] for r in records if matches(r["model"], exp.models, r["group"])})
        for subject in subjects:
            values = [
                _statistic(exp, [r for r in records if r["group"] == subject and fnmatch.fnmatchcase(r["task"], p)])
                for p in exp.tasks
            ]
            out.append(_order_verdict(exp, name, subject, " > ".join(exp.tasks), values, tol))
    else:
        tasks = sorted({r["task"] for r in records if any(fnmatch.fnmatchcase(r["task"], p) for p in exp.tasks)})
        for task in tasks:
            values = [
                _statistic(exp, [r for r in records if r["task"] == task and matches(r["model"], [p], r["group"])])
                for p in exp.models
            ]
            out.append(_order_verdict(exp, name, " > ".join(exp.models), task, values, tol))
    return out


def _order_verdict(exp: Expectation, name: str, subject: str, task: str, values: list[float], tol: float) -> Verdict:
    gaps = [a - b for a, b in zip(values, values[1:])]
    gap = min(gaps) if gaps else float("nan")
    fmt = "{:.0f}" if exp.statistic == "count_perfect" else "{:.3f}"
    shown = " > ".join(fmt.format(v) for v in values)
    what = f"{exp.statistic} of {exp.metric}"
    return Verdict(name, exp.claim, subject, task, gap, f"each gap > {tol:g}", bool(gap > tol), f"{what}: {shown}")


def evaluate_expectations(expectations: list[Expectation], records: list[dict[str, Any]]) -> list[Verdict]:
    """Every expectation's verdicts on the records (skipped cells are ignored)."""
    records = [r for r in records if r["status"] != "skipped"]
    verdicts: list[Verdict] = []
    for i, exp in enumerate(expectations):
        name = exp.id or f"{exp.claim}-{i + 1}"
        if exp.claim == "ordered":
            verdicts.extend(_ordered(exp, name, records))
            continue
        subjects = _subjects(records, exp, exp.tasks)
        if not subjects:
            verdicts.append(Verdict(name, exp.claim, ",".join(exp.models), ",".join(exp.tasks), float("nan"), "", False, "no records matched"))
        for (subject, task), recs in sorted(subjects.items()):
            verdicts.append(_cell_claim(exp, name, subject, task, recs))
    return verdicts
