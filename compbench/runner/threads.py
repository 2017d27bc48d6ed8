"""How many threads torch uses in each process that trains cells: one, unless the user asks otherwise.

compbench's tensors are small (a kernel cell's Gram of a few hundred samples, a network of width 16
to 512 on a few thousand samples). torch's default (one intra-op thread per core) splits every small
operation across the cores and waits for every thread at its end. On an idle machine that gains a
little; on a machine with other busy processes it loses badly, because each parallel region waits for
a thread the scheduler has descheduled: `compbench run --suite kernel-limits` beside four busy
processes on 2 cores took 12.7x its idle wall time and burnt 6x the CPU it needs (issue #25). So the
policy is one intra-op thread per process (a pool of W workers: one each), set explicitly in every
process that trains: the command line, the pytest plugin, `run_suite`, process-pool workers and Ray
workers. The user overrides it with `--threads N` (`--compbench-threads N`, `run_suite(threads=N)`);
`--threads 0` leaves torch's own default, compbench's behaviour before this policy.

The thread count changes results only by float rounding (the order of a sum), so it is recorded in
every record (`CellRecord.threads`) but is not part of the cache key.
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compbench import thread_scope

__all__ = [
    "MAX_THREADS", "TORCH_DEFAULT", "Applied", "ThreadPlan", "apply_in_this_process", "apply_in_worker", "cgroup_cpu_limit",
    "choose_threads", "current_threads", "plan_for_run", "restore", "usable_cores",
]

TORCH_DEFAULT = 0  # `--threads 0`: compbench does not set torch's thread count (torch's own default)
MAX_THREADS = 1024  # a larger request is a usage error, not a number handed to torch (its C int overflows)
_ENV_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


@dataclass(frozen=True)
class ThreadPlan:
    """torch's thread counts for each process that trains (None: left as torch sets them)."""

    intra: int | None  # torch.set_num_threads
    interop: int | None  # torch.set_num_interop_threads (settable once, before torch's first inter-op work)
    source: str  # "policy" (compbench's default), "user" (--threads N), "torch default" (--threads 0)
    warning: str | None = None  # said once on stderr: the request oversubscribes the cores

    def describe(self) -> str:
        """One line for humans: what each process that trains runs with."""
        if self.intra is None:
            return "torch's default thread count (--threads 0)"
        return f"{self.intra} torch thread{'s' if self.intra != 1 else ''} per process ({self.source})"


def cgroup_cpu_limit(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    """The CPU quota of this process's cgroup in cores (a container's `--cpus`), or None when there is none.

    Reads the cgroup v2 `cpu.max` or the v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us` where a container
    mounts them (its own cgroup at the root of /sys/fs/cgroup); any other layout counts as no quota.
    """
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    for sub in ("cpu", "cpu,cpuacct"):
        try:
            quota_us = int((root / sub / "cpu.cfs_quota_us").read_text())
            period_us = int((root / sub / "cpu.cfs_period_us").read_text())
        except (OSError, ValueError):
            continue
        return None if quota_us <= 0 or period_us <= 0 else quota_us / period_us
    return None


def usable_cores() -> int:
    """Cores this process may use: its CPU affinity, lowered to its cgroup's CPU quota (rounded up)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    limit = cgroup_cpu_limit()
    if limit is not None:
        cores = min(cores, max(1, math.ceil(limit)))
    return max(1, cores)


def choose_threads(cores: int, executor: str = "local", workers: int = 1, requested: int | None = None) -> ThreadPlan:
    """torch's threads for each process that trains cells, and a warning when the request oversubscribes.

    `cores`: the cores this process may use (`usable_cores`); `workers`: the process-pool size (the
    workers actually started); `requested`: `--threads` (None: not given; 0: torch's own default).
    By default every process runs one intra-op thread and one inter-op thread: a pool of W workers
    gets one each, and so does the in-process executor. A request is honoured as given, never
    lowered; when it asks for more threads than there are cores (in all of a pool's workers
    together), the plan carries a warning to say so.
    """
    if executor not in ("local", "process", "ray"):
        raise ValueError(f"executor must be local, process or ray, got {executor!r}")
    if requested is not None and not 0 <= requested <= MAX_THREADS:
        raise ValueError(f"--threads must be from 0 (torch's default) to {MAX_THREADS}, got {requested}")
    if requested is None:
        return ThreadPlan(1, 1, "policy")
    if requested == TORCH_DEFAULT:
        return ThreadPlan(None, None, "torch default")
    processes = workers if executor == "process" else 1
    total = requested * processes
    warning = None
    if total > cores:
        who = (f"{processes} worker processes x {requested} threads = {total} threads" if processes > 1
               else f"{requested} threads")
        warning = (f"--threads {requested}: {who} on {cores} usable core{'s' if cores != 1 else ''}; running as asked, "
                   "but threads beyond the cores wait for each other (the default, one per process, does not)")
    return ThreadPlan(requested, 1, "user", warning)


_said: set[str] = set()


def plan_for_run(executor: str = "local", workers: int = 1, requested: int | None = None) -> ThreadPlan:
    """The plan for a run in this process (its usable cores), its warning said once per process on stderr."""
    plan = choose_threads(usable_cores(), executor, workers, requested)
    if plan.warning and plan.warning not in _said:
        _said.add(plan.warning)
        print(f"compbench: {plan.warning}", file=sys.stderr, flush=True)
    return plan


def current_threads() -> int | None:
    """torch's intra-op thread count in this process (None when torch is not imported: nothing trained here)."""
    torch = sys.modules.get("torch")
    return int(torch.get_num_threads()) if torch is not None else None


def _set_torch(torch, plan: ThreadPlan) -> None:  # type: ignore[no-untyped-def]
    if plan.intra is not None and torch.get_num_threads() != plan.intra:
        torch.set_num_threads(plan.intra)
    if plan.interop is not None and torch.get_num_interop_threads() != plan.interop:
        try:
            torch.set_num_interop_threads(plan.interop)
        except RuntimeError:
            # Settable once, before torch's first inter-op work. compbench starts none (inter-op threads
            # serve torch.jit.fork), so a process whose count was fixed earlier keeps it, at no cost.
            pass


@dataclass(frozen=True)
class Applied:
    """What one `apply_in_this_process` changed, for `restore` to undo: torch's count before it, the BLAS limit it set."""

    torch_threads: int
    blas: Any = None  # the threadpoolctl limiter this call set (None: the BLAS pools were already so)


def apply_in_this_process(plan: ThreadPlan) -> Applied:
    """Import torch (before the first job trains) and set its threads and the BLAS pools' by the plan.

    What it changed is returned so that a caller that lends its process (`run_suite`, the pytest
    plugin) can undo exactly that (`restore`), and nothing another run set; the inter-op count cannot
    be restored and is set only when this call imports torch itself.
    """
    fresh = "torch" not in sys.modules
    import torch

    before = int(torch.get_num_threads())
    _set_torch(torch, plan if fresh else ThreadPlan(plan.intra, None, plan.source))
    thread_scope.run_started()  # compbench's library calls inside the run leave its plan alone
    return Applied(before, _limit_blas(plan.intra))


_blas_limits: list = []  # (threads, threadpoolctl limiter) applied by this process's runs, undone by `restore`


def _limit_blas(n: int | None) -> Any:
    """The BLAS pools (numpy's and scipy's OpenBLAS, MKL) to `n` threads as well: the kernel cells' Grams and
    solves run in numpy/scipy, whose default (one thread per core) waits for descheduled threads just as
    torch's does (kernel-limits beside four busy processes: 322 s and 193 s of CPU with torch alone limited).
    The limiter it sets, or None when it set none."""
    if n is None or (_blas_limits and _blas_limits[-1][0] == n):
        return None  # already so (a run sets its threads before each job that trains: once is enough here)
    import scipy.linalg  # noqa: F401 — loads scipy's own BLAS now, so that its pool is limited too
    from threadpoolctl import threadpool_limits

    limiter = threadpool_limits(limits=n, user_api="blas")
    _blas_limits.append((n, limiter))
    return limiter


def restore(applied: Applied | None) -> None:
    """Undo one `apply_in_this_process`: the BLAS limit it set (if any) and torch's intra-op count before it.

    Runs nest: each restores only what its own apply set, so an inner run that set nothing (cached, or
    the same plan as the run around it) leaves the outer run's limit in place.
    """
    if applied is None:
        return
    thread_scope.run_ended()
    if applied.blas is not None:
        for i in range(len(_blas_limits) - 1, -1, -1):
            if _blas_limits[i][1] is applied.blas:
                del _blas_limits[i]
                applied.blas.restore_original_limits()
                break
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != applied.torch_threads:
        torch.set_num_threads(applied.torch_threads)


def apply_in_worker(plan: ThreadPlan) -> None:
    """A pool or Ray worker's threads: the OpenMP/BLAS environment (read by libraries a worker loads later,
    and by a spawned worker's torch at import) and torch's own counts."""
    if plan.intra is not None:
        for name in _ENV_VARS:
            os.environ[name] = str(plan.intra)
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return
    _set_torch(torch, plan)
    thread_scope.run_started()  # for the worker's life
    _limit_blas(plan.intra)  # a forked worker inherits BLAS pools already loaded: the environment is too late for them
