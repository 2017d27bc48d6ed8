"""Progress from inside a long stage of a cell (an empirical NTK's blocks), for the run's display.

Code deep inside a cell (compbench.theory) calls `report(stage, done, total)`; whoever runs the
cell listens with `listening(callback)` (the runner, which shows it beside the running job). With
no listener a report costs one context-variable lookup. A listener hears at most one report per
`interval` seconds, so a stage of thousands of blocks is not slowed by its display.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

StageCallback = Callable[[str, int, int], None]  # (stage, done, total)


class _Listener:
    __slots__ = ("callback", "interval", "last")

    def __init__(self, callback: StageCallback, interval: float) -> None:
        self.callback = callback
        self.interval = interval
        self.last = float("-inf")


_LISTENER: ContextVar[_Listener | None] = ContextVar("compbench_stage_listener", default=None)


def report(stage: str, done: int, total: int) -> None:
    """Tell the listener, if any and if its interval has passed, that `done` of `total` steps of `stage` are done."""
    listener = _LISTENER.get()
    if listener is None:
        return
    now = time.monotonic()
    if now - listener.last < listener.interval:
        return
    listener.last = now
    try:
        listener.callback(stage, done, total)
    except Exception:  # noqa: BLE001 — a display that fails must not fail the cell it describes
        pass


@contextmanager
def listening(callback: StageCallback, interval: float = 0.25) -> Iterator[None]:
    """Within the block, `report` calls `callback(stage, done, total)` at most once per `interval` seconds."""
    token = _LISTENER.set(_Listener(callback, interval))
    try:
        yield
    finally:
        _LISTENER.reset(token)


__all__ = ["StageCallback", "listening", "report"]
