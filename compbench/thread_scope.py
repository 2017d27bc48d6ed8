"""compbench's thread policy for a library call: one torch and BLAS thread while compbench's kernels run.

The commands set the policy for their whole process (compbench.runner.threads). A user who calls
`compbench.theory.empirical_ntk` from a script or a notebook gets no command, so the call ran at
torch's default (one thread per core) and collapsed beside busy processes: the ConvNet eNTK at
N = 256 took 7.4 s instead of 0.62 s beside four busy processes (issue #34). `one_thread` puts the
policy around one call and restores the caller's counts after it, so the caller's own torch work is
untouched. Inside a run it does nothing (the run's plan, `--threads N` included, governs), and a user
who wants another count for library calls says so with `OMP_NUM_THREADS`, which is honoured.

Standard library only at import: torch and threadpoolctl are imported where a call needs them.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])


def _wanted() -> int:
    """The threads a library call runs with: the user's OMP_NUM_THREADS when set (a count ≥ 1), else one."""
    value = os.environ.get("OMP_NUM_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) >= 1 else 1


# torch's intra-op count belongs to the calling thread (its OpenMP setting; a thread's first write makes it its own):
# each thread sets and restores its own. The BLAS pools' counts belong to the process: one scope for all threads,
# set by the first call in and restored by the last out, so no call restores them while another still computes.
_inside = threading.local()  # this thread's (depth of nested calls, torch's count it found)
_lock = threading.Lock()


class _Shared:
    """The BLAS limit shared by every thread's calls: how many are inside, and the threadpoolctl limiter the first set."""

    calls: int = 0
    limiter: Any = None


_blas = _Shared()
_RUNS = [0]  # runs in this process whose thread plan is in force (compbench.runner.threads counts them)


def run_started() -> None:
    """A run's thread plan now governs this process (`--threads` included): library calls leave it alone."""
    _RUNS[0] += 1


def run_ended() -> None:
    """A run's thread plan was undone."""
    _RUNS[0] = max(0, _RUNS[0] - 1)


def _enter() -> bool:
    """One more call inside the policy in this thread (the outermost sets it); False when a run's plan governs."""
    depth = getattr(_inside, "depth", 0)
    if depth:
        _inside.depth = depth + 1
        return True
    if _RUNS[0]:
        return False
    import torch

    wanted = _wanted()
    with _lock:
        if not _blas.calls:
            from threadpoolctl import threadpool_limits

            _blas.limiter = threadpool_limits(limits=wanted, user_api="blas")
        _blas.calls += 1
    _inside.before = int(torch.get_num_threads())
    # Set even when it reads as wanted: a thread that never set its own count reads the main thread's, which an
    # outer call there may restore while this one computes.
    torch.set_num_threads(wanted)
    _inside.depth = 1
    return True


def _leave() -> None:
    """One call out of the policy in this thread; the outermost restores this thread's torch count, the last
    in the process the BLAS pools'."""
    _inside.depth -= 1
    if _inside.depth:
        return
    import torch

    torch.set_num_threads(_inside.before)
    with _lock:
        _blas.calls -= 1
        if not _blas.calls:
            _blas.limiter.restore_original_limits()
            _blas.limiter = None


@contextmanager
def policy_threads() -> Iterator[None]:
    """torch's and the BLAS pools' threads set to the policy for the block, and restored after it (also on an exception).

    Nested calls change nothing; calls running at once in several threads each keep their own torch
    count and share the BLAS limit until the last one leaves. Inside a run (its plan already set,
    `--threads N` included) it changes nothing.
    """
    entered = _enter()
    try:
        yield
    finally:
        if entered:
            _leave()


def one_thread(func: F) -> F:
    """Run `func` under `policy_threads` (compbench's public numerical entry points)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with policy_threads():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
