"""Print compbench's benchmark results as a markdown table of ratios (the tables in docs/performance.md).

    python tests/benchmarks/table.py                 # run every benchmark, then print
    python tests/benchmarks/table.py -k ntk          # only some (pytest -k expression)
    python tests/benchmarks/table.py --json FILE     # print from an earlier --benchmark-json file

One row per benchmark group: each entry's median time and how many times slower it is than the
group's fastest entry (×1.0 for the fastest), the compbench path being the one to beat. Entries
that record `gflops` in extra_info (tests/benchmarks/test_bench_flops.py) are listed with it.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run_benchmarks(json_path: Path, select: str | None) -> None:
    """Run the benchmarks with pytest-benchmark, writing its JSON report to json_path."""
    cmd = [sys.executable, "-m", "pytest", str(HERE), "--benchmark-only", f"--benchmark-json={json_path}",
           "-p", "no:cacheprovider", "-q"]
    if select:
        cmd += ["-k", select]
    subprocess.run(cmd, check=True)


def _fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds * 1e6:.0f} µs"


def _label(bench: dict) -> str:
    name = bench["name"].split("[", 1)
    return name[1].rstrip("]") if len(name) == 2 else bench["name"].removeprefix("test_")


def table(report: dict) -> str:
    """The markdown table for one pytest-benchmark JSON report."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for bench in report["benchmarks"]:
        groups[bench.get("group") or bench["name"]].append(bench)
    machine = report.get("machine_info", {})
    cpu = machine.get("cpu", {})
    lines = [
        f"Machine: {cpu.get('brand_raw', platform.processor() or '?')}, {cpu.get('count', '?')} logical CPUs, "
        f"Python {machine.get('python_version', '?')}; median of each benchmark's rounds.",
        "",
        "| group | entries: median (× the fastest) |",
        "|---|---|",
    ]
    flops = []
    for group, benches in sorted(groups.items()):
        fastest = min(b["stats"]["median"] for b in benches)
        cells = []
        for b in sorted(benches, key=lambda b: b["stats"]["median"]):
            median = b["stats"]["median"]
            cells.append(f"{_label(b)}: {_fmt_time(median)} (×{median / fastest:.1f})")
            if "gflops" in b.get("extra_info", {}):
                info = b["extra_info"]
                flops.append((_label(b), info["gflop"], median, info["gflops"], info.get("useful_gflops")))
        lines.append(f"| {group} | {'; '.join(cells)} |")
    if flops:
        lines += ["", "| computation | GFLOP | median | GFLOP/s | GFLOP/s of the whole product |", "|---|---|---|---|---|"]
        lines += [f"| {name} | {gflop:.2f} | {_fmt_time(t)} | {rate:.1f} | {'—' if useful is None else f'{useful:.1f}'} |"
                  for name, gflop, t, rate, useful in flops]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Command-line entry: run (or read) the benchmarks and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", type=Path, help="print from this pytest-benchmark JSON file instead of running")
    parser.add_argument("-k", dest="select", help="pytest -k expression selecting benchmarks")
    args = parser.parse_args(argv)
    if args.json is None:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "bench.json"
            run_benchmarks(path, args.select)
            report = json.loads(path.read_text())
    else:
        report = json.loads(args.json.read_text())
    print(table(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
