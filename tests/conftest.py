"""Fixtures every test file may use: `suite_file`, `run_cli`, `run_cli_process` (tests/tiny_suites.py implements them),
`one_thread`. Benchmarks (tests/benchmarks) run only when asked for: `pytest tests/benchmarks --benchmark-only`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import tiny_suites

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


@pytest.fixture
def suite_file(tmp_path: Path) -> Callable[..., Path]:
    """`suite_file(base="te", *, file="suite.yaml", **overrides)`: the scenario tests/suites/BASE.yaml with top-level
    keys replaced, written under this test's tmp_path; its path (tiny_suites.write_suite)."""
    return lambda base="te", **overrides: tiny_suites.write_suite(tmp_path, base, **overrides)


@pytest.fixture
def run_cli() -> Callable[..., tiny_suites.Result]:
    """`run_cli(*argv)`: `compbench ARGV` in this process; its exit code, stdout and stderr (tiny_suites.cli)."""
    return tiny_suites.cli


@pytest.fixture
def run_cli_process() -> Callable[..., object]:
    """`run_cli_process(*argv, cwd=, path=, env=, timeout=)`: `compbench ARGV` in its own process, run to its end
    (tiny_suites.cli_process), for what needs a real process: signals, exit at import, a fresh interpreter."""
    return tiny_suites.cli_process
