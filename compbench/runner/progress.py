"""Progress display: a live bar on a terminal, plain periodic lines otherwise (CI logs).

The ETA weighs jobs by an expected cost rather than counting them alike: a suite's kernel jobs
finish in milliseconds and its network jobs take seconds, so a count of jobs done says little about
the time left. A job's cost is `seeds × training samples × per-sample weight`, the weight
NETWORK_COST for an adapter tagged `networks` (trained by gradient steps) and 1 otherwise (kernels
and other closed forms). Cached jobs take no time and are left out of the rate and of the work left.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from types import TracebackType
from typing import Any

# Per training sample and seed, a network job is taken to cost this many kernel jobs: an MLP trained
# for thousands of gradient steps against one closed-form solve. A rough guess, not a measurement;
# only its order of magnitude matters to the ETA.
NETWORK_COST = 100.0


def job_cost(job: Any, n_train: int | None = None) -> float:
    """A job's expected cost: seeds × training samples, × NETWORK_COST for a network (see the module doc)."""
    n_train = int(job.task.data.train_mask.sum()) if n_train is None else n_train
    weight = NETWORK_COST if "networks" in job.model.tags else 1.0
    return max(1, len(job.seeds)) * max(1, n_train) * weight


def weighted_eta(elapsed: float, cost_done: float, cost_left: float) -> float | None:
    """Seconds left if the remaining cost runs at the rate the finished (not cached) cost ran; None before any ran."""
    if cost_done <= 0:
        return None
    return elapsed * cost_left / cost_done


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "ETA ?"
    seconds = int(round(seconds))
    return f"ETA {seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}" if seconds >= 3600 else f"ETA {seconds // 60}:{seconds % 60:02d}"


def _job_name(job: Any) -> str:
    return f"{job.model.id} on {job.task.entry.id}"


class Progress:
    """Counts cells done / cached / failed / skipped while jobs run, and the weighted time left."""

    def __init__(self, jobs: Sequence[Any], label: str, enabled: bool = True, verbose: bool = False) -> None:
        self.total = len(jobs)
        self.label = label
        self.enabled = enabled
        self.verbose = verbose  # a line for every finished job, not one every 5 s
        self.done = self.cached = self.failed = self.skipped = 0
        self.jobs = 0
        # Costed only when shown: a cached run of thousands of jobs should not pay for a display it hides.
        sizes: dict[int, int] = {}
        for j in jobs if enabled else ():
            if id(j.task) not in sizes:
                sizes[id(j.task)] = int(j.task.data.train_mask.sum())
        self.costs = {id(j): job_cost(j, sizes[id(j.task)]) for j in jobs} if enabled else {}
        self.cost_left = sum(self.costs.values())
        self.cost_done = 0.0  # the cost of the jobs run here (not cached)
        self.current = ""  # the job running now ("model on task"), or the last finished when starts are not seen
        self.detail = ""  # how far the running job's long stage is ("eNTK 1024×1024: block 12/40"), or ""
        self._live = enabled and sys.stderr.isatty()
        self._bar = None
        self._task = None
        self._start = time.perf_counter()
        self._busy = 0.0  # seconds spent on jobs run here (the ETA's rate; time on cached jobs is not counted)
        self._since: float | None = None
        self._last_line = 0.0

    def __enter__(self) -> Progress:
        if self._live:
            from rich.console import Console
            from rich.progress import BarColumn, Progress as RichProgress, TextColumn

            self._bar = RichProgress(
                # Text, not rich markup: sweep member ids hold brackets (`mlp[init_scale=0.1]`).
                TextColumn("{task.description}", markup=False), BarColumn(), TextColumn("{task.fields[status]}", markup=False),
                transient=False, console=Console(file=sys.stderr),  # the terminal it was judged live on, not stdout
            )
            self._bar.start()
            self._task = self._bar.add_task(self.label, total=self.total, status=self.status())
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._bar is not None:
            self._bar.stop()
        elif self.enabled and self.jobs:
            self._line()

    def counts(self) -> str:
        """'n done, n cached, n failed, n skipped'."""
        return f"{self.done} done, {self.cached} cached, {self.failed} failed, {self.skipped} skipped"

    def eta(self) -> float | None:
        """Seconds left by the weighted rate (None until a job has run here)."""
        busy = self._busy + (time.perf_counter() - self._since if self._since is not None else 0.0)
        return weighted_eta(busy, self.cost_done, self.cost_left)

    def status(self) -> str:
        """'jobs 3/10 (counts), ETA 0:12, running MODEL on TASK': what the bar and the plain lines show."""
        now = f", running {self.current}" if self.current and (self._since is not None or self.detail) else (
            f", last {self.current}" if self.current else "")
        if self.detail:
            now += f" ({self.detail})"
        return f"jobs {self.jobs}/{self.total} ({self.counts()}), {_duration(self.eta())}{now}"

    def start(self, job: Any) -> None:
        """A job begins training in this process: name it."""
        self.current = _job_name(job)
        self.detail = ""
        self._since = time.perf_counter()
        if self._bar is not None:
            self._bar.update(self._task, status=self.status())
        elif self.enabled and self.verbose:
            self._line()

    def stage(self, job: Any, stage: str, done: int, total: int) -> None:
        """How far a running job's long stage is (compbench.stage_progress): shown beside the job's name."""
        self.current = _job_name(job)  # a pool's job too: its start was out of sight, its stage reports are not
        self.detail = f"{stage}: block {done}/{total}"
        if self._bar is not None:
            self._bar.update(self._task, status=self.status())
        elif self.enabled and time.perf_counter() - self._last_line > 5:
            self._line()  # a CI log gets a line at least every 5 s while a stage moves, not silence

    def advance(self, job: Any, statuses: list[str], cached: bool) -> None:
        """Account for one finished job's records."""
        self.jobs += 1
        self.detail = ""
        cost = self.costs.get(id(job), 0.0)
        self.cost_left = max(0.0, self.cost_left - cost)
        if not cached:
            self.cost_done += cost
            if self._since is not None:
                self._busy += time.perf_counter() - self._since
            else:  # started out of sight (a pool): the wall time since the run began is the best rate known
                self._busy = time.perf_counter() - self._start
            self.current = _job_name(job)
        self._since = None
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
            self._bar.update(self._task, advance=1, status=self.status())
        elif self.enabled and (self.verbose or time.perf_counter() - self._last_line > 5):
            self._line()

    def _line(self) -> None:
        self._last_line = time.perf_counter()
        elapsed = self._last_line - self._start
        print(f"[{self.label}] {self.status()} {elapsed:.1f}s", file=sys.stderr, flush=True)
