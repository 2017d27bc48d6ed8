"""Benchmarks (issue #17): the `compbench run` command as a user runs it, each time in a fresh process.

    pytest tests/benchmarks/test_bench_cli.py --benchmark-only                  # every bundled suite
    pytest tests/benchmarks/test_bench_cli.py --benchmark-only -m "not slow"    # kernel-limits only

Cold: an empty results directory (every cell trained, every report file written). Warm: the same
command again (every cell cached, the report unchanged). Each round is a new `python -m
compbench.cli run ...` process, so imports, the store, the expectations and the report are all
in the time; extra_info holds the process's user and system CPU seconds (from the kernel's
accounting of the child), which other work on the machine inflates far less than the wall time.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def compbench_run(out: Path, suite: str, *extra: str, codes: tuple[int, ...] = (0,)) -> dict[str, float]:
    """Run `compbench run --suite SUITE --out OUT --quiet EXTRA...` in a new process; its CPU seconds.

    `codes`: the exit codes of a complete run (1: it ran, and some expectation failed)."""
    before = os.times()
    proc = subprocess.run([sys.executable, "-m", "compbench.cli", "run", "--suite", suite, "--out", str(out), "--quiet", *extra],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    after = os.times()
    assert proc.returncode in codes, proc.stdout[-2000:] + proc.stderr[-2000:]
    return {"user": after.children_user - before.children_user, "system": after.children_system - before.children_system,
            "stdout_tail": proc.stdout.strip().splitlines()[0]}


def _timed(benchmark, run, rounds: int) -> None:
    cpu: list[dict[str, float]] = []
    benchmark.pedantic(lambda: cpu.append(run()), rounds=rounds, iterations=1)
    benchmark.extra_info["cpu_user_s"] = [round(c["user"], 2) for c in cpu]
    benchmark.extra_info["cpu_system_s"] = [round(c["system"], 2) for c in cpu]
    benchmark.extra_info["summary_line"] = cpu[-1]["stdout_tail"]
    benchmark.extra_info["load_average"] = os.getloadavg()


@pytest.mark.benchmark(group="cli-kernel-limits")
def test_cli_kernel_limits_cold(benchmark, tmp_path):
    fresh = (tmp_path / f"cold{i}" for i in itertools.count())
    _timed(benchmark, lambda: compbench_run(next(fresh), "kernel-limits"), rounds=1)


@pytest.mark.benchmark(group="cli-kernel-limits")
def test_cli_kernel_limits_cold_process_pool(benchmark, tmp_path):
    fresh = (tmp_path / f"cold{i}" for i in itertools.count())
    _timed(benchmark, lambda: compbench_run(next(fresh), "kernel-limits", "--executor", "process", "--workers", "2"), rounds=1)


@pytest.mark.benchmark(group="cli-kernel-limits")
def test_cli_kernel_limits_warm(benchmark, tmp_path):
    compbench_run(tmp_path, "kernel-limits")
    _timed(benchmark, lambda: compbench_run(tmp_path, "kernel-limits"), rounds=3)
    assert "0 cells run" in benchmark.extra_info["summary_line"]


@pytest.mark.slow
@pytest.mark.benchmark(group="cli-kernel-limits-images")
def test_cli_kernel_limits_images_cold(benchmark, tmp_path):
    fresh = (tmp_path / f"cold{i}" for i in itertools.count())
    _timed(benchmark, lambda: compbench_run(next(fresh), "kernel-limits-images"), rounds=1)


@pytest.mark.slow
@pytest.mark.benchmark(group="cli-kernel-limits-images")
def test_cli_kernel_limits_images_warm(benchmark, tmp_path):
    compbench_run(tmp_path, "kernel-limits-images")
    _timed(benchmark, lambda: compbench_run(tmp_path, "kernel-limits-images"), rounds=3)
    assert "0 cells run" in benchmark.extra_info["summary_line"]


@pytest.mark.slow
@pytest.mark.parametrize(("suite", "code"), [("redundant-input", 0), ("modular-teacher", 1), ("slot-decoder", 0)])
@pytest.mark.benchmark(group="cli-other-suites")
def test_cli_other_suites_cold(benchmark, tmp_path, suite, code):
    """The suites of #15 and #16, whose issues set their own limits (5, 6 and 6 minutes cold).

    modular-teacher exits 1: two of its paper claims do not reproduce at this size (docs/explanation/suites/modular-and-slots.md)."""
    fresh = (tmp_path / f"cold{i}" for i in itertools.count())
    _timed(benchmark, lambda: compbench_run(next(fresh), suite, codes=(code,)), rounds=1)
