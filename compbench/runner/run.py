"""Run a suite: skip cached cells, execute the rest, store each job's records as it finishes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compbench.runner.cells import expand_jobs, prepare_tasks
from compbench.runner.device import resolve_device
from compbench.runner.execute import run_job
from compbench.runner.progress import Progress
from compbench.store import ResultStore
from compbench.suite import LoadedSuite, matches


@dataclass
class RunSummary:
    """What a run did: records of this suite (fresh and cached) and counts."""

    suite: str
    device: str
    records: list[dict[str, Any]] = field(default_factory=list)
    n_run: int = 0
    n_cached: int = 0
    n_failed: int = 0
    n_skipped: int = 0
    wall_time: float = 0.0
    interrupted: bool = False


def run_suite(
    loaded: LoadedSuite,
    out_dir: Path,
    *,
    device: str = "auto",
    force: bool = False,
    model_patterns: list[str] | None = None,
    progress: bool = True,
) -> RunSummary:
    """Run every cell of the suite not already in the store at out_dir; Ctrl-C keeps what finished."""
    start = time.perf_counter()
    dev = resolve_device(device)
    if model_patterns:
        loaded.models = [m for m in loaded.models if matches(m.id, model_patterns, m.group)]
    store = ResultStore(out_dir / "store")
    if force:
        store.clear()
    cache = store.latest()
    tasks = prepare_tasks(loaded)
    jobs = expand_jobs(loaded, tasks, dev)
    summary = RunSummary(loaded.name, dev)
    with Progress(len(jobs), loaded.name, enabled=progress) as bar:
        try:
            for job in jobs:
                if all(k in cache for k in job.keys):
                    recs = [cache[k] for k in job.keys]
                    summary.n_cached += len(recs)
                    bar.advance([r["status"] for r in recs], cached=True)
                else:
                    recs = run_job(job, dev)
                    for r in recs:
                        r["suite"] = loaded.name
                    store.append(recs)
                    summary.n_run += len(recs)
                    bar.advance([r["status"] for r in recs], cached=False)
                summary.records.extend(recs)
                summary.n_failed += sum(r["status"] == "error" for r in recs)
                summary.n_skipped += sum(r["status"] == "skipped" for r in recs)
        except KeyboardInterrupt:
            summary.interrupted = True
        finally:
            store.close()
    summary.wall_time = time.perf_counter() - start
    return summary
