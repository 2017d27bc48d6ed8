"""Benchmarks (tests/benchmarks) run only when asked for: `pytest tests/benchmarks --benchmark-only`."""

from __future__ import annotations

from pathlib import Path

BENCH_DIR = Path(__file__).parent / "benchmarks"


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:  # type: ignore[no-untyped-def]
    if BENCH_DIR in (collection_path, *collection_path.parents):
        wanted = config.getoption("benchmark_only", False) or config.getoption("benchmark_enable", False)
        return None if wanted else True
    return None
