"""A metric of chosen (model, task) cells across a suite's runs: one row per run, the mean over seeds per cell."""

from __future__ import annotations

import csv
import datetime as _dt
import io
import json
import math
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from compbench.history.runs import HistoryError, commit_label, suite_runs
from compbench.records import CellRecord
from compbench.records.metric_facts import headline_metrics
from compbench.store import ResultStore

Cell = tuple[str, str, str]  # (model, task, metric)


@dataclass(frozen=True)
class CellStat:
    """One cell's metric in one run: mean and sample std over its seeds' finite values, how many, and failed seeds."""

    mean: float
    std: float
    n: int
    failed: int = 0

    def text(self) -> str:
        """'0.8889 ± 0.0120 (n=3)'; one seed has no spread to show; failed seeds are counted after it."""
        shown = "—" if self.n == 0 else f"{self.mean:.4f}" + (f" ± {self.std:.4f}" if self.n > 1 else "") + f" (n={self.n})"
        return shown + (f", {self.failed} failed" if self.failed else "")


@dataclass(frozen=True)
class HistoryRow:
    """One run: its id, start, commit label, profile, whether it ran part of the suite or was stopped, and its cells."""

    run: str
    started: float
    commit: str
    profile: str | None
    partial: bool
    interrupted: bool
    cells: dict[Cell, CellStat]

    @property
    def date(self) -> str:
        """The run's start in UTC, to the minute."""
        return _dt.datetime.fromtimestamp(self.started, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M")


@dataclass(frozen=True)
class History:
    """A suite's selected cells across its runs, oldest run first."""

    suite: str
    cells: list[Cell]
    rows: list[HistoryRow]


def _stat(records: list[CellRecord], metric: str) -> CellStat:
    values = [v for r in records if r.ok and (v := r.finite_metric(metric)) is not None]
    failed = sum(r.failed for r in records)
    if not values:
        return CellStat(math.nan, math.nan, 0, failed)
    mean = sum(values) / len(values)
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return CellStat(mean, std, len(values), failed)


def _selected(names: set[str], patterns: list[str] | None, flag: str, suite: str) -> set[str]:
    """The names matching any of the globs (all without any); HistoryError for a glob that matches none."""
    if not patterns:
        return names
    for pattern in patterns:
        if not any(fnmatchcase(n, pattern) for n in names):
            shown = ", ".join(sorted(names)[:20]) + (f" and {len(names) - 20} more" if len(names) > 20 else "")
            raise HistoryError(f"{flag} {pattern!r}: matches nothing the runs of suite {suite!r} recorded ({shown}); "
                               f"give an id or glob of one of them")
    return {n for n in names if any(fnmatchcase(n, p) for p in patterns)}


def history_of(directory: Path, label: str, suite: str, models: list[str] | None = None, tasks: list[str] | None = None,
               metric: str | None = None, last: int | None = None) -> History:
    """The history of `suite` in the results at `directory` (`label`: as the user named them): per run that ended and
    reported a selected cell, each selected (model, task)'s `metric` (default: its task's score) over the records that
    run reported, superseded since or not; the last `last` such runs."""
    runs = suite_runs(directory, label, suite)
    store = ResultStore(Path(directory) / "store")
    try:
        per_run = [(run, [r for r in store.run_records(run) if not r.skipped]) for run in runs]
    finally:
        store.close()
    every = [r for _, recs in per_run for r in recs]
    keep_models = _selected({r.model for r in every}, models, "--model", suite)
    keep_tasks = _selected({r.task for r in every}, tasks, "--task", suite)
    chosen = [r for r in every if r.model in keep_models and r.task in keep_tasks]
    if metric is not None and not any(metric in r.metrics for r in chosen):
        carried = sorted({m for r in chosen for m in r.metrics})
        raise HistoryError(f"--metric {metric}: no record of the selected cells carries it (they carry "
                           f"{', '.join(carried) or 'no metric'})")
    heads = headline_metrics(chosen)  # one headline per task over every run, so a task's rows line up
    rows: list[HistoryRow] = []
    for run, recs in per_run:
        by: dict[Cell, list[CellRecord]] = {}
        for r in recs:
            if r.model in keep_models and r.task in keep_tasks:
                name = metric or heads[r.task]
                by.setdefault((r.model, r.task, name), []).append(r)
        if by:
            rows.append(HistoryRow(run.id, run.started, commit_label(run), run.profile, bool(run.info.get("partial")),
                                   bool(run.info.get("interrupted")), {c: _stat(v, c[2]) for c, v in by.items()}))
    if not rows:
        raise HistoryError(f"{label}: no run of suite {suite!r} reported the selected cells")
    rows = rows[-last:] if last else rows
    cells = sorted({c for row in rows for c in row.cells})
    return History(suite, cells, rows)


def _run_note(row: HistoryRow) -> str:
    return " (partial)" if row.partial else " (stopped)" if row.interrupted else ""


def to_markdown(history: History) -> str:
    """One row per run (id, date, commit, profile), one column per (model, task) with its metric's mean ± std (n)."""
    head = ["run", "date (UTC)", "commit", "profile", *(f"{m}/{t} {metric}" for m, t, metric in history.cells)]
    lines = [f"history of suite {history.suite}: {len(history.rows)} run(s), {len(history.cells)} cell(s), "
             "mean ± std over seeds", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in history.rows:
        values = [row.cells[c].text() if c in row.cells else "—" for c in history.cells]
        lines.append("| " + " | ".join([row.run + _run_note(row), row.date, row.commit, row.profile or "default",
                                        *values]) + " |")
    return "\n".join(lines) + "\n"


def _number(x: float) -> float | None:
    return round(x, 6) if math.isfinite(x) else None


def _long(history: History) -> list[dict[str, object]]:
    """One dict per (run, cell) the run reported, in run order."""
    return [{"run": row.run, "date": row.date, "commit": row.commit, "profile": row.profile, "partial": row.partial,
             "interrupted": row.interrupted, "model": m, "task": t, "metric": metric,
             "mean": _number(s.mean), "std": _number(s.std), "n": s.n, "failed": s.failed}
            for row in history.rows for (m, t, metric), s in ((c, row.cells[c]) for c in history.cells if c in row.cells)]


def to_json(history: History) -> str:
    """The history as JSON: the suite, and one object per (run, cell)."""
    return json.dumps({"suite": history.suite, "rows": _long(history)}, indent=2) + "\n"


def to_csv(history: History) -> str:
    """The history as CSV, one line per (run, cell)."""
    rows = _long(history)
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["run", "date", "commit", "profile", "partial", "interrupted", "model", "task",
                                             "metric", "mean", "std", "n", "failed"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue()
