"""What more cores would give a suite's cold run: its measured job times, scheduled longest first on P workers.

    python tests/benchmarks/cell_times.py results/kernel-limits            # a results directory (or --json)
    python tests/benchmarks/cell_times.py /tmp/r --workers 1,2,4,8,16

The default executor (`auto`, compbench.runner.schedule) hands a run's jobs to one one-thread worker per
usable core, longest expected first. A job's time is the sum of its records' `wall_time` (the seeds a job
trains together share one timing, recorded on each: counted once). Its training phase on P workers then takes
at least max(total / P, longest job): this script simulates the greedy longest-first schedule on the measured
times and prints, per P, that makespan and the speed-up over one worker. It reads only; the times are what
the run measured (a run taken on a busy machine overstates them alike).
"""

from __future__ import annotations

import argparse
import heapq
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def job_times(results: Path) -> list[float]:
    """Seconds per job (model, task) of the store under `results`: its records' wall_time, each distinct timing once."""
    sys.path.insert(0, str(ROOT))
    from compbench.store import ResultStore

    jobs: dict[tuple[str, str], set[float]] = defaultdict(set)
    for r in ResultStore(results / "store").latest().values():
        if r.wall_time is not None:
            jobs[(r.model, r.task)].add(float(r.wall_time))
    return sorted((sum(t) for t in jobs.values()), reverse=True)


def makespan(times: list[float], workers: int) -> float:
    """The greedy longest-first schedule's length on `workers` (each job to the worker free first)."""
    free = [0.0] * workers
    for t in sorted(times, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + t)
    return max(free)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", type=Path, help="a results directory (holding store/)")
    parser.add_argument("--workers", default="1,2,4,8,16", help="worker counts to schedule on (default 1,2,4,8,16)")
    parser.add_argument("--json", action="store_true", help="print the job times and schedules as JSON")
    args = parser.parse_args(argv)
    times = job_times(args.results)
    if not times:
        raise SystemExit(f"{args.results}: no timed records")
    total = sum(times)
    rows = [(p, makespan(times, p)) for p in (int(w) for w in args.workers.split(","))]
    if args.json:
        print(json.dumps({"jobs": len(times), "total_s": total, "longest_s": times[0],
                          "schedules": [{"workers": p, "makespan_s": m, "speedup": total / m} for p, m in rows]}, indent=2))
        return 0
    top = sum(times[:10])
    print(f"{len(times)} jobs, {total:.1f} s in all; the longest {times[0]:.1f} s, the 10 longest {top:.1f} s "
          f"({100 * top / total:.0f} %)")
    print("| workers | training phase s | speed-up |\n|---|---|---|")
    for p, m in rows:
        print(f"| {p} | {m:.1f} | {total / m:.2f}× |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
