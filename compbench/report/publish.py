"""Publish a suite's results: verdicts, tables and files, from a run or rebuilt from the store."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from compbench.report.tables import write_report
from compbench.scoring.expectations import Verdict, evaluate_expectations
from compbench.suite import LoadedSuite

SUMMARY_FILE = "summary.json"


class NoResultsError(RuntimeError):
    """There are no stored results to report."""


def publish(
    out_dir: Path, loaded: LoadedSuite, records: list[dict[str, Any]], summary: dict[str, Any], *, check: bool = True
) -> tuple[list[Verdict], list[Path]]:
    """Evaluate the suite's expectations on the records and write every report file."""
    verdicts = evaluate_expectations(loaded.suite.expectations, records) if check else []
    out_dir.mkdir(parents=True, exist_ok=True)
    keep = ("suite", "device", "wall_time", "n_run", "n_cached", "n_failed", "n_skipped", "interrupted")
    (out_dir / SUMMARY_FILE).write_text(json.dumps({k: summary[k] for k in keep if k in summary}, indent=2))
    paths = write_report(out_dir, loaded.name, [t.id for t in loaded.suite.tasks], records, verdicts, summary)
    return verdicts, paths


def stored_records(out_dir: Path, loaded: LoadedSuite) -> list[dict[str, Any]]:
    """The newest stored record of every cell of this suite, in suite order."""
    from compbench.store import ResultStore

    latest = ResultStore(out_dir / "store").latest()
    records = [r for r in latest.values() if r.get("suite") == loaded.name]
    model_order = {m.id: i for i, m in enumerate(loaded.models)}
    task_order = {t.id: i for i, t in enumerate(loaded.suite.tasks)}
    records.sort(key=lambda r: (model_order.get(r["model"], len(model_order)), task_order.get(r["task"], 0), r["seed"]))
    if not records:
        raise NoResultsError(f"no stored results for suite {loaded.name!r} in {out_dir / 'store'}; run `compbench run --suite {loaded.name}` first")
    return records


def rebuild(out_dir: Path, loaded: LoadedSuite) -> tuple[list[Verdict], list[Path]]:
    """Rebuild every report file from the stored records (no training)."""
    records = stored_records(out_dir, loaded)
    summary_path = out_dir / SUMMARY_FILE
    summary: dict[str, Any] = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    summary.setdefault("device", records[0].get("device", "?"))
    summary.setdefault("wall_time", float("nan"))
    for k in ("n_run", "n_cached"):
        summary.setdefault(k, 0)
    summary["n_failed"] = sum(r["status"] == "error" for r in records)
    summary["n_skipped"] = sum(r["status"] == "skipped" for r in records)
    return publish(out_dir, loaded, records, summary)
