"""Executors: where jobs run — in this process (default), a local process pool, or a Ray cluster.

Every executor yields (job index, records) as jobs finish; the runner stores records as they
arrive, so a crash or Ctrl-C loses only the jobs in flight.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any

from compbench.runner.cells import Job, PreparedTask
from compbench.suite import ModelSpec
from compbench.runner.execute import run_job


class ExecutorUnavailableError(RuntimeError):
    """The requested executor cannot be used here (e.g. Ray is not installed)."""


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


def run_process_pool(jobs: list[Job], device: str, workers: int) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """Run jobs on a pool of local worker processes, at most 2·workers in flight."""
    with ProcessPoolExecutor(max_workers=workers, initializer=_worker_init, initargs=(_tasks_of(jobs),)) as pool:
        pending: dict[Future[list[dict[str, Any]]], int] = {}
        queue = iter(enumerate(jobs))
        try:
            while True:
                while len(pending) < 2 * workers:
                    nxt = next(queue, None)
                    if nxt is None:
                        break
                    pending[pool.submit(_run_in_worker, *_args(nxt[1]), device)] = nxt[0]
                if not pending:
                    return
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    yield pending.pop(fut), fut.result()
        except BaseException:
            for fut in pending:
                fut.cancel()
            pool.shutdown(wait=False, cancel_futures=True)
            raise


def run_ray(
    jobs: list[Job], device: str, address: str | None = None, gpus_per_job: float = 0.0
) -> Iterator[tuple[int, list[dict[str, Any]]]]:
    """Run jobs as Ray tasks (a local Ray instance, or the cluster at `address`)."""
    try:
        import ray
    except ImportError as exc:
        raise ExecutorUnavailableError("--executor ray needs Ray: pip install 'compbench[ray]'") from exc
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    # Small cells declare a fraction of a GPU so Ray packs several onto one device.
    tasks_ref = ray.put(_tasks_of(jobs))
    remote = ray.remote(num_gpus=gpus_per_job if device == "cuda" else 0)(_run_in_ray)
    refs = {remote.remote(tasks_ref, *_args(job), device): i for i, job in enumerate(jobs)}
    try:
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                yield refs.pop(ref), ray.get(ref)
    finally:
        for ref in refs:
            ray.cancel(ref)
        if started_here:
            ray.shutdown()
