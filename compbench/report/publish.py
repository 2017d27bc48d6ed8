"""Publish a suite's results: verdicts, tables, plots and files, from a run or rebuilt from the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compbench.report.writers import DEFAULT_FORMATS, REPORTERS, ReportContext
from compbench.scoring.expectations import Verdict, evaluate_expectations
from compbench.suite import LoadedSuite

SUMMARY_FILE = "summary.json"


class NoResultsError(RuntimeError):
    """There are no stored results to report."""


class ReportFormatError(ValueError):
    """An unknown report format was asked for."""


def parse_formats(text: str) -> tuple[str, ...]:
    """'md,csv' → ('md', 'csv'); names are registered report writers (unknown: an error with a suggestion)."""
    from compbench.registry import UnknownNameError

    formats = tuple(dict.fromkeys(f.strip() for f in text.split(",") if f.strip()))
    if not formats:
        raise ReportFormatError(f"no report format in {text!r}; choose from {', '.join(REPORTERS.names())}")
    for f in formats:
        try:
            REPORTERS.get(f)
        except UnknownNameError as exc:
            raise ReportFormatError(str(exc).replace("unknown report writer", "unknown report format")) from None
    return formats


def publish(
    out_dir: Path,
    loaded: LoadedSuite,
    records: list[dict[str, Any]],
    summary: dict[str, Any],
    *,
    check: bool = True,
    partial: bool = False,
    formats: tuple[str, ...] = DEFAULT_FORMATS,
) -> tuple[list[Verdict], list[Path]]:
    """Evaluate the suite's expectations on the records and run the report writers asked for.

    md: leaderboard.md; csv: leaderboard.csv, theory.csv, records.csv, expectations.csv; html: one
    self-contained leaderboard.html (tables and plots inline); png: plots/*.png and plots/*.svg;
    predictions: predictions.csv; plus any writer a plugin registers.
    `partial`: only part of the suite ran (`--model`): expectations matching no record are left out.
    """
    verdicts = evaluate_expectations(loaded.suite.expectations, records, loaded.tags, partial=partial) if check else []
    out_dir.mkdir(parents=True, exist_ok=True)
    keep = ("suite", "device", "executor", "wall_time", "n_run", "n_cached", "n_failed", "n_skipped", "interrupted")
    (out_dir / SUMMARY_FILE).write_text(json.dumps({k: summary[k] for k in keep if k in summary}, indent=2))
    ctx = ReportContext(out_dir, loaded, records, verdicts, summary, formats)
    paths: list[Path] = []
    for name in formats:
        paths += REPORTERS.get(name).write(ctx)
    return verdicts, paths


def expected_cells(loaded: LoadedSuite) -> list[tuple[str, str, str]]:
    """(model id, sweep group, task id) for every cell the suite asks for, in suite order."""
    return [(m.id, m.group, t.id) for m in loaded.models for t in loaded.tasks_for(m)]


def report_devices(out_dir: Path) -> list[str]:
    """Devices whose cache keys a report looks up, in order: the last run's (summary.json), then the others."""
    summary_path = out_dir / SUMMARY_FILE
    last = None
    try:
        last = json.loads(summary_path.read_text()).get("device") if summary_path.exists() else None
    except (ValueError, OSError, AttributeError):
        last = None
    order = ["cpu", "cuda"]
    return [last, *(d for d in order if d != last)] if last in order else order


def stored_records(out_dir: Path, loaded: LoadedSuite) -> list[dict[str, Any]]:
    """The stored record of every cell of this suite, in suite order, selected as `compbench run` selects them.

    Each job's cache keys are looked up in the store and the records relabelled with this suite's
    names (`runner.run.stored_results`), so renamed models and cells shared with another suite
    appear as the run showed them, and records of models no longer in the suite do not.
    """
    from compbench.runner.run import stored_results

    records = stored_results(loaded, out_dir, report_devices(out_dir))
    if not records:
        raise NoResultsError(
            f"no stored results for suite {loaded.name!r} in {out_dir / 'store'}; run `compbench run --suite {loaded.name}` first"
        )
    return records


def rebuild(out_dir: Path, loaded: LoadedSuite, formats: tuple[str, ...] = DEFAULT_FORMATS) -> tuple[list[Verdict], list[Path]]:
    """Rebuild every report file from the stored records (no training)."""
    records = stored_records(out_dir, loaded)
    summary_path = out_dir / SUMMARY_FILE
    try:
        summary: dict[str, Any] = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    except (ValueError, OSError):
        summary = {}
    if not isinstance(summary, dict):
        summary = {}
    summary.setdefault("device", records[0].get("device", "?"))
    summary["n_failed"] = sum(r["status"] == "error" for r in records)
    summary["n_skipped"] = sum(r["status"] == "skipped" for r in records)
    return publish(out_dir, loaded, records, summary, formats=formats)
