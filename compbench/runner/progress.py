"""Progress display: a live bar on a terminal, plain periodic lines otherwise (CI logs)."""

from __future__ import annotations

import sys
import time
from types import TracebackType


class Progress:
    """Counts cells done / cached / failed / skipped while jobs run."""

    def __init__(self, total_jobs: int, label: str, enabled: bool = True) -> None:
        self.total = total_jobs
        self.label = label
        self.enabled = enabled
        self.done = self.cached = self.failed = self.skipped = 0
        self.jobs = 0
        self._live = enabled and sys.stderr.isatty()
        self._bar = None
        self._task = None
        self._start = time.perf_counter()
        self._last_line = 0.0

    def __enter__(self) -> Progress:
        if self._live:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeRemainingColumn

            self._bar = RichProgress(
                TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                TextColumn("{task.fields[counts]}"), transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total, counts="")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif self.enabled and self.jobs:
            self._line()

    def counts(self) -> str:
        """'n done, n cached, n failed, n skipped'."""
        return f"{self.done} done, {self.cached} cached, {self.failed} failed, {self.skipped} skipped"

    def advance(self, statuses: list[str], cached: bool) -> None:
        """Account for one finished job's records."""
        self.jobs += 1
        for s in statuses:
            if cached:
                self.cached += 1
            elif s == "ok":
                self.done += 1
            elif s == "skipped":
                self.skipped += 1
            else:
                self.failed += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, counts=self.counts())
        elif self.enabled and time.perf_counter() - self._last_line > 5:
            self._line()

    def _line(self) -> None:
        self._last_line = time.perf_counter()
        elapsed = self._last_line - self._start
        print(f"[{self.label}] jobs {self.jobs}/{self.total} ({self.counts()}) {elapsed:.1f}s", file=sys.stderr, flush=True)
