"""Run a suite: skip cached cells, execute the rest, store each job's records as it finishes."""

from __future__ import annotations

import multiprocessing
import time
from contextlib import AbstractContextManager, closing, nullcontext
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compbench.provenance import run_provenance
from compbench.records import CellRecord, Status
from compbench.runner.cells import Job, PreparedTask
from compbench.runner.device import resolve_device
from compbench.runner.executors import (AHEAD_SECONDS, MAX_AHEAD, check_cell_timeout, effective_workers, pool_size,
                                         run_process_pool, run_ray, usable_cores)
from compbench.runner.execute import run_job
from compbench.runner.interrupt import stop_children, terminated
from compbench.runner.progress import Progress
from compbench.runner.schedule import AUTO, choose, longest_first
from compbench.runner.stored import StoreView
from compbench.runner.threads import Applied, ThreadPlan, apply_in_this_process, plan_for_run, restore
from compbench.stage_progress import listening
from compbench.store import StoreError
from compbench.store.records import COMMIT_WINDOW
from compbench.suite import LoadedSuite


EXECUTORS = (AUTO, "local", "process", "ray")


@dataclass
class RunSummary:
    """What a run did: records of this suite (fresh and cached) and counts."""

    suite: str
    device: str
    records: list[CellRecord] = field(default_factory=list)
    n_run: int = 0
    n_cached: int = 0
    n_failed: int = 0
    n_skipped: int = 0
    wall_time: float = 0.0
    interrupted: bool = False
    executor: str = "local"  # where the computed cells ran: local or process (auto resolved), or ray
    workers: int = 1  # processes that computed cells at once (a pool's size; 1 in this process)
    executor_reason: str | None = None  # why `auto` chose as it did (None: the executor was asked for)
    jobs: list[Job] = field(default_factory=list)  # the cells this run was asked for (after --model)
    n_rescored: int = 0  # cached cells scored again by this compbench's scoring code (no training)
    partial: bool = False  # narrowed by model or task patterns: expectations on what did not run are left out
    failed_cell: str | None = None  # with fail_fast: the failed cell the run stopped at ("model on task seed s: message")
    per_job: list[list[CellRecord] | None] = field(default_factory=list)  # each job's records (None: not reached)
    threads: int | None = None  # torch threads per process that trains (None: torch's default, --threads 0)
    run_id: str | None = None  # the store's `runs` row of this run (ResultStore.begin_run)


class SuiteRunner(StoreView):
    """A suite's jobs with their cache, run: what is not stored trains, and is stored as each job ends."""

    def __init__(
        self, loaded: LoadedSuite, out_dir: Path, device: str = "auto", force: bool = False, *,
        resolve: bool = True, writer: bool = False, threads: ThreadPlan | None = None,
        tasks: Mapping[str, PreparedTask] | None = None, jobs: Sequence[Job] | None = None,
    ) -> None:
        # torch's threads in this process when a job trains here (runner.threads; default one thread),
        # set at the first such job, so that a cached run never imports torch; restored by close().
        self.threads = threads if threads is not None else plan_for_run()
        self._applied: list[Applied] = []  # what this runner's thread settings changed, undone by close()
        # --force: records stored before this run are ignored for this suite's jobs (and replaced
        # as each is recomputed); records stored since, by this run or a concurrent one, count.
        super().__init__(loaded, out_dir, resolve_device(device) if resolve else device, tasks=tasks, jobs=jobs, fresh=force)
        if writer:
            # The stored records first (--force ignores them): that read of every current row is the check the
            # store makes before its first write (ResultStore._verify), so a warm run reads them once.
            if self._cache is None:  # None unless --force
                self._cache = self.store.latest(k for job in self.jobs for k in job.keys)  # its own cells' records only
            self.store.open(write=True)  # a store that cannot be used fails now, before any training
        self.fresh_since: float | None = time.time() if force else None
        self.per_job: float | None = None  # seconds a job of this run takes, a running average
        self.rescored: dict[str, CellRecord] = {}  # records scored again by this compbench, not yet stored
        # Told of each job just before it trains here (the progress display names it); jobs run by
        # a process pool or Ray start out of this process's sight, so it is not called for them.
        self.on_start: Callable[[Job], None] | None = None
        # Told how far a long stage of a running job is (compbench.stage_progress: eNTK blocks done / total),
        # from this process and from a process pool's workers; Ray's jobs do not report.
        self.on_stage: Callable[[Job, str, int, int], None] | None = None

    def current(self, job: Job, record: CellRecord) -> CellRecord:
        """The record scored by this compbench's scoring code (StoreView.current); a rescored record replaces the
        stored one at the end of a run (`flush_rescored`)."""
        fresh = super().current(job, record)
        if fresh is not record:
            self.rescored[record.key] = fresh
        return fresh

    def flush_rescored(self) -> int:
        """Store the records rescored by this run (one transaction); how many."""
        records = list(self.rescored.values())
        if records:
            self.store.append(records)
            self.rescored.clear()
        return len(records)

    def cached(self, job: Job, recheck: bool = False) -> list[CellRecord] | None:
        """The job's stored records, relabelled for this suite, or None if any seed is missing.

        With `recheck`, the store is asked again: another process may have finished the job. Error
        records are never reused (a re-run retries them, so exit codes do not depend on the cache);
        `skipped` ones only while the model still has skip_invalid: true, else they are the errors a
        fresh run would give.
        """
        if not getattr(self, "_retry_noted", False):
            import sys

            self._retry_noted = True
            n = sum(self.cache[k].failed for j in self.jobs for k in j.keys if k in self.cache)
            if n:
                print(f"{self.loaded.name}: retrying {n} failed cell{'s' if n != 1 else ''} found in the cache",
                      file=sys.stderr, flush=True)

        if recheck and not self._job_reusable(job):
            self.cache.update(self.store.lookup(list(job.keys), since=self.fresh_since))
        if not self._job_reusable(job):
            return None
        records = self.stored(job)
        if not job.model.skip_invalid:
            records = [r.with_labels(status=Status.ERROR) if r.skipped else r for r in records]
        return records

    def store_records(self, records: list[CellRecord]) -> None:
        """Persist one finished job's records: staged, and committed with those that finish within COMMIT_WINDOW of
        them (`commit_staged`), or at the latest with the batch's claims released, the run's end, or Ctrl-C's cleanup."""
        for r in records:
            r.suite = self.loaded.name
        self.store.stage(records)
        self.store.commit_staged(COMMIT_WINDOW)
        self.cache.update({r.key: r for r in records})

    def run(self, job: Job, wait: bool = True) -> tuple[list[CellRecord] | None, bool]:
        """The job's records and whether they came from the cache; fresh ones are stored at once.

        A job another live process has claimed is waited for (or, with wait=False, returned as
        (None, False) to come back to later), so concurrent runs do not duplicate work.
        """
        while True:
            (_, records, cached), = self.run_many([job])
            if records is not None or not wait:
                return records, cached
            time.sleep(0.05)

    def run_many(self, jobs: list[Job]) -> Iterator[tuple[int, list[CellRecord] | None, bool]]:
        """(position, records, from the cache) for each job, in order; records None for a job another live process holds.

        The store is asked once for all of the jobs' keys and their claims are taken in one
        transaction (and released in one when the last has run), so a batch of millisecond jobs
        costs two claim transactions, not two per job. Each job's records are staged as it ends and
        committed with the claims' release (or sooner, `store_records`): one transaction a batch.
        """
        missing = [k for job in jobs for k in job.keys if not self._reusable(k, job.code)]
        if missing:
            self.cache.update(self.store.lookup(missing, since=self.fresh_since))
        todo = []
        for n, job in enumerate(jobs):
            hit = self.cached(job)
            if hit is not None:
                yield n, hit, True
            else:
                todo.append(n)
        if not todo:
            return
        ids = {n: _claim_id(jobs[n]) for n in todo}
        claimed = self.store.claim_many(list(ids.values()))
        try:
            for n in todo:
                if ids[n] not in claimed:
                    yield n, None, False
                    continue
                hit = self.cached(jobs[n])  # a job of the same keys earlier in this batch
                if hit is not None:
                    yield n, hit, True
                    continue
                self.torch_for_training()
                if self.on_start is not None:
                    self.on_start(jobs[n])
                start = time.perf_counter()
                with self._stages(jobs[n]):
                    records = run_job(jobs[n], self.device)
                took = time.perf_counter() - start
                self.per_job = took if self.per_job is None else 0.8 * self.per_job + 0.2 * took
                self.store_records(records)
                yield n, records, False
        finally:
            self.store.release_many(sorted(claimed))

    def _stages(self, job: Job) -> AbstractContextManager[None]:
        """Within it, the job's stage reports go to `on_stage` (nothing listens without one)."""
        if self.on_stage is None:
            return nullcontext()
        on_stage = self.on_stage
        return listening(lambda stage, done, total: on_stage(job, stage, done, total))

    def torch_for_training(self) -> None:
        """Import torch and set its threads by the run's plan, before a job trains in this process.

        The device is decided without torch where it can be (runner.device), so a cached run never
        imports it; a job that trains does, first, so that every record of a run states the same
        torch version and thread count (`threads`, `determinism`), whichever adapter ran first.
        """
        # Every apply is kept and undone in reverse: each one marks the run in force for compbench's library
        # calls (thread_scope), and an apply not undone left them inert in this process after the run.
        self._applied.append(apply_in_this_process(self.threads))

    def _reusable(self, key: str, code: str) -> bool:
        """A stored record is reused when it did not fail and the same code computed it (else it is stale)."""
        r = self.cache.get(key)
        return r is not None and not r.failed and r.code == code

    def _job_reusable(self, job: Job) -> bool:
        return all(self._reusable(k, job.code) for k in job.keys)

    def close(self) -> None:
        """Release this process's claims and close the store."""
        try:
            self.store.release_all()
        except StoreError:
            pass  # the store is gone or unwritable: the error that stopped the run says so
        finally:
            self.store.close()
            while self._applied:  # a caller lending its process (run_suite, pytest) gets its settings back
                restore(self._applied.pop())


def _claim_id(job: Job) -> str:
    """The name a job is claimed by in the store: its cells' keys (the same job in any run claims the same name)."""
    return "|".join(job.keys)


def _after_others(runner: SuiteRunner, jobs: list[Job], positions: list[int]) -> Iterator[tuple[int, list[CellRecord], bool]]:
    """The jobs at `positions`, which another live process had claimed: waited for, then read from the store (or run
    here, if that process went away without them)."""
    for i in positions:
        recs, cached = runner.run(jobs[i])
        assert recs is not None
        yield i, recs, cached


def _execute(
    runner: SuiteRunner, jobs: list[Job], executor: str, workers: int, address: str | None, gpus_per_job: float,
    cell_timeout: float | None = None,
) -> Iterator[tuple[int, list[CellRecord], bool]]:
    if executor == "local":
        deferred = []
        i = 0
        while i < len(jobs):
            # Quick jobs go in batches of about AHEAD_SECONDS of work (their claims and cache
            # look-ups taken together); long ones one at a time, as other processes may share them.
            per_job = runner.per_job
            n = 1 if per_job is None or per_job >= AHEAD_SECONDS else min(MAX_AHEAD, int(AHEAD_SECONDS / max(per_job, 1e-6)))
            for k, recs, cached in runner.run_many(jobs[i:i + n]):
                if recs is None:
                    deferred.append(i + k)  # another process is on it: come back at the end
                else:
                    yield i + k, recs, cached
            i += n
        yield from _after_others(runner, jobs, deferred)
        return
    if executor == "process":
        yield from _execute_pool(runner, jobs, workers, cell_timeout)
        return
    for i, recs in run_ray(jobs, runner.device, address, gpus_per_job, cell_timeout, runner.threads):
        runner.store_records(recs)
        runner.store.commit_staged()  # Ray hands back one job at a time, with no moment to commit between them
        yield i, recs, False


def _execute_pool(runner: SuiteRunner, jobs: list[Job], workers: int, cell_timeout: float | None) -> Iterator[tuple[int, list[CellRecord], bool]]:
    """Jobs on a local process pool, longest expected first; a job another live process has claimed
    waits for it at the end (and is then read from the store), as in this process."""
    ids = [_claim_id(job) for job in jobs]
    claimed = runner.store.claim_many(ids) if jobs else set()
    try:
        mine = [i for i in longest_first(jobs) if ids[i] in claimed]
        if mine:
            runner.torch_for_training()  # once here, inherited by the forked workers (not imported by each)
            pool = run_process_pool([jobs[i] for i in mine], runner.device, workers, cell_timeout, runner.threads,
                                    on_stage=runner.on_stage, idle=lambda: runner.store.commit_staged(COMMIT_WINDOW))
            with closing(pool):
                for k, recs in pool:
                    runner.store_records(recs)
                    yield mine[k], recs, False
    finally:
        runner.store.release_many(sorted(claimed))
    yield from _after_others(runner, jobs, [i for i in range(len(jobs)) if ids[i] not in claimed])


def _run_end(summary: RunSummary, jobs: list[Job], results: list[list[CellRecord] | None]) -> dict[str, Any]:
    """What a run's `runs` row records at its end: the cells it reported, by key and by the names it gave them."""
    cells = [[r.key, job.model.id, job.task.entry.id, r.seed, job.model.group]
             for job, recs in zip(jobs, results) for r in recs or ()]
    return {"cells": cells, "n_run": summary.n_run, "n_cached": summary.n_cached,
            "interrupted": summary.interrupted or summary.failed_cell is not None, "partial": summary.partial}


def select(loaded: LoadedSuite, model_patterns: list[str] | None = None, task_patterns: list[str] | None = None) -> LoadedSuite:
    """The suite narrowed to the models and tasks whose ids match the patterns (globs; None or [] keeps all).

    The one place a run is narrowed (`--model`, `--task`): the jobs, the outcome and the report all
    follow from the narrowed suite. `loaded` is left whole (a caller's suite, e.g. one given to
    `compbench.evaluate`, runs in full next time).
    """
    return loaded.select(model_patterns, task_patterns)


def run_suite(
    loaded: LoadedSuite,
    out_dir: Path,
    *,
    device: str = "auto",
    force: bool = False,
    model_patterns: list[str] | None = None,
    task_patterns: list[str] | None = None,
    progress: bool = True,
    verbose: bool = False,
    fail_fast: bool = False,
    executor: str = AUTO,
    workers: int | None = None,
    address: str | None = None,
    gpus_per_job: float = 0.25,
    cell_timeout: float | None = None,
    threads: int | None = None,
    command: str | None = None,
    profile: str | None = None,
    tasks: Mapping[str, PreparedTask] | None = None,
    jobs: Sequence[Job] | None = None,
) -> RunSummary:
    """Run every cell of the suite not already in the store at out_dir; Ctrl-C keeps what finished.

    `model_patterns`, `task_patterns`: run only that part of the suite (`select`; `loaded` is left whole).

    `executor`: `auto` (default; `runner.schedule`: a pool of one-thread workers on every usable core when
    there is enough to compute, else this process), `local`, `process` (`workers`, default one per usable
    core) or `ray`.
    `fail_fast` (local executor; `auto` then stays local): stop after the first job with a failed cell, keeping what finished.
    `threads`: torch's intra-op threads in each process that trains (None: compbench's policy, one per
    process, `compbench.runner.threads`; 0: torch's own default); this process's count is restored
    when the run ends.
    `command`, `profile`: what the store's `runs` row records as the command (default: this call) and profile.
    `tasks`: the suite's tasks already built (by id), so that they are not built again; `jobs`: the selected part's
    jobs already expanded on this device (compbench.session.Plan.jobs).
    """
    start = time.perf_counter()
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTORS)}, got {executor!r}")
    if fail_fast and executor not in ("local", AUTO):
        # A pool has other jobs in flight when one fails; stopping them is not supported (yet).
        raise ValueError(f"fail_fast needs the local executor, got {executor!r}")
    if workers is not None and workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    check_cell_timeout(executor, cell_timeout)  # before anything runs: the local executor cannot honour it
    loaded = select(loaded, model_patterns, task_patterns)
    # The pool size before the run meets its jobs: what the thread policy's oversubscription warning counts.
    most = (workers or usable_cores()) if executor in ("process", AUTO) else 1
    plan = plan_for_run("process" if executor == AUTO else executor, effective_workers("process", most) if most > 1 else 1, threads)
    runner = SuiteRunner(loaded, out_dir, device, force, writer=True, threads=plan, tasks=tasks, jobs=jobs)
    children_before = frozenset(multiprocessing.active_children())
    summary = RunSummary(loaded.name, runner.device, executor=executor, jobs=list(runner.jobs),
                         partial=bool(model_patterns or task_patterns), threads=plan.intra)
    summary.run_id = runner.store.begin_run(loaded.name, profile, run_provenance(
        loaded, command or f"compbench.run_suite({loaded.name!r})", plan.intra, runner.device))
    results: list[list[CellRecord] | None] = [None] * len(runner.jobs)
    todo: list[int] = []
    with Progress(runner.jobs, loaded.name, enabled=progress, verbose=verbose) as bar:
        runner.on_start = bar.start
        runner.on_stage = bar.stage
        try:
            for i, job in enumerate(runner.jobs):
                hit = runner.cached(job) if executor != "local" else None  # auto: decided on what is left
                if hit is not None:
                    results[i] = hit
                    summary.n_cached += len(hit)
                    bar.advance(job, [r.status.value for r in hit], cached=True)
                else:
                    todo.append(i)
            use, size = executor, workers or 2
            if executor == AUTO:
                choice = choose([runner.jobs[i] for i in todo], runner.device, fail_fast, workers, cell_timeout=cell_timeout)
                use, size, summary.executor_reason = choice.executor, choice.workers, choice.reason
            elif executor == "process":
                size = pool_size(workers or usable_cores(), len(todo)) if todo else 0
            summary.executor, summary.workers = use, size if use == "process" else 1
            source = _execute(runner, [runner.jobs[i] for i in todo], use, size, address, gpus_per_job, cell_timeout)
            with closing(source):  # a fail-fast stop closes it now: its claims are released before the report
                for j, recs, cached in source:
                    results[todo[j]] = recs
                    if cached:
                        summary.n_cached += len(recs)
                    else:
                        summary.n_run += len(recs)
                    bar.advance(runner.jobs[todo[j]], [r.status.value for r in recs], cached=cached)
                    failed = next((r for r in recs if r.failed), None)
                    if fail_fast and failed is not None:
                        summary.failed_cell = f"{failed.model} on {failed.task} seed {failed.seed}: {failed.message}"
                        break  # closing the executor's generator releases its claims; finished jobs are stored
        except KeyboardInterrupt:  # Ctrl-C, or SIGTERM under `compbench` (see runner.interrupt)
            summary.interrupted = True
        except Exception as exc:
            # SIGTERM to the process group stops pool workers too; a broken pool is then part of it.
            if isinstance(exc, StoreError) or not terminated():
                raise
            summary.interrupted = True
        finally:
            if summary.interrupted:
                stop_children(keep=children_before)  # the pool's workers, not the caller's processes
            try:
                summary.n_rescored = runner.flush_rescored()
                runner.store.end_run(summary.run_id, _run_end(summary, runner.jobs, results))
            finally:
                runner.close()
    if not summary.interrupted:
        runner.store.verify()  # records committed into a store deleted since would be lost: say so
    summary.per_job = results
    summary.records = [r for recs in results if recs is not None for r in recs]
    summary.n_failed = sum(r.failed for r in summary.records)
    summary.n_skipped = sum(r.skipped for r in summary.records)
    summary.wall_time = time.perf_counter() - start
    return summary
