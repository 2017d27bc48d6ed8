"""Fixtures every test file may use: `suite_file`, `run_cli`, `run_cli_process` (tests/tiny_suites.py implements them),
`one_thread`. Benchmarks (tests/benchmarks) run only when asked for: `pytest tests/benchmarks --benchmark-only`."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

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


@pytest.fixture(scope="session")
def once_across_workers(tmp_path_factory, worker_id) -> Callable[..., tuple[Path, Any]]:  # type: ignore[no-untyped-def]
    """`once_across_workers(name, produce)`: `produce(folder)` run once per test session, not once per xdist worker
    that happens to run one of its tests (a module fixture is set up again in every worker: the tutorial's blocks
    ran twice, 37 s each); (folder, value), the value pickled beside the folder for the other workers to read."""

    def once(name: str, produce: Callable[[Path], Any]) -> tuple[Path, Any]:
        # every worker's basetemp sits in the session's one folder (pytest-xdist's documented recipe)
        root = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
        folder, saved = root / f"once-{name}", root / f"once-{name}.pickle"
        with FileLock(str(saved) + ".lock"):
            if not saved.is_file():
                folder.mkdir()
                saved.write_bytes(pickle.dumps(produce(folder)))
            return folder, pickle.loads(saved.read_bytes())

    return once


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
