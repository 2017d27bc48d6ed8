"""A child process compbench starts dies with its parent.

`kill -9` of `run` or `report` gives the parent no chance to stop its children: a pool worker went
on training (or waiting on its pipe) for ever, and the process drawing the plots blocked on a pipe
of which it held both ends. Each child calls `die_with_parent` first. On Linux the kernel kills it
when its parent goes (PR_SET_PDEATHSIG); everywhere, a thread checks every WATCH_SECONDS that its
parent is still the process that started it, and ends it when not.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterable
from typing import Any

WATCH_SECONDS = 1.0
EXIT_ORPHANED = 128 + signal.SIGKILL  # as if the parent's SIGKILL had reached it too
_PR_SET_PDEATHSIG = 1


def parent_of_children(ctx: Any) -> int | None:
    """The pid a child started through multiprocessing context `ctx` has as its parent: this process's,
    or None under a fork server (which forks it, and exits when this process does)."""
    return None if ctx.get_start_method() == "forkserver" else os.getpid()


def inherited_ends(ctx: Any, *conns: Any) -> tuple[Any, ...]:
    """`conns` (this process's ends of pipes) where a child started through `ctx` inherits them: under fork."""
    return conns if ctx.get_start_method() == "fork" else ()


def die_with_parent(parent_pid: int | None, inherited: Iterable[Any] = ()) -> None:
    """In a child process: end it when `parent_pid` (None: the process that forked it) exits; close `inherited`.

    `inherited`: the parent's ends of pipes, forked into this child, which would otherwise hide the
    parent's death from it (no EOF on reading, no EPIPE on writing while this copy stays open).
    """
    for conn in inherited:
        conn.close()
    if parent_pid is None:
        parent_pid = os.getppid()
    if sys.platform.startswith("linux"):
        _parent_death_signal()
    if os.getppid() != parent_pid:  # the parent died before the signal was asked for
        os._exit(EXIT_ORPHANED)
    threading.Thread(target=_watch, args=(parent_pid,), name="compbench-parent-watch", daemon=True).start()


def _parent_death_signal() -> None:
    # Sent when the thread that forked this process ends: compbench's parents stop and reap their
    # children in the same call that started them, so that thread outlives them.
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl here (another libc): the watch thread still ends it
        pass


def _watch(parent_pid: int) -> None:
    while os.getppid() == parent_pid:  # an orphan is adopted by init or a subreaper: another pid
        time.sleep(WATCH_SECONDS)
    os._exit(EXIT_ORPHANED)
