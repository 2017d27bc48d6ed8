"""SIGTERM handled like Ctrl-C: the run finishes nothing new, keeps what finished, and says how to resume."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.process import BaseProcess
from types import FrameType

EXIT_TERMINATED = 128 + signal.SIGTERM  # 143, the shell's convention for "killed by SIGTERM"


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; raised in the main thread so that it unwinds exactly like Ctrl-C."""


_state = {"pid": 0, "received": False}


def terminated() -> bool:
    """Whether this process received SIGTERM while the handler was installed."""
    return bool(_state["received"]) and _state["pid"] == os.getpid()


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    if os.getpid() != _state["pid"]:
        # A forked pool worker inherited this handler: stop at once and quietly; the parent
        # stores nothing from a worker that did not finish, so nothing is lost.
        os._exit(128 + signum)
    if _state["received"]:
        return  # the run is already stopping: let it write its report and release its claims
    _state["received"] = True
    # Pool workers would otherwise finish their jobs first (the pool waits for them on shutdown).
    stop_children(join=False)
    raise Terminated()


def stop_children(join: bool = True, keep: frozenset[BaseProcess] = frozenset()) -> None:
    """Terminate this process's multiprocessing children (pool workers) other than `keep`, and reap them."""
    children = [c for c in multiprocessing.active_children() if c not in keep]
    for child in children:
        child.terminate()
    if join:
        for child in children:
            child.join(10)
            if child.is_alive():
                child.kill()
                child.join(10)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While active, SIGTERM raises Terminated (a KeyboardInterrupt) in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.update(pid=os.getpid(), received=False)
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
