"""Executors: where jobs run — in this process (default), a local process pool, or a Ray cluster.

Every executor yields (job index, records) as jobs finish; the runner stores records as they
arrive, so a crash or Ctrl-C loses only the jobs in flight. In the process pool and on Ray a job
that kills its worker (os._exit, a segfault, the OOM killer) or runs past `cell_timeout` seconds
is recorded as an error for each of its seeds, and the other jobs go on.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from collections import deque
from collections.abc import Iterator
from multiprocessing.connection import Connection, wait
from typing import Any

from compbench.runner.cells import Job, PreparedTask
from compbench.suite import ModelSpec
from compbench.runner.execute import failed_records, run_job


class ExecutorUnavailableError(RuntimeError):
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


def timeout_message(cell_timeout: float) -> str:
    """The error of a job stopped by --cell-timeout."""
    return f"exceeded --cell-timeout {cell_timeout:g} s (the job was killed)"


_WORKER_TASKS: dict[str, PreparedTask] = {}


def _worker_init(tasks: dict[str, PreparedTask]) -> None:
    # Tasks arrive once per worker (not once per job), so their encodings and additivity fits
    # are built once per process.
    _WORKER_TASKS.update(tasks)
    # One BLAS/torch thread per worker process: workers already use every core together.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass


def _run_in_worker(task_id: str, model: ModelSpec, seeds: tuple[int, ...], keys: tuple[str, ...], device: str) -> list[dict[str, Any]]:
    return run_job(Job(_WORKER_TASKS[task_id], model, seeds, keys), device)


def _tasks_of(jobs: list[Job]) -> dict[str, PreparedTask]:
    return {job.task.entry.id: job.task for job in jobs}


def _args(job: Job) -> tuple[Any, ...]:
    return job.task.entry.id, job.model, job.seeds, job.keys


def _run_in_ray(tasks: dict[str, PreparedTask], *args: Any) -> list[dict[str, Any]]:
    # Ray hands every task the same object-store copy of the prepared tasks.
    if not _WORKER_TASKS:
        _worker_init(tasks)
    return _run_in_worker(*args)


def run_local(jobs: list[Job], device: str) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """Run jobs one after another in this process."""
    for i, job in enumerate(jobs):
        yield i, run_job(job, device)


def _worker_main(conn: Connection, tasks: dict[str, PreparedTask], device: str) -> None:
    """A pool worker: run the jobs sent over `conn` one at a time, send back their records."""
    # The parent owns Ctrl-C and SIGTERM (a signal to the process group reaches workers too): it
    # stops the workers itself, so a worker never dies mid-send or is recorded as a crashed job.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _worker_init(tasks)
    conn.send(("ready", None))
    while True:
        try:
            msg = conn.recv()
        except (EOFError, OSError):  # the parent is gone
            return
        if msg is None:
            return
        records = _run_in_worker(*msg, device)
        try:
            conn.send(("done", records))
        except (BrokenPipeError, OSError):
            return
        except Exception as exc:  # noqa: BLE001 — e.g. an unpicklable record: still a record, not a hang
            conn.send(("unsendable", f"{type(exc).__name__}: {exc}"))


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


class _Worker:
    """One worker process, its pipe, and the job it is running (if any)."""

    def __init__(self, ctx: Any, tasks: dict[str, PreparedTask], device: str) -> None:
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_worker_main, args=(child, tasks, device), daemon=True)
        self.proc.start()
        child.close()
        self.ready = False
        self.job: int | None = None
        self.started = 0.0

    def give(self, i: int, job: Job) -> None:
        self.job, self.started = i, time.monotonic()
        self.conn.send(_args(job))

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
    jobs: list[Job], device: str, workers: int, cell_timeout: float | None = None
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """Run jobs on `workers` local processes, one job per worker at a time.

    Each worker runs one job at a time, so a worker that dies names its job exactly: that job is
    recorded as an error and a fresh worker replaces it. A job past `cell_timeout` seconds (timed
    from when its worker received it, so worker start-up does not count) has its worker killed.
    """
    ctx = multiprocessing.get_context()
    tasks = _tasks_of(jobs)
    queue = deque(range(len(jobs)))
    pool = [_Worker(ctx, tasks, device) for _ in range(min(max(1, workers), len(jobs)))]
    try:
        while queue or any(w.job is not None for w in pool):
            for w in pool:
                if w.ready and w.job is None and queue:
                    i = queue.popleft()
                    w.give(i, jobs[i])
            now = time.monotonic()
            deadlines = [w.started + cell_timeout - now for w in pool if w.job is not None and cell_timeout]
            ready = wait([w.conn for w in pool] + [w.proc.sentinel for w in pool],
                         timeout=max(0.0, min(deadlines)) if deadlines else None)
            for k, w in enumerate(pool):
                result: list[dict[str, Any]] | None = None
                if w.conn in ready:
                    try:
                        kind, payload = w.conn.recv()
                    except (EOFError, OSError):  # it closed its pipe: it is exiting
                        kind, payload = "dead", None
                        w.proc.join(timeout=5)
                    if kind == "ready":
                        w.ready = True
                        continue
                    if kind == "done":
                        result = payload
                    elif kind == "unsendable" and w.job is not None:
                        result = failed_records(jobs[w.job], device, f"the worker could not send the records back: {payload}")
                if result is None and w.job is not None and cell_timeout and time.monotonic() - w.started > cell_timeout:
                    w.stop(kill=True)
                    result = failed_records(jobs[w.job], device, timeout_message(cell_timeout),
                                            error_stage="timeout", wall_time=time.monotonic() - w.started)
                    pool[k] = _Worker(ctx, tasks, device)
                elif result is None and not w.proc.is_alive():
                    w.proc.join()
                    dead, code = w.job, w.proc.exitcode
                    w.stop()
                    if dead is None and not w.ready:
                        raise RuntimeError(f"a compbench worker process failed to start ({_death(code)})")
                    pool[k] = _Worker(ctx, tasks, device)
                    if dead is not None:
                        yield dead, failed_records(jobs[dead], device, _death(code), error_stage="worker")
                    continue
                if result is not None:
                    i, w.job = w.job, None
                    yield i, result
    finally:
        for w in pool:
            w.stop(kill=True)


def run_ray(
    jobs: list[Job], device: str, address: str | None = None, gpus_per_job: float = 0.0, cell_timeout: float | None = None
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
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
    remote = ray.remote(num_gpus=gpus_per_job if device == "cuda" else 0, max_retries=0)(_run_in_ray)
    limit = max(1, int(ray.cluster_resources().get("CPU", 1))) if cell_timeout else len(jobs)
    queue = deque(range(len(jobs)))
    refs: dict[Any, tuple[int, float]] = {}
    try:
        while queue or refs:
            while queue and len(refs) < limit:
                i = queue.popleft()
                refs[remote.remote(tasks_ref, *_args(jobs[i]), device)] = (i, time.monotonic())
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
