"""Run a suite: skip cached cells, execute the rest, store each job's records as it finishes."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compbench.runner.cells import Job, expand_jobs, prepare_tasks
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


class SuiteRunner:
    """A suite's jobs with their cache: tasks built once, finished cells read from the store."""

    def __init__(self, loaded: LoadedSuite, out_dir: Path, device: str = "auto", force: bool = False) -> None:
        self.loaded = loaded
        self.device = resolve_device(device)
        self.store = ResultStore(Path(out_dir) / "store")
        if force:
            self.store.clear()
        self.tasks = prepare_tasks(loaded)
        self.jobs = expand_jobs(loaded, self.tasks, self.device)
        self._cache: dict[str, dict[str, Any]] | None = None

    @property
    def cache(self) -> dict[str, dict[str, Any]]:
        """Newest stored record per cell key (loaded on first use)."""
        if self._cache is None:
            self._cache = self.store.latest()
        return self._cache

    def run(self, job: Job) -> tuple[list[dict[str, Any]], bool]:
        """The job's records and whether they came from the cache; fresh ones are stored at once."""
        if all(k in self.cache for k in job.keys):
            # The key covers what determines the result, not the names: relabel for this suite.
            labels = {"task": job.task.entry.id, "model": job.model.id, "group": job.model.group,
                      "sweep": job.model.sweep_values, "suite": self.loaded.name}
            return [{**self.cache[k], **labels} for k in job.keys], True
        records = run_job(job, self.device)
        for r in records:
            r["suite"] = self.loaded.name
        self.store.append(records)
        self.cache.update({r["key"]: r for r in records})
        return records, False

    def close(self) -> None:
        """Close the store."""
        self.store.close()


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
    if model_patterns:
        loaded.models = [m for m in loaded.models if matches(m.id, model_patterns, m.group)]
    runner = SuiteRunner(loaded, out_dir, device, force)
    summary = RunSummary(loaded.name, runner.device)
    with Progress(len(runner.jobs), loaded.name, enabled=progress) as bar:
        try:
            for job in runner.jobs:
                recs, cached = runner.run(job)
                if cached:
                    summary.n_cached += len(recs)
                else:
                    summary.n_run += len(recs)
                bar.advance([r["status"] for r in recs], cached=cached)
                summary.records.extend(recs)
                summary.n_failed += sum(r["status"] == "error" for r in recs)
                summary.n_skipped += sum(r["status"] == "skipped" for r in recs)
        except KeyboardInterrupt:
            summary.interrupted = True
        finally:
            runner.close()
    summary.wall_time = time.perf_counter() - start
    return summary
