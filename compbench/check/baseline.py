"""Baselines: per cell (model × task), the distribution of each checked metric over seeds."""

from __future__ import annotations

import datetime as _dt
import json
import math
import numbers
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from compbench import __version__
from compbench.errors import CompbenchError
from compbench.records import CellRecord, as_records, big_groups
from compbench.limits import MAX_SEED
from compbench.records.metric_facts import bounds_of, direction_of, headline_metrics
from compbench.files import write_atomic

BASELINE_SCHEMA = 1
# k: multiples of the combined standard error; floor: minimum tolerance. Which way is better is the
# metric's fact (records.metric_facts.direction_of): a baseline's policy may repeat it, never change it.
DEFAULT_POLICY: dict[str, dict[str, Any]] = {
    "heldout_acc": {"k": 2.5, "floor": 0.05},
    "heldout_acc_samples": {"k": 2.5, "floor": 0.05},
    "heldout_r2": {"k": 2.5, "floor": 0.02},
    "theory_r2": {"k": 2.5, "floor": 0.02},
    "additivity": {"k": 2.5, "floor": 0.02},
    "factor_r2": {"k": 2.5, "floor": 0.02},  # tasks with named factor outputs (sprites): mean per-factor R²
    "count_perfect": {"k": 2.5, "floor": 0.0},
    "mean_heldout": {"k": 2.5, "floor": 0.01},
}
POLICY_FIELDS = ("direction", "k", "floor")
MAX_N = MAX_SEED + 1  # a distribution over more seeds than there are seeds is a hand-edit (and overflows a float)


class BaselineError(CompbenchError, ValueError):
    """A baseline file is missing, malformed or of another schema version."""


@dataclass
class Baseline:
    """A recorded baseline: cells → metric → {mean, std, n, values}."""

    suite: str
    cells: dict[str, dict[str, Any]]
    policy: dict[str, dict[str, Any]] = field(default_factory=lambda: json.loads(json.dumps(DEFAULT_POLICY)))
    device_class: str = "cpu"
    compbench_version: str = __version__
    created: str = ""
    profile: str | None = None  # the suite profile it was recorded under (None: the default); a check must run the same

    def to_json(self) -> str:
        """Human-readable JSON, keys sorted so diffs review well."""
        doc = {
            "schema_version": BASELINE_SCHEMA,
            "suite": self.suite,
            "compbench_version": self.compbench_version,
            "device_class": self.device_class,
            "created": self.created,
            "policy": self.policy,
            "profile": self.profile,
            "cells": self.cells,
        }
        return json.dumps(doc, indent=2, sort_keys=True) + "\n"

    def write(self, path: Path) -> None:
        """Write the baseline file atomically: a full disk leaves the previous baseline whole (compbench.files)."""
        path = Path(path)
        write_atomic(path.parent, path.name, self.to_json())

    @classmethod
    def read(cls, path: Path) -> Baseline:
        """Read a baseline file, refusing other schema versions with a clear message."""
        path = Path(path)
        if not path.is_file():
            raise BaselineError(f"{path}: no such baseline file (record one with `compbench baseline record`)")
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise BaselineError(f"{path}:{exc.lineno}: not valid JSON: {exc.msg}") from None
        if not isinstance(doc, dict) or doc.get("schema_version") != BASELINE_SCHEMA:
            found = doc.get("schema_version") if isinstance(doc, dict) else None
            raise BaselineError(f"{path}: baseline schema version {found} != {BASELINE_SCHEMA}; re-record it")
        try:
            base = cls(doc["suite"], doc["cells"], doc.get("policy") or DEFAULT_POLICY, doc.get("device_class", "cpu"),
                       doc.get("compbench_version", "?"), doc.get("created", ""), doc.get("profile"))
        except KeyError as exc:
            raise BaselineError(f"{path}: missing field {exc.args[0]!r}") from None
        if base.profile is not None and not (isinstance(base.profile, str) and base.profile):
            raise BaselineError(f"{path}: field 'profile' must name a profile of the suite, or be null (the default), "
                                f"got {base.profile!r}")
        _validate(path, base)
        return base

    def check_profile(self, path: Path, profile: str | None) -> None:
        """Refuse a check under another profile than the baseline's: its cells ran other settings, so every
        comparison would be between different experiments (a baseline without the field is the default's)."""
        if (self.profile or None) != (profile or None):
            def words(p: str | None) -> str:
                return f"profile {p!r}" if p else "the default profile"

            raise BaselineError(f"{path}: recorded under {words(self.profile)} of suite {self.suite!r}, but this check runs "
                                f"{words(profile)}; nothing was run: check with "
                                + (f"--profile {self.profile}" if self.profile else "no --profile")
                                + f", or record a baseline under {words(profile)}")

    def problems(self) -> list[str]:
        """Cells that must not be recorded: 'cell: why' for failed seeds and missing or non-finite metrics."""
        out = []
        for cell, entry in sorted(self.cells.items()):
            if entry.get("errors"):
                out.append(f"{cell}: {entry['errors']} failed seed(s)" + (f" ({entry['first_error']})" if entry.get("first_error") else ""))
            bad = sorted(m for m, d in entry["metrics"].items() if d.get("nonfinite") or not _finite(d.get("mean")))
            if bad:
                out.append(f"{cell}: non-finite {', '.join(bad)}")
            elif not entry["metrics"]:
                out.append(f"{cell}: no metric measured")
        return out


def _validate_policy(path: Path, policy: Any) -> None:
    """A policy a check can rely on: known metrics, their own direction, finite k and floor ≥ 0."""
    if not isinstance(policy, dict):
        raise BaselineError(f"{path}: field 'policy' must be an object of metric → {{k, floor}}, got {type(policy).__name__}")
    for metric, rule in policy.items():
        where = f"{path}: policy.{metric}"
        fact_dir = direction_of(metric)
        if metric not in DEFAULT_POLICY and fact_dir is None:
            raise BaselineError(f"{where}: not a metric `check` compares ({', '.join(DEFAULT_POLICY)})")
        if not isinstance(rule, dict):
            raise BaselineError(f"{where}: must be an object with k and floor, got {rule!r}")
        unknown = sorted(set(rule) - set(POLICY_FIELDS))
        if unknown:
            raise BaselineError(f"{where}: unknown field(s) {', '.join(unknown)} (a policy has {', '.join(POLICY_FIELDS)})")
        # compbench 0.1.0 wrote "higher" for every metric it gated, additivity included: read as no opinion.
        legacy = rule.get("direction") == "higher" and fact_dir is None and metric in DEFAULT_POLICY
        if "direction" in rule and rule["direction"] != fact_dir and not legacy:
            raise BaselineError(f"{where}.direction: {rule['direction']!r}, but {metric} is better {fact_dir} "
                                "(a metric's direction is a fact, not a policy; remove the field)")
        for fld in ("k", "floor"):
            if fld in rule and not (_finite(rule[fld]) and float(rule[fld]) >= 0):
                raise BaselineError(f"{where}.{fld}: must be a finite number ≥ 0, got {rule[fld]!r}")


def _validate(path: Path, base: Baseline) -> None:
    """A baseline a check can rely on: named suite, at least one cell, finite distributions with n ≥ 1, a sound policy."""
    _validate_policy(path, base.policy)
    if not isinstance(base.suite, str) or not base.suite:
        raise BaselineError(f"{path}: field 'suite' must name a suite, got {base.suite!r}")
    if not isinstance(base.cells, dict):
        raise BaselineError(f"{path}: field 'cells' must be an object of cell id → entry")
    if not base.cells:
        raise BaselineError(f"{path}: baseline has no cells (a check against it would pass having compared nothing); "
                            f"record one with `compbench baseline record`")
    for cell, entry in base.cells.items():
        metrics = entry.get("metrics") if isinstance(entry, dict) else None
        if not isinstance(metrics, dict) or not metrics:
            raise BaselineError(f"{path}: cell {cell!r} has no metrics")
        members = entry.get("members")
        if members is not None and not (_whole(members) and 0 <= members <= MAX_N):
            raise BaselineError(f"{path}: cell {cell!r} members must be a whole number of sweep members, got {_short(members)}")
        for metric, d in metrics.items():
            why = _distribution_problem(metric, d)
            if why:
                raise BaselineError(f"{path}: cell {cell!r} metric {metric!r}: {why}; re-record the baseline "
                                    "(`compbench baseline record`)")


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 40 else f"{text[:40]}… ({len(text):,} characters)"


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def max_std(low: float, high: float, mean: float, n: int) -> float:
    """The largest sample std (ddof=1) that n values within [low, high] with this mean can have: 0 for one value;
    √n·(high − mean) with only an upper bound (n − 1 values at it, one far below), and at most √(n/(n−1))·(high − low)/2."""
    if n <= 1:
        return 0.0
    return min(math.sqrt(n) * (high - mean), math.sqrt(n) * (mean - low), math.sqrt(n / (n - 1)) * (high - low) / 2)


def _distribution_problem(metric: str, d: Any) -> str | None:
    """What makes `d` no distribution of `metric` over seeds that a run could have recorded, else None:
    typed numbers (a str is not one), finite, within the metric's range, a spread those bounds allow, and values
    that agree with them."""
    if not isinstance(d, dict):
        return f"must be an object {{mean, std, n, values}}, got {_short(d)}"
    if d.get("nonfinite"):
        return f"{d['nonfinite']} value(s) were missing or non-finite when it was recorded"
    for fld in ("mean", "std"):
        if not _finite(d.get(fld)):
            return f"{fld} must be a finite number, got {_short(d.get(fld))}"
    n = d.get("n")
    if not (_whole(n) and 1 <= n <= MAX_N):
        return f"n must be a whole number of seeds from 1 to {MAX_N:,}, got {_short(n)}"
    low, high = bounds_of(metric)
    mean, std = float(d["mean"]), float(d["std"])
    if not low <= mean <= high:
        return f"mean {mean!r} lies outside [{low:g}, {high:g}], the values {metric} can take"
    limit = max_std(low, high, mean, n)
    if not 0 <= std <= limit * (1 + 1e-9) + 1e-12:
        return (f"std {std!r} is impossible for {n} seed(s) of {metric} (in [{low:g}, {high:g}]) with mean {mean:.6g}: "
                f"at most {limit:.6g}")
    if "theory_std" in d and not (_finite(d["theory_std"]) and d["theory_std"] >= 0):
        return f"theory_std must be a finite number ≥ 0, got {_short(d['theory_std'])}"
    values = d.get("values")
    if values is not None:
        if not (isinstance(values, list) and len(values) == n and all(_finite(v) for v in values)):
            return f"values must be a list of {n} finite numbers (one per seed), got {_short(values)}"
        tol = 1e-4 * max(1.0, abs(mean))  # values are recorded rounded to 6 decimals
        if abs(float(np.mean(values)) - mean) > tol or (n > 1 and abs(float(np.std(values, ddof=1)) - std) > tol):
            return f"mean {mean:.6g} and std {std:.6g} disagree with its values {_short(values)}"
    return None


def _finite(v: Any) -> bool:
    """Whether v is a real, finite number (None, NaN, ±inf, booleans and strings such as "1e9" are not)."""
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(float(v))


def _dist(values: list[Any]) -> dict[str, Any]:
    """Mean, std and n over seeds; a missing or non-finite value counts in n (it is a failed seed, not
    a missing sample), makes the mean NaN and is counted as `nonfinite`."""
    finite = [float(v) for v in values if _finite(v)]
    bad = len(values) - len(finite)
    d: dict[str, Any] = {
        "mean": float(np.mean(finite)) if finite and not bad else float("nan"),
        "std": float(np.std(finite, ddof=1)) if len(finite) > 1 else 0.0,
        "n": len(values),
        "values": [round(float(v), 6) if _finite(v) else None for v in values],
    }
    if bad:
        d["nonfinite"] = bad
    return d


def cell_id(record: CellRecord, big: set[str]) -> str:
    """The id `check` gives a record's cell: 'model/task', or 'group[*]/task' for a big sweep's members."""
    return f"{record.group}[*]/{record.task}" if record.group in big else f"{record.model}/{record.task}"


def cell_summaries(records: list[CellRecord] | list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per cell id ('model/task', or 'group[*]/task' for big sweeps): metric distributions over seeds.

    A metric that a seed's record declares not applicable (an R² against a constant theory, see
    records.metric_facts) is not summarised for that cell: `check` gates only on what measures something.
    """
    records = as_records(records)
    big = big_groups(records)
    by: dict[str, list[CellRecord]] = defaultdict(list)
    for r in records:
        if not r.skipped:
            by[cell_id(r, big)].append(r)
    heads = headline_metrics(records)
    out: dict[str, dict[str, Any]] = {}
    for cell, recs in by.items():
        ok = [r for r in recs if r.ok]
        errors = len(recs) - len(ok)
        entry: dict[str, Any] = {"task": recs[0].task, "group": recs[0].group, "errors": errors, "metrics": {}}
        if errors:
            entry["first_error"] = str(next(r.message or r.status.value for r in recs if not r.ok))[:200]
        score = heads[recs[0].task]
        if cell.split("/")[0].endswith("[*]"):
            per_member: dict[str, list[float]] = defaultdict(list)
            for r in ok:
                per_member[r.model].append(r.metric(score))
            # A member with a missing or non-finite score has a NaN mean: never perfect, and mean_heldout is NaN.
            means = [float(np.mean(v)) if all(_finite(x) for x in v) else float("nan") for v in per_member.values()]
            entry["members"] = len(per_member)
            entry["metrics"]["count_perfect"] = _dist([float(sum(m >= 1 - 1e-9 for m in means))])
            entry["metrics"]["mean_heldout"] = _dist([float(np.mean(means))] if means else [])
        else:
            entry["model"] = recs[0].model
            entry["keys"] = sorted(r.key for r in recs)
            for metric in (score, "theory_r2", "additivity", "factor_r2"):
                na = sorted({r.not_applicable[metric] for r in ok if metric in r.not_applicable})
                if na:
                    entry.setdefault("not_applicable", {})[metric] = "; ".join(na)
                elif any(metric in r.metrics for r in ok):
                    entry["metrics"][metric] = _dist([r.metric(metric) for r in ok])
                    predicted = {r.theory_sd.get(metric) for r in ok}
                    if len(predicted) == 1 and _finite(sd := predicted.pop()):
                        # the spread its theory predicts (a lazy network's NTK-GP): compare's noise floor
                        entry["metrics"][metric]["theory_std"] = float(sd)
        out[cell] = entry
    return out


def baseline_from_records(suite: str, records: list[CellRecord], device: str, profile: str | None = None) -> Baseline:
    """A baseline recording every cell's metric distributions, and the profile they ran under."""
    created = _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()
    return Baseline(suite, cell_summaries(records), device_class=device, created=created, profile=profile)
