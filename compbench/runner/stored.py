"""A read-only view of a results folder's store for one suite: which stored records are its cells, under its names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from compbench.records import CellRecord
from compbench.runner.cells import Job, PreparedTask, expand_jobs, prepare_tasks
from compbench.scoring import score as scoring
from compbench.store import ResultStore
from compbench.store.rows import relabelled
from compbench.suite import LoadedSuite


class StoreView:
    """A suite's jobs and the records the store holds for them, relabelled with the suite's names; it never writes.

    This is the one place that decides which stored records belong to a suite: its jobs' cache keys, looked up in
    the store and relabelled with this suite's names, never the names a record was stored under. A report, the
    outcome of a store and `compbench.session.stored` read through it; `SuiteRunner` adds what a run writes.
    """

    def __init__(self, loaded: LoadedSuite, out_dir: Path, device: str, *,
                 tasks: Mapping[str, PreparedTask] | None = None, jobs: Sequence[Job] | None = None,
                 fresh: bool = False) -> None:
        self.loaded = loaded
        self.device = device
        self.store = ResultStore(Path(out_dir) / "store")
        # `tasks`: the suite's tasks already built (compbench.session builds them once per run), else built here.
        self.tasks = dict(tasks) if tasks is not None else prepare_tasks(loaded)
        self.jobs = list(jobs) if jobs is not None else expand_jobs(loaded, self.tasks, device)  # `jobs`: expanded already
        self._cache: dict[str, CellRecord] | None = {} if fresh else None  # fresh: what is stored does not count

    @property
    def cache(self) -> dict[str, CellRecord]:
        """Newest stored record per cell key (loaded on first use)."""
        if self._cache is None:
            self._cache = self.store.latest()
        return self._cache

    def relabel(self, job: Job, records: list[CellRecord]) -> list[CellRecord]:
        """Records of a job under this suite's names (the key covers what determines a result, not names)."""
        return [relabelled(r, task=job.task.entry.id, model=job.model.id, group=job.model.group,
                           sweep=job.model.sweep_values, suite=self.loaded.name) for r in records]

    def stored(self, job: Job) -> list[CellRecord]:
        """The job's stored records for the seeds that have one, relabelled for this suite (rescored if need be)."""
        return self.relabel(job, [self.current(job, self.cache[k]) for k in job.keys if k in self.cache])

    def current(self, job: Job, record: CellRecord) -> CellRecord:
        """The record scored by this compbench's scoring code: rescored in memory from its stored outputs when other
        scoring code scored it (no training)."""
        if not record.ok or record.code != job.code or record.scoring == scoring.scoring_version():
            return record
        fresh = scoring.rescore(job.task, record)
        self.cache[record.key] = fresh
        return fresh

    def close(self) -> None:
        """Close the store."""
        self.store.close()
