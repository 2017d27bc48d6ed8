"""The runs of one suite that a results directory's store recorded, and the commit each ran at."""

from __future__ import annotations

from pathlib import Path

from compbench.errors import CompbenchError
from compbench.store import ResultStore, StoredRun
from compbench.store.records import STORE_FILE


class HistoryError(CompbenchError, ValueError):
    """A history cannot be built: no store, no run of the suite, a pattern or metric that selects nothing."""


def commit_label(run: StoredRun) -> str:
    """The commit a run's code was at, as `git describe --dirty` shows it ('1a2b3c4', '1a2b3c4-dirty'); '?' outside git.

    The first repository of the run's provenance is the suite file's (provenance.code_paths lists it first)."""
    code = run.info.get("code")
    state = next((c for c in code if isinstance(c, dict) and c.get("sha")), None) if isinstance(code, list) else None
    if state is None:
        return "?"
    return str(state["sha"])[:7] + ("-dirty" if state.get("dirty") else "")


def suite_runs(directory: Path, label: str, suite: str) -> list[StoredRun]:
    """The runs of `suite` in the store under `directory` (`label`: the results as the user named them) that ended,
    oldest first; HistoryError when there is no store or it recorded no run of the suite."""
    path = Path(directory) / "store"
    if not (path / STORE_FILE).is_file():
        raise HistoryError(f"{label}: no compbench store there ({Path(label) / 'store' / STORE_FILE}); give the results "
                           "directory (or bundle) that `compbench run --results DIR` wrote")
    store = ResultStore(path)
    try:
        runs = store.runs()
    finally:
        store.close()
    mine = [r for r in runs if r.suite == suite and r.ended is not None]
    if not mine:
        others = sorted({str(r.suite) for r in runs if r.suite != suite})
        seen = f"it records runs of {', '.join(others)}" if others else "it records no run"
        raise HistoryError(f"{label}: no run of suite {suite!r} that ended ({seen}); run `compbench run --suite "
                           f"{suite} --results {label}` first")
    return mine
