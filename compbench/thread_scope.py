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


_inside = threading.local()  # depth of policy_threads in this thread: nested calls change nothing
_RUNS = [0]  # runs in this process whose thread plan is in force (compbench.runner.threads counts them)


def run_started() -> None:
    """A run's thread plan now governs this process (`--threads` included): library calls leave it alone."""
    _RUNS[0] += 1


def run_ended() -> None:
    """A run's thread plan was undone."""
    _RUNS[0] = max(0, _RUNS[0] - 1)


@contextmanager
def policy_threads() -> Iterator[None]:
    """torch's and the BLAS pools' threads set to the policy for the block, and restored after it.

    Inside a run (its plan already set, `--threads N` included) it changes nothing.
    """
    if _RUNS[0] or getattr(_inside, "depth", 0):  # a run's plan governs, or an outer call already set it
        yield
        return
    import torch
    from threadpoolctl import threadpool_limits

    before = int(torch.get_num_threads())
    wanted = _wanted()
    if before != wanted:
        torch.set_num_threads(wanted)
    limiter = threadpool_limits(limits=wanted, user_api="blas")
    _inside.depth = 1
    try:
        yield
    finally:
        _inside.depth = 0
        limiter.restore_original_limits()
        if before != wanted:
            torch.set_num_threads(before)


def one_thread(func: F) -> F:
    """Run `func` under `policy_threads` (compbench's public numerical entry points)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with policy_threads():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
