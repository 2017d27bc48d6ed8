"""One side of a comparison: a results directory's (or a bundle's) last run, or a run of a store by its id."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compbench.errors import CompbenchError
from compbench.records import CellRecord
from compbench.store import ResultStore, StoredRun
from compbench.store.records import STORE_FILE


class CompareError(CompbenchError, ValueError):
    """A side of a comparison cannot be read: not a results directory, an unknown run id, no store."""


@dataclass
class Side:
    """The records one side reported, its expectation verdicts (None: not recorded), and its run's facts."""

    label: str
    records: list[CellRecord]
    verdicts: list[dict[str, Any]] | None
    run: StoredRun | None = None
    notes: list[str] = field(default_factory=list)


def _chosen(runs: list[StoredRun]) -> StoredRun | None:
    """A results directory's run: the last that ended whole (not partial, not interrupted), else the last that ended."""
    ended = [r for r in runs if r.ended is not None]
    whole = [r for r in ended if not r.info.get("partial") and not r.info.get("interrupted")]
    return (whole or ended or [None])[-1]


def _newest_per_cell(records: list[CellRecord]) -> list[CellRecord]:
    """Of current records sharing a (suite, model, task, seed), the newest (an older configuration's stays current by key)."""
    out: dict[tuple[Any, ...], CellRecord] = {}
    for r in records:  # the store yields them oldest first
        out[(r.suite, r.model, r.task, r.seed)] = r
    return list(out.values())


def load_side(spec: str, results: Path | None = None) -> Side:
    """A side named by `spec`: a results directory or a bundle, or a run id of the store in `results` (either too)."""
    from compbench.bundle import open_results

    path = Path(spec)
    if path.is_dir() or path.is_file():
        with open_results(path) as view:
            return _last_run(spec, view.directory)
    if results is None:
        raise CompareError(f"{spec}: neither a results directory, a bundle, nor, without --results DIR, a run id that can "
                           "be looked up; give a directory or a bundle, or the store's directory with --results DIR")
    with open_results(results) as view:
        return _run_by_id(spec, results, view.directory)


def _last_run(spec: str, path: Path) -> Side:
    """The side of a results directory (or a bundle's copy, `path`): its last whole run."""
    if not (path / "store" / STORE_FILE).is_file():
        raise CompareError(f"{spec}: a folder without a compbench store ({path / 'store' / STORE_FILE}); give a results "
                           "directory that `compbench run --results DIR` wrote, or a run id with --results DIR")
    store = ResultStore(path / "store")
    try:
        run = _chosen(store.runs())
        if run is None:  # a store from before runs were recorded: everything it holds, as stored
            return Side(spec, _newest_per_cell(list(store)), None,
                        notes=[f"{spec}: its store records no run (written before compbench recorded runs): every "
                               "current record is compared, and no expectation verdicts"])
        return Side(f"{spec} (run {run.id})", store.run_records(run), run.info.get("verdicts"), run)
    finally:
        store.close()


def _run_by_id(spec: str, results: Path, directory: Path) -> Side:
    """The run `spec` of the store in `directory` (`results` as the user gave it: a results directory or a bundle)."""
    if not (directory / "store" / STORE_FILE).is_file():
        raise CompareError(f"--results {results}: no compbench store there ({results / 'store' / STORE_FILE})")
    store = ResultStore(directory / "store")
    try:
        runs = store.runs()
        run = next((r for r in runs if r.id == spec), None)
        if run is None:
            known = ", ".join(r.id for r in runs[-5:]) or "none recorded"
            where = results if results.is_file() else results / "store" / STORE_FILE
            raise CompareError(f"{spec}: no such run in {where} (its last runs: {known}); give a "
                               "run id it records, or a results directory")
        if run.ended is None:
            raise CompareError(f"{spec}: run has not ended (still running, or killed before it could record its end); "
                               "compare a run that ended")
        return Side(f"run {run.id}", store.run_records(run), run.info.get("verdicts"), run)
    finally:
        store.close()
