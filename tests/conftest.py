"""Benchmarks (tests/benchmarks) run only when asked for: `pytest tests/benchmarks --benchmark-only`."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH_DIR = Path(__file__).parent / "benchmarks"


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:  # type: ignore[no-untyped-def]
    if BENCH_DIR in (collection_path, *collection_path.parents):
        wanted = config.getoption("benchmark_only", False) or config.getoption("benchmark_enable", False)
        return None if wanted else True
    return None


@pytest.fixture(scope="module")
def one_thread():
    """One torch thread for a module of tiny networks: a second thread only adds spin-waiting, and
    bit-for-bit comparisons of float32 results assume one summation order. Restored afterwards."""
    import torch  # not at import time: conftest must load without torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
