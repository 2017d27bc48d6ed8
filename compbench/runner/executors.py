"""Executors: where jobs run — in this process (default), a local process pool, or a Ray cluster.

Every executor yields (job index, records) as jobs finish; the runner stores records as they
arrive (those that arrive together in one transaction: store.records.COMMIT_WINDOW), so Ctrl-C or
an exception loses only the jobs in flight. In the process pool and on Ray a job
that kills its worker (os._exit, a segfault, the OOM killer) or runs past `cell_timeout` seconds
is recorded as an error for each of its seeds, and the other jobs go on.
"""

from __future__ import annotations

import multiprocessing
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

from compbench.errors import CompbenchError
from compbench.runner.cells import Job, PreparedTask
from compbench.suite import ModelSpec
from compbench.records import CellRecord
from compbench.runner.execute import failed_records, run_job
from compbench.runner.interrupt import kill_and_reap
from compbench.runner.memory import keep_freed_memory
from compbench.runner.orphan import die_with_parent, inherited_ends, parent_of_children
from compbench.runner.threads import ThreadPlan, apply_in_worker
from compbench.runner.threads import usable_cores as _usable_cores
from compbench.stage_progress import listening


class ExecutorUnavailableError(CompbenchError, RuntimeError):
    """The requested executor cannot be used here (e.g. Ray is not installed)."""


def check_cell_timeout(executor: str, cell_timeout: float | None) -> None:
    """Refuse a --cell-timeout that cannot be honoured (in-process jobs cannot be killed)."""
    if cell_timeout is None:
        return
    if not cell_timeout > 0:
        raise ExecutorUnavailableError(f"--cell-timeout must be a positive number of seconds, got {cell_timeout}")
    if executor == "local":
        raise ExecutorUnavailableError(
            "--cell-timeout needs --executor process (or ray): a job running in this process cannot be stopped"
        )


# Workers beyond the cores only wait for them (each trains on one thread); a few over keeps the cores
# busy while a worker reads its next job or writes its records.
WORKERS_PER_CORE = 2


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity and cgroup CPU quota, not the machine's count)."""
    return _usable_cores()


def effective_workers(executor: str, workers: int) -> int:
    """The processes of an executor that train at once on this machine, as far as the thread policy counts
    them: the pool's size before it meets the jobs (`pool_size`), else one (this process, or a Ray worker)."""
    if executor != "process" or workers < 1:
        return 1
    return min(workers, WORKERS_PER_CORE * usable_cores())


def pool_size(workers: int, n_jobs: int) -> int:
    """Worker processes for `--workers N`: at most WORKERS_PER_CORE per usable core (said on stderr when
    that lowers N) and never more than the jobs to run."""
    if workers < 1:
        raise ExecutorUnavailableError(f"--workers must be at least 1, got {workers}")
    cores = usable_cores()
    cap = WORKERS_PER_CORE * cores
    if workers > cap:
        print(f"compbench: --workers {workers}: using {cap} worker processes ({WORKERS_PER_CORE} per usable core, "
              f"{cores} core{'s' if cores != 1 else ''}); more would only wait for a core", file=sys.stderr)
        workers = cap
    return max(1, min(workers, n_jobs))


def timeout_message(cell_timeout: float) -> str:
    """The error of a job stopped by --cell-timeout."""
    return f"exceeded --cell-timeout {cell_timeout:g} s (the job was killed)"


_WORKER_TASKS: dict[str, PreparedTask] = {}


def _worker_init(tasks: dict[str, PreparedTask], threads: ThreadPlan | None = None) -> None:
    # Tasks arrive once per worker (not once per job), so their encodings and additivity fits
    # are built once per process.
    _WORKER_TASKS.update(tasks)
    keep_freed_memory()  # inherited from a forked parent; a Ray worker starts without it
    # The run's thread plan (runner.threads; by default one torch/BLAS thread per worker process:
    # workers already use every core together).
    apply_in_worker(threads if threads is not None else ThreadPlan(1, 1, "policy"))


def _run_in_worker(task_id: str, model: ModelSpec, seeds: tuple[int, ...], keys: tuple[str, ...], code: str,
                   device: str) -> list[CellRecord]:
    return run_job(Job(_WORKER_TASKS[task_id], model, seeds, keys, code), device)


def _send_stage(conn: Connection, i: int, stage: str, done: int, total: int) -> None:
    try:
        conn.send(("stage", i, (stage, done, total)))
    except (BrokenPipeError, OSError):  # the parent is gone: the job's result will not be read either
        pass


def _tasks_of(jobs: list[Job]) -> dict[str, PreparedTask]:
    return {job.task.entry.id: job.task for job in jobs}


def _args(job: Job) -> tuple[Any, ...]:
    return job.task.entry.id, job.model, job.seeds, job.keys, job.code


def _run_in_ray(tasks: dict[str, PreparedTask], threads: ThreadPlan, *args: Any) -> list[CellRecord]:
    # Ray hands every task the same object-store copy of the prepared tasks.
    if not _WORKER_TASKS:
        _worker_init(tasks, threads)
    else:
        apply_in_worker(threads)  # a Ray worker process may serve several runs, each with its own plan
    return _run_in_worker(*args)


def _worker_main(conn: Connection, tasks: dict[str, PreparedTask], device: str, threads: ThreadPlan | None = None,
                 parent: int | None = None, inherited: tuple[Connection, ...] = ()) -> None:
    """A pool worker: run the jobs sent over `conn` in order, sending back each job's records as it ends.

    The parent sends jobs in batches ((index, args) lists) ahead of need, so a worker never waits
    for the parent between two jobs; each result goes back at once, so the parent knows which job
    is running (the first it has not received) and a crash loses only that one. It dies with `parent`
    (runner.orphan), closing `inherited` (the parent's end of its pipe, under fork) first.
    """
    die_with_parent(parent, inherited)
    # The parent owns Ctrl-C and SIGTERM (a signal to the process group reaches workers too): it
    # stops the workers itself, so a worker never dies mid-send or is recorded as a crashed job.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _worker_init(tasks, threads)
    conn.send(("ready", None, None))
    pending: deque[tuple[int, tuple[Any, ...]]] = deque()
    while True:
        try:
            while not pending or conn.poll(0):  # block only with nothing to run
                msg = conn.recv()
                if msg is None:
                    return
                pending.extend(msg)
        except (EOFError, OSError):  # the parent is gone
            return
        i, args = pending.popleft()
        # A long stage's progress goes to the parent as it happens (a few small messages a second at most).
        with listening(lambda stage, done, total, i=i: _send_stage(conn, i, stage, done, total)):
            records = _run_in_worker(*args, device)
        try:
            conn.send(("done", i, records))
        except (BrokenPipeError, OSError):
            return
        except Exception as exc:  # noqa: BLE001 — e.g. an unpicklable record: still a record, not a hang
            conn.send(("unsendable", i, f"{type(exc).__name__}: {exc}"))


def _death(exitcode: int | None) -> str:
    if exitcode is None:
        return "worker process died"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        return f"worker process died: killed by {name}" + (" (out of memory?)" if name == "SIGKILL" else "")
    return f"worker process died: exit code {exitcode}"


# How much work a worker is given ahead: enough queued jobs to cover about this many seconds, so
# that tiny jobs (a kernel cell: about a millisecond) are not each a round trip through the parent,
# and long ones (a network: seconds) are handed out one at a time, keeping the workers balanced.
AHEAD_SECONDS = 0.05
MAX_AHEAD = 32  # also bounds the bytes of queued job arguments in a pipe (about 1 KB each)


class _Worker:
    """One worker process, its pipe, and the jobs it has been sent (the first is running)."""

    def __init__(self, ctx: Any, tasks: dict[str, PreparedTask], device: str, threads: ThreadPlan | None = None) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, daemon=True, args=(
            child, tasks, device, threads, parent_of_children(ctx), inherited_ends(ctx, self.conn)))
        self.proc.start()
        child.close()
        self.ready = False
        self.jobs: deque[int] = deque()
        self.started = 0.0  # when the first of self.jobs started (as far as the parent can tell)

    def give(self, batch: list[tuple[int, Job]]) -> None:
        if not self.jobs:
            self.started = time.monotonic()
        self.jobs.extend(i for i, _ in batch)
        self.conn.send([(i, _args(job)) for i, job in batch])

    def stop(self, kill: bool = False) -> None:
        if self.proc.is_alive():
            if kill:
                self.proc.kill()
            else:
                try:
                    self.conn.send(None)
                except OSError:
                    pass
                self.proc.join(timeout=1)
                if self.proc.is_alive():
                    self.proc.kill()
        self.proc.join(timeout=5)
        self.conn.close()


def run_process_pool(
    jobs: list[Job], device: str, workers: int, cell_timeout: float | None = None, threads: ThreadPlan | None = None,
    on_stage: Callable[[Job, str, int, int], None] | None = None, idle: Callable[[], float | None] | None = None,
) -> Iterator[tuple[int, list[CellRecord]]]:
    """Run jobs on `workers` local processes, each sent a few jobs ahead and reporting each job as it ends.

    A worker runs its jobs in order and sends each one's records back at once, so the job it is
    running is always known: if the worker dies, that job is recorded as an error, the jobs queued
    behind it go to a fresh worker, and nothing else is lost. A job past `cell_timeout` seconds
    (timed from when the worker started it, as the parent sees it: when it was handed to an idle
    worker or when the job before it reported) has its worker killed the same way. `on_stage` hears
    the workers' stage reports (compbench.stage_progress) as they arrive. `idle` is called each time the parent is
    about to wait for its workers, after every result received so far was handed on: it returns the longest the
    parent may wait before calling it again (None: no limit), so that the runner commits the results it holds
    together and none later than it promised.
    """
    ctx = worker_context(device)
    tasks = _tasks_of(jobs)
    _prepare(tasks, ctx)
    queue = deque(range(len(jobs)))
    pool = [_Worker(ctx, tasks, device, threads) for _ in range(pool_size(workers, len(jobs)))]
    per_job = None  # seconds per job, a running average over recent jobs (None: none finished yet)

    def replace(k: int, first: list[CellRecord] | None) -> Iterator[tuple[int, list[CellRecord]]]:
        # The worker at pool[k] is gone: its running job gets `first` (an error), the rest are requeued.
        w = pool[k]
        running, rest = (w.jobs[0], list(w.jobs)[1:]) if w.jobs else (None, [])
        w.jobs.clear()
        queue.extendleft(reversed(rest))
        pool[k] = _Worker(ctx, tasks, device, threads)
        if running is not None and first is not None:
            yield running, first

    try:
        while queue or any(w.jobs for w in pool):
            ahead = 0 if per_job is None or per_job >= AHEAD_SECONDS else min(MAX_AHEAD, int(AHEAD_SECONDS / max(per_job, 1e-6)))
            for w in pool:
                if w.ready and queue and len(w.jobs) <= ahead // 2:
                    n = min(len(queue), ahead + 1 - len(w.jobs))  # the running job plus `ahead` queued behind it
                    w.give([(i, jobs[i]) for i in (queue.popleft() for _ in range(n))])
            now = time.monotonic()
            deadlines = [w.started + cell_timeout - now for w in pool if w.jobs and cell_timeout]
            if idle is not None and (due := idle()) is not None:
                deadlines.append(due)
            wait([w.conn for w in pool] + [w.proc.sentinel for w in pool],
                 timeout=max(0.0, min(deadlines)) if deadlines else None)
            for k, w in enumerate(pool):
                gone = False
                while True:  # every message this worker has sent so far
                    try:
                        if not w.conn.poll(0):
                            break
                        kind, i, payload = w.conn.recv()
                    except (EOFError, OSError):  # it closed its pipe: it is exiting
                        gone = True
                        w.proc.join(timeout=5)
                        break
                    if kind == "ready":
                        w.ready = True
                        continue
                    if kind == "stage":  # how far the worker's running job is (compbench.stage_progress)
                        if on_stage is not None:
                            on_stage(jobs[i], *payload)
                        continue
                    if not w.jobs or w.jobs[0] != i:
                        raise RuntimeError(f"compbench worker reported job {i} while running {list(w.jobs)[:1]}")
                    w.jobs.popleft()
                    now = time.monotonic()
                    per_job = now - w.started if per_job is None else 0.8 * per_job + 0.2 * (now - w.started)
                    w.started = now  # the next job starts as this one reports
                    if kind == "done":
                        yield i, payload
                    else:  # "unsendable"
                        yield i, failed_records(jobs[i], device, f"the worker could not send the records back: {payload}")
                if w.jobs and cell_timeout and time.monotonic() - w.started > cell_timeout:
                    started = w.started
                    w.stop(kill=True)
                    yield from replace(k, failed_records(jobs[w.jobs[0]], device, timeout_message(cell_timeout),
                                                         error_stage="timeout", wall_time=time.monotonic() - started))
                elif gone or not w.proc.is_alive():
                    w.proc.join()
                    code, was_ready = w.proc.exitcode, w.ready
                    w.stop()
                    if not w.jobs and not was_ready:
                        raise RuntimeError(f"a compbench worker process failed to start ({_death(code)})")
                    first = failed_records(jobs[w.jobs[0]], device, _death(code), error_stage="worker") if w.jobs else None
                    yield from replace(k, first)
    finally:
        # Killed together, then reaped: a Ctrl-C here only hurries it (runner.interrupt.presses_hurry).
        kill_and_reap(w.proc for w in pool)
        for w in pool:
            w.conn.close()


def worker_context(device: str) -> Any:
    """The multiprocessing context for workers on `device`: spawn for CUDA, else the platform's default.

    A forked child cannot use CUDA once the parent has initialised it (and the parent's report, provenance
    or memory check may), so a CUDA pool starts its workers fresh and sends them the tasks pickled.
    """
    return multiprocessing.get_context("spawn" if str(device).startswith("cuda") else None)


def _prepare(tasks: dict[str, PreparedTask], ctx: Any) -> None:
    """Build each task's encoding and additivity fit here, once, before the workers fork from this process.

    Otherwise every worker builds every task it meets (the same work, once per worker). A task
    whose encoding or fit fails is left alone: the job that needs it fails in its worker and is
    recorded as that cell's error, as in this process.
    """
    if ctx.get_start_method() != "fork":
        return  # spawned workers get the tasks pickled: nothing is gained by building them here
    for task in tasks.values():
        try:
            if not task.per_seed:  # a per-seed draw is built by the job that needs it
                task.encoded  # noqa: B018 — a cached property: built here, inherited by the workers
            task.additivity  # noqa: B018
        except Exception:  # noqa: BLE001 — recorded by the job that needs it (see above)
            pass


def run_ray(
    jobs: list[Job], device: str, address: str | None = None, gpus_per_job: float = 0.0, cell_timeout: float | None = None,
    threads: ThreadPlan | None = None,
) -> Iterator[tuple[int, list[CellRecord]]]:
    """Run jobs as Ray tasks (a local Ray instance, or the cluster at `address`).

    With `cell_timeout`, at most one job per cluster CPU is in flight, so a job's clock (started
    when it is submitted) measures its run, and a job past it is cancelled with its worker killed.
    """
    try:
        import ray
    except ImportError as exc:
        raise ExecutorUnavailableError("--executor ray needs Ray: pip install 'compbench[ray]'") from exc
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    # Small cells declare a fraction of a GPU so Ray packs several onto one device. No retries: a
    # job that kills its worker is recorded as an error, not run again three times.
    tasks_ref = ray.put(_tasks_of(jobs))
    plan = threads if threads is not None else ThreadPlan(1, 1, "policy")
    remote = ray.remote(num_gpus=gpus_per_job if device == "cuda" else 0, max_retries=0)(_run_in_ray)
    limit = max(1, int(ray.cluster_resources().get("CPU", 1))) if cell_timeout else len(jobs)
    queue = deque(range(len(jobs)))
    refs: dict[Any, tuple[int, float]] = {}
    try:
        while queue or refs:
            while queue and len(refs) < limit:
                i = queue.popleft()
                refs[remote.remote(tasks_ref, plan, *_args(jobs[i]), device)] = (i, time.monotonic())
            timeout = None
            if cell_timeout:
                timeout = max(0.0, min(t for _, t in refs.values()) + cell_timeout - time.monotonic())
            done, _ = ray.wait(list(refs), num_returns=1, timeout=timeout)
            for ref in done:
                i, t = refs.pop(ref)
                try:
                    yield i, ray.get(ref)
                except Exception as exc:  # noqa: BLE001 — the worker died (WorkerCrashedError, OOM, ...)
                    yield i, failed_records(jobs[i], device, f"worker process died: {type(exc).__name__}: {exc}".strip(), error_stage="worker")
            if cell_timeout:
                now = time.monotonic()
                for ref, (i, t) in list(refs.items()):
                    if now - t > cell_timeout:
                        ray.cancel(ref, force=True)
                        del refs[ref]
                        yield i, failed_records(jobs[i], device, timeout_message(cell_timeout), error_stage="timeout", wall_time=now - t)
    finally:
        for ref in refs:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()
