"""Benchmark: `compbench run --suite kernel-limits` wall time, cold (empty cache) and warm (cached)."""

from __future__ import annotations

import pytest

from compbench.runner.run import run_suite
from compbench.suite import load_suite


@pytest.mark.benchmark(group="kernel-limits")
def test_kernel_limits_cold(benchmark, tmp_path):
    counter = iter(range(100))
    benchmark.pedantic(
        lambda: run_suite(load_suite("kernel-limits"), tmp_path / str(next(counter)), device="cpu", progress=False),
        rounds=1, iterations=1,
    )


@pytest.mark.benchmark(group="kernel-limits")
def test_kernel_limits_warm(benchmark, tmp_path):
    run_suite(load_suite("kernel-limits"), tmp_path, device="cpu", progress=False)
    summary = benchmark.pedantic(
        lambda: run_suite(load_suite("kernel-limits"), tmp_path, device="cpu", progress=False), rounds=3, iterations=1
    )
    assert summary.n_run == 0
