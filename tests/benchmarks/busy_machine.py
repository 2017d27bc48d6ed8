"""The whole `compbench run` command on an idle machine and beside busy processes (issue #25, item 1).

    python tests/benchmarks/busy_machine.py                          # kernel-limits, alone, beside 2 and 4
    python tests/benchmarks/busy_machine.py --rounds 3 --json busy.json
    python tests/benchmarks/busy_machine.py --suite kernel-limits-images --busy 0,4
    python tests/benchmarks/busy_machine.py --warm --busy 0 --modes policy --rounds 5 --before ../before   # warm, 2 commits

Each measurement is `python -m compbench.cli run --suite S --results <fresh tmp> --quiet --force` in a
fresh process (cold: every cell trained, every report file written), with K busy processes (`python
-c "while True: pass"`, started before it and killed after it by this script) beside it. Each is run
under every mode: `policy` (no flag: compbench's default, the `auto` executor with one torch thread per
process), `local` (`--executor local`: one process, the default before #34) and
`--threads 0` (torch's own default: compbench's behaviour before the thread policy), and any other
`--threads N` asked for. Rounds are interleaved (mode by mode, load by load, round after round), so a
drift of the machine's speed spreads over every mode alike.

Reported per (mode, busy processes): wall seconds and CPU seconds of the command (user + system of it
and every process it waited for, from resource.getrusage(RUSAGE_CHILDREN) taken just before and just
after it; the busy processes are reaped only after the second reading, so their time is not in it),
min–max over rounds, and two ratios against the same mode's idle run: CPU ÷ idle CPU (threads that
wait for each other burn CPU), and wall ÷ fair share, the fair share being the idle CPU time spread
over the cores the command is owed beside K busy loops (cores / (K + 1), at most one core per thread
it may run: with one thread, one core). Targets of issue #25: beside four busy processes, wall within
1.25x of the fair share and CPU within 1.2x of the idle CPU.

Run it on a machine with nothing else running (other work is load this script does not control).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUSY = "while True: pass"


def cores() -> int:
    sys.path.insert(0, str(ROOT))
    from compbench.runner.threads import usable_cores

    return usable_cores()


def start_busy(k: int) -> list[subprocess.Popen]:
    procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(k)]
    time.sleep(0.5 if k else 0.0)  # let them start spinning before the command starts
    return procs


def stop_busy(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
    for p in procs:
        p.wait()


def run_once(suite: str, mode: str, busy: int, extra: list[str], root: Path = ROOT, warm: Path | None = None) -> dict:
    """One run of the command (compbench as checked out at `root`) beside `busy` busy processes; its wall and CPU seconds.

    Cold (`--force` into a fresh directory) unless `warm` names a results directory a run already filled: then
    the same command again there, every cell cached.
    """
    flag = [] if mode == "policy" else ["--executor", "local"] if mode == "local" else ["--threads", mode]
    with tempfile.TemporaryDirectory(prefix="compbench-busy-") as tmp:
        where = ["--results", str(warm)] if warm else ["--results", str(Path(tmp) / "results"), "--force"]
        cmd = [sys.executable, "-m", "compbench.cli", "run", "--suite", suite, *where, "--quiet", *flag, *extra]
        procs = start_busy(busy)
        try:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            env = {**os.environ, "PYTHONPATH": str(root)}  # that checkout's compbench, whatever is installed
            done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
        finally:
            stop_busy(procs)
    if done.returncode not in (0, 1):  # 1: it ran, and some expectation failed (said in the summary)
        raise SystemExit(f"{' '.join(cmd)} exited {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    summary = next((line for line in done.stdout.splitlines() if " cells run" in line), "")
    return {"mode": mode, "busy": busy, "wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "exit": done.returncode,
            "summary": summary, "load_average": os.getloadavg()}


def _span(values: list[float]) -> str:
    lo, hi = min(values), max(values)
    return f"{lo:.1f}" if len(values) == 1 or f"{lo:.1f}" == f"{hi:.1f}" else f"{lo:.1f}–{hi:.1f}"


def table(results: list[dict], n_cores: int) -> str:
    """A markdown table: per mode and load, wall and CPU (min–max over rounds) and the two ratios."""
    lines = ["| threads | busy processes | wall s | CPU s | CPU ÷ idle CPU | wall ÷ fair share |", "|---|---|---|---|---|---|"]
    modes = list(dict.fromkeys(r["mode"] for r in results))
    loads = sorted({r["busy"] for r in results})
    for mode in modes:
        idle = [r["cpu_s"] for r in results if r["mode"] == mode and r["busy"] == 0]
        idle_cpu = min(idle) if idle else None
        base, _, tree = mode.partition("@")
        # The default (`auto`) runs one one-thread worker per usable core; `local` one thread; --threads 0 one per core.
        # A checkout from before #34 ran the default in one process, one thread.
        threads = (1 if tree else n_cores) if base == "policy" else 1 if base == "local" else (int(base) or n_cores)
        for k in loads:
            rows = [r for r in results if r["mode"] == mode and r["busy"] == k]
            if not rows:
                continue
            walls, cpus = [r["wall_s"] for r in rows], [r["cpu_s"] for r in rows]
            cpu_ratio = fair_ratio = "—"
            if idle_cpu:
                cpu_ratio = _span([c / idle_cpu for c in cpus]) + "×"
                share = min(n_cores / (k + 1), threads, n_cores)  # cores owed to the command beside k busy loops
                fair_ratio = _span([w / (idle_cpu / share) for w in walls]) + "×"
            name = ("default (auto: 1 thread per process, a worker per core)" if base == "policy"
                    else "--executor local (1 thread, this process)" if base == "local"
                    else f"--threads {base}" + (" (torch default)" if base == "0" else ""))
            if tree and base == "policy":  # a checkout from before #34: its default ran in one process, one thread
                name = "default of the checkout before (one process, one thread)"
            elif tree:
                name = f"{name}, {tree} checkout"
            lines.append(f"| {name} | {k} | {_span(walls)} | {_span(cpus)} | {cpu_ratio} | {fair_ratio} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", default="kernel-limits", help="suite name or YAML path (default kernel-limits)")
    parser.add_argument("--busy", default="0,2,4", help="numbers of busy processes beside the command (default 0,2,4)")
    parser.add_argument("--modes", default="policy,0",
                        help="modes: 'policy' (no flag: the default executor and thread policy), 'local' (--executor local: one process, "
                             "the default before #34) and --threads values (default policy,0: 0 is torch's default)")
    parser.add_argument("--rounds", type=int, default=1, help="interleaved rounds of every (mode, load) (default 1)")
    parser.add_argument("--json", type=Path, help="also write every measurement to this JSON file")
    parser.add_argument("--before", type=Path, metavar="CHECKOUT",
                        help="also run each mode's command from this checkout (e.g. a `git worktree` of the commit before a "
                             "change), interleaved with this one's: before and after in the same rounds")
    parser.add_argument("--warm", action="store_true",
                        help="time the warm command instead: each checkout's results directory is filled by one untimed run "
                             "first, then every measured run finds all its cells cached")
    parser.add_argument("extra", nargs="*", help="further `compbench run` arguments, after --, e.g. -- --executor process")
    args = parser.parse_args(argv)
    loads = [int(k) for k in args.busy.split(",")]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    n = cores()
    print(f"{args.suite}: {len(modes)} thread modes x busy {loads} x {args.rounds} round(s) on {n} usable cores "
          f"(load average now {os.getloadavg()[0]:.2f})", file=sys.stderr)
    results = []
    roots = ([args.before.resolve()] if args.before else []) + [ROOT]
    keep = tempfile.TemporaryDirectory(prefix="compbench-warm-")
    warm = {root: Path(keep.name) / f"results-{i}" for i, root in enumerate(roots)} if args.warm else {}
    for root, where in warm.items():  # filled once, untimed; each checkout its own (their stores may differ)
        subprocess.run([sys.executable, "-m", "compbench.cli", "run", "--suite", args.suite, "--results", str(where), "--quiet",
                        *args.extra], cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, capture_output=True, check=False)
    for rnd in range(args.rounds):
        for k in loads:
            for mode in modes:
                for root, label in ([(args.before.resolve(), "before")] if args.before else []) + [(ROOT, "")]:
                    r = run_once(args.suite, mode, k, args.extra, root, warm.get(root))
                    r["round"] = rnd
                    if label:
                        r["mode"] = f"{mode}@{label}"
                    results.append(r)
                    print(f"  round {rnd + 1}, {r['mode']:>6}, {k} busy: {r['wall_s']:.1f} s wall, {r['cpu_s']:.1f} s CPU "
                          f"(exit {r['exit']}; {r['summary'][:90]})", file=sys.stderr, flush=True)
    keep.cleanup()
    print(table(results, n))
    if args.json:
        args.json.write_text(json.dumps({"suite": args.suite, "cores": n, "extra": args.extra, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
