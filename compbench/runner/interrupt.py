"""SIGTERM handled like Ctrl-C: the run finishes nothing new, keeps what finished, and says how to resume.

Once a run is stopping, further Ctrl-C presses (or SIGTERMs) only hurry the cleanup: pool workers
are killed rather than waited for, and nothing is left that the interpreter's exit would wait on.
"""

from __future__ import annotations

import atexit
import multiprocessing
import multiprocessing.util  # its exit handler is registered at import: ours must come later (runs first)
import os
import signal
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from types import FrameType

EXIT_TERMINATED = 128 + signal.SIGTERM  # 143, the shell's convention for "killed by SIGTERM"
GRACE_SECONDS = 2.0  # how long stopped children get to exit on SIGTERM before they are killed


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived; raised in the main thread so that it unwinds exactly like Ctrl-C."""


_state: dict[str, int | bool] = {"pid": 0, "received": False, "at_exit": False}


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


@contextmanager
def presses_hurry() -> Iterator[threading.Event]:
    """While cleanup runs, Ctrl-C and SIGTERM set the yielded event instead of raising: they hurry it,
    never cut it short (a cut-short cleanup left workers that the interpreter's exit then waited on)."""
    hurry = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        yield hurry
        return

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if signum == signal.SIGTERM and os.getpid() == _state["pid"]:
            _state["received"] = True
        hurry.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield hurry
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def kill_and_reap(procs: Iterable[BaseProcess]) -> None:
    """SIGKILL every process that is still alive, then reap them all (further Ctrl-C presses cannot stop this)."""
    procs = list(procs)
    with presses_hurry():
        for p in procs:
            if p.is_alive():
                p.kill()
        for p in procs:
            p.join(5)


def stop_children(join: bool = True, keep: frozenset[BaseProcess] = frozenset()) -> None:
    """Terminate this process's multiprocessing children (pool workers) other than `keep`, and reap them.

    Children get GRACE_SECONDS in all to exit on SIGTERM (pool workers ignore it: the parent owns the
    signals), then are killed; a Ctrl-C meanwhile kills them at once.
    """
    children = [c for c in multiprocessing.active_children() if c not in keep]
    for child in children:
        child.terminate()
    if not join or not children:
        return
    with presses_hurry() as hurry:
        deadline = time.monotonic() + GRACE_SECONDS
        while not hurry.is_set():
            alive = [c.sentinel for c in children if c.is_alive()]
            left = deadline - time.monotonic()
            if not alive or left <= 0:
                break
            wait(alive, timeout=min(0.1, left))
    kill_and_reap(children)


def _at_exit() -> None:
    # multiprocessing's exit handler terminates daemonic children and joins them with no timeout; a
    # pool worker ignores SIGTERM, so that join waited for its job to end, and a Ctrl-C in it gave a
    # traceback and an orphaned worker. This runs first (registered later) and kills them; a Ctrl-C
    # pressed while the interpreter exits is ignored.
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    kill_and_reap(c for c in multiprocessing.active_children() if c.daemon)


def ignore_further_interrupts() -> None:
    """For a process about to exit after an interrupted run: later Ctrl-C presses are ignored, not tracebacks."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)


@contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While active, SIGTERM raises Terminated (a KeyboardInterrupt) in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _state.update(pid=os.getpid(), received=False)
    if not _state.get("at_exit"):
        atexit.register(_at_exit)
        _state["at_exit"] = True
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
