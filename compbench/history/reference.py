"""A check's reference from the trailing runs of a results directory (`--baseline history:N`), instead of a file."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

import numpy as np

from compbench.check.baseline import Baseline, cell_summaries
from compbench.history.runs import HistoryError, suite_runs
from compbench.store import ResultStore, StoredRun

SPEC = re.compile(r"history:([0-9]+)")
MIN_RUNS = 2  # one run's seeds are a recorded baseline's job; across runs the spread needs two


def parse_history_spec(text: str) -> int | None:
    """N of 'history:N', None for anything else (a baseline file); HistoryError for 'history:' with no N ≥ 2."""
    if not text.startswith("history:"):
        return None
    match = SPEC.fullmatch(text)
    if not match or int(match.group(1)) < MIN_RUNS:
        raise HistoryError(f"--baseline {text}: give history:N with N ≥ {MIN_RUNS} whole runs, e.g. history:5")
    return int(match.group(1))


def _merge(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """One cell's reference from its entry in each run: every run's values pooled (seed noise and the drift between
    runs), n the most seeds one run had (the same seeds rerun are not new samples: N reruns never narrow the tolerance)."""
    out = {**entries[-1], "errors": 0, "metrics": {}}
    out.pop("first_error", None)
    for metric in dict.fromkeys(m for e in entries for m in e["metrics"]):
        dists = [e["metrics"][metric] for e in entries if metric in e["metrics"]]
        values = [float(v) for d in dists for v in d["values"] if v is not None and math.isfinite(v)]
        if not values:
            continue  # no run measured it: the run checked now is compared on what the reference has
        merged: dict[str, Any] = {"mean": float(np.mean(values)), "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
                                  "n": max(int(d["n"]) for d in dists), "values": [round(v, 6) for v in values]}
        predicted = {d.get("theory_std") for d in dists}
        if len(predicted) == 1 and (sd := predicted.pop()) is not None:
            merged["theory_std"] = sd
        out["metrics"][metric] = merged
    return out


def history_baseline(directory: Path, label: str, suite: str, profile: str | None, last: int,
                     device: str = "cpu") -> tuple[Baseline, list[StoredRun]]:
    """The reference of a check from the last `last` runs of `suite` under `profile` that ended whole (not stopped)
    in the store under `directory`, read before the check runs (so its own run is never in it), and those runs;
    HistoryError when fewer than two such runs exist."""
    try:
        runs = suite_runs(directory, label, suite)
    except HistoryError as exc:
        raise HistoryError(f"--baseline history:{last}: {exc}") from None
    usable = [r for r in runs if (r.profile or None) == (profile or None) and not r.info.get("interrupted")][-last:]
    if len(usable) < MIN_RUNS:
        words = f"profile {profile!r}" if profile else "the default profile"
        raise HistoryError(f"--baseline history:{last}: {label} records {len(usable)} run(s) of suite {suite!r} under "
                           f"{words} that ended whole; a reference across runs needs at least {MIN_RUNS}: run the "
                           f"suite there (`compbench run --suite {suite} --results {label}`), or check against a "
                           "recorded baseline file")
    store = ResultStore(Path(directory) / "store")
    try:
        per_run = [cell_summaries(store.run_records(run)) for run in usable]
    finally:
        store.close()
    cells: dict[str, dict[str, Any]] = {}
    for cell in dict.fromkeys(c for summary in per_run for c in summary):
        merged = _merge([s[cell] for s in per_run if cell in s])
        if merged["metrics"]:
            cells[cell] = merged
    if not cells:
        raise HistoryError(f"--baseline history:{last}: the runs {', '.join(r.id for r in usable)} reported no ok cell "
                           "to compare with")
    return Baseline(suite, cells, device_class=device, created=usable[-1].id, profile=profile), usable
