"""The default executor, `auto`: this process for a small run, a pool of one-thread workers on every usable core otherwise.

One process with one torch thread (the thread policy, `runner.threads`) keeps a run's fair share on a
busy machine, but leaves every other core idle on a free one. So by default a run whose cells still
have to be computed is spread over a process pool of one-thread workers, one per usable core
(affinity and cgroup quota, `runner.threads.usable_cores`): each worker keeps the busy-machine
behaviour, and together they use every core. The run stays in this process when a pool cannot help
or is not allowed:

- one usable core, or fewer than two jobs to compute (a warm run computes none and starts nothing);
- a small run: less expected work than `POOL_MIN_COST` (a few hundred kernel cells cost less than
  starting the workers);
- `--fail-fast` (a pool has other cells in flight when one fails) or a CUDA device (one process owns
  the GPU);
- less memory available than `WORKER_MEMORY` per worker beyond the first (the pool is made smaller).

Jobs go to the pool longest expected first (the ETA's cost, `runner.progress.job_cost`), so a suite's
few long network cells start at once instead of last, and its many short kernel cells fill the gaps.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from compbench.runner.progress import NETWORK_COST, job_cost
from compbench.runner.threads import usable_cores

__all__ = ["AUTO", "POOL_MIN_COST", "WORKER_MEMORY", "Choice", "available_memory", "choose", "longest_first"]

AUTO = "auto"
# Expected work (the ETA's units: seeds x training samples, x NETWORK_COST for a network) below which a
# run stays in this process: about one small network cell (2 seeds x 100 samples), or ~20,000 kernel
# samples. Forking the workers and handing them the prepared tasks costs about a tenth of a second.
POOL_MIN_COST = 2 * 100 * NETWORK_COST
# Memory a worker is allowed for beyond this process's: a worker is forked from it (its pages shared
# until written), and a bundled suite's largest cell (an eNTK of a few thousand samples) peaks near this.
WORKER_MEMORY = 2 * 1024**3


@dataclass(frozen=True)
class Choice:
    """Where a run's jobs go: the executor and pool size used, and why (said in the run's summary)."""

    executor: str  # "local" or "process"
    workers: int
    reason: str


def available_memory() -> int | None:
    """Bytes the kernel says can be allocated without swapping (`MemAvailable`), or None where it does not say."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def choose(jobs: list[Any], device: str, fail_fast: bool = False, workers: int | None = None,
           cores: int | None = None, memory: int | None = -1, cell_timeout: float | None = None) -> Choice:
    """The executor for `jobs` (the ones still to compute) under `--executor auto`.

    `workers`: a pool size the user asked for (None: one per usable core); `cores` and `memory` are
    read from this machine unless given (tests give them; memory None: unknown, not bounded).
    """
    cores = usable_cores() if cores is None else cores
    memory = available_memory() if memory == -1 else memory
    if cell_timeout:
        n = max(1, min(cores if workers is None else workers, len(jobs)))
        return Choice("process", n, "--cell-timeout needs its cells in worker processes (a job here cannot be stopped)")
    if fail_fast:
        return Choice("local", 1, "--fail-fast runs in this process")
    if device != "cpu":
        return Choice("local", 1, f"one process owns the {device} device")
    want = cores if workers is None else workers
    if want < 2:
        return Choice("local", 1, "one usable core" if workers is None else "--workers 1")
    if len(jobs) < 2:
        return Choice("local", 1, "fewer than two cells to compute")
    cost = sum(job_cost(j) for j in jobs)
    if cost < POOL_MIN_COST:
        return Choice("local", 1, "a small run (less work than starting workers costs)")
    n = min(want, len(jobs))
    if memory is not None:
        fit = 1 + memory // WORKER_MEMORY
        if fit < n:
            if fit < 2:
                return Choice("local", 1, f"{memory / 1024**3:.1f} GiB available: room for one process")
            return Choice("process", int(fit), f"{int(fit)} workers, as {memory / 1024**3:.1f} GiB available allow")
    return Choice("process", n, f"{n} one-thread workers, one per usable core" if workers is None else f"{n} workers")


def longest_first(jobs: list[Any]) -> list[int]:
    """Positions of `jobs` ordered by expected cost, longest first (ties keep the suite's order)."""
    costs = [job_cost(j) for j in jobs]
    return sorted(range(len(jobs)), key=lambda i: -costs[i])

