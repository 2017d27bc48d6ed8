"""Publish a suite's results: verdicts, tables, plots and files, from a run or rebuilt from the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from compbench.report.html import html_report
from compbench.report.tables import leaderboard_frame, markdown_report, records_frame, report_tables, theory_frame
from compbench.scoring.expectations import Verdict, evaluate_expectations
from compbench.suite import LoadedSuite

SUMMARY_FILE = "summary.json"
FORMATS = ("md", "csv", "html", "png")


class NoResultsError(RuntimeError):
    """There are no stored results to report."""


class ReportFormatError(ValueError):
    """An unknown report format was asked for."""


def parse_formats(text: str) -> tuple[str, ...]:
    """'md,csv' → ('md', 'csv'); unknown names are an error."""
    formats = tuple(f.strip() for f in text.split(",") if f.strip())
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ReportFormatError(f"unknown report format(s) {unknown or text!r}; choose from {', '.join(FORMATS)}")
    return formats


def publish(
    out_dir: Path,
    loaded: LoadedSuite,
    records: list[dict[str, Any]],
    summary: dict[str, Any],
    *,
    check: bool = True,
    formats: tuple[str, ...] = FORMATS,
) -> tuple[list[Verdict], list[Path]]:
    """Evaluate the suite's expectations on the records and write the report files asked for.

    md: leaderboard.md; csv: leaderboard.csv, theory.csv, records.csv, expectations.csv; html: one
    self-contained leaderboard.html (tables and plots inline); png: plots/*.png and plots/*.svg.
    """
    verdicts = evaluate_expectations(loaded.suite.expectations, records) if check else []
    out_dir.mkdir(parents=True, exist_ok=True)
    keep = ("suite", "device", "executor", "wall_time", "n_run", "n_cached", "n_failed", "n_skipped", "interrupted")
    (out_dir / SUMMARY_FILE).write_text(json.dumps({k: summary[k] for k in keep if k in summary}, indent=2))
    task_ids = [t.id for t in loaded.suite.tasks]
    expected = expected_cells(loaded)
    tables = report_tables(task_ids, records, verdicts, summary, expected)
    paths: list[Path] = []
    plots = []
    if "png" in formats or "html" in formats:
        from compbench.report.plots import write_plots

        # html without png: the plots are drawn for the page only, no files.
        plots = write_plots(out_dir if "png" in formats else None, loaded, records)
        if "png" in formats:
            paths += [out_dir / "plots" / f"{p.name}.png" for p in plots]  # each with its .svg beside it
    if "md" in formats:
        paths.append(out_dir / "leaderboard.md")
        shown = [(f"{p.name}.png", p.caption) for p in plots] if "png" in formats else []
        paths[-1].write_text(markdown_report(loaded.name, tables, shown), encoding="utf-8")
    if "csv" in formats:
        csvs = {
            "leaderboard.csv": leaderboard_frame(records, task_ids, expected),
            "theory.csv": theory_frame(records, task_ids, expected),
            "records.csv": records_frame(records),
            "expectations.csv": pd.DataFrame([{**v.__dict__, "verdict": v.status} for v in verdicts],
                                             columns=[*Verdict.__dataclass_fields__, "verdict"]),
        }
        for name, frame in csvs.items():
            frame.to_csv(out_dir / name, index=False)
            paths.append(out_dir / name)
    if "html" in formats:
        paths.append(out_dir / "leaderboard.html")
        paths[-1].write_text(html_report(loaded.name, tables, plots), encoding="utf-8")
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


def rebuild(out_dir: Path, loaded: LoadedSuite, formats: tuple[str, ...] = FORMATS) -> tuple[list[Verdict], list[Path]]:
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
