"""`compbench.evaluate` keeps no state between calls, stops on Ctrl-C, and pytest takes check's seeds (issue #35, items 3, 10, 20).

Two calls at once, each with its own class named `Net`, get each its own class's results; a call never
changes the `LoadedSuite` it was given; Ctrl-C raises KeyboardInterrupt after keeping the finished
cells; `pytest --compbench-seeds N` reproduces `compbench check --seeds N`.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from tiny_suites import kernel_suite

import compbench
from compbench.adapters import Adapter, AdapterParams, Fitted
from compbench.store import ResultStore
from compbench.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent


def net_predicting(value: float, on_fit=None) -> type[Adapter]:
    """A class named `Net` (always the same module and qualname) whose every prediction, and its info "value", is `value`."""

    class Net(Adapter):
        Params = AdapterParams

        def fit_seeds(self, train, evaluate, seeds):
            if on_fit is not None:
                on_fit()
            shape = np.asarray(evaluate.y, float).shape
            return [Fitted(np.full(shape, value), info={"value": value}) for _ in seeds]

    return Net


@pytest.fixture()
def suite(tmp_path: Path) -> Path:
    path = tmp_path / "kernels.yaml"
    path.write_text(kernel_suite("evalstate", "leak", seeds=2), encoding="utf-8")
    return path


def test_two_concurrent_calls_with_a_class_named_net_each_get_their_own(suite):
    arrived = threading.Barrier(2, timeout=120)
    first_fit = threading.local()

    def meet() -> None:
        # Both calls have added their Net before either trains a second cell: a process-wide name would now
        # name the same class in both.
        if not getattr(first_fit, "done", False):
            first_fit.done = True
            arrived.wait()

    values: dict[float, list[float]] = {}
    failures: list[BaseException] = []

    def call(value: float) -> None:
        try:
            res = compbench.evaluate(suite, models=[net_predicting(value, meet)])
            values[value] = [r.info["value"] for r in res.records]
        except BaseException as exc:  # noqa: BLE001 — reported by the main thread
            failures.append(exc)

    threads = [threading.Thread(target=call, args=(v,)) for v in (0.0, 1.0)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not failures, failures
    assert values == {0.0: [0.0, 0.0, 0.0, 0.0], 1.0: [1.0, 1.0, 1.0, 1.0]}  # two tasks × two seeds each


def test_evaluate_leaves_the_loaded_suite_it_is_given_as_it_was(suite):
    loaded = load_suite(suite)
    before = ([(m.id, m.seeds) for m in loaded.models], [t.id for t in loaded.suite.tasks])
    added = compbench.evaluate(loaded, models=[net_predicting(0.5)], tasks=["add"], seeds=3)
    assert {(r.model, r.task) for r in added.records} == {("Net", "add")}
    assert len(added.records) == 3
    assert ([(m.id, m.seeds) for m in loaded.models], [t.id for t in loaded.suite.tasks]) == before
    again = compbench.evaluate(loaded)  # the suite's own models, on all its tasks, with its own seeds
    assert sorted({(r.model, r.task, r.seed) for r in again.records}) == [
        ("overlap", "add", 0), ("overlap", "te", 0), ("relu", "add", 0), ("relu", "te", 0)]


def test_ctrl_c_keeps_the_finished_cells_and_raises_keyboard_interrupt(suite, tmp_path):
    fits = []

    def second_cell_is_interrupted() -> None:
        fits.append(1)
        if len(fits) == 2:
            raise KeyboardInterrupt

    out = tmp_path / "out"
    model = net_predicting(2.0, second_cell_is_interrupted)
    with pytest.raises(KeyboardInterrupt, match="evaluate\\(\\) interrupted: .* kept in"):
        compbench.evaluate(suite, models=[model], tasks=["*"], out=out)
    store = ResultStore(out / "store")
    kept = sorted((r.model, r.task, r.seed) for r in store.latest().values() if r.model == "Net")
    assert kept == [("Net", "add", 0), ("Net", "add", 1)]  # the first cell (both its seeds), not the interrupted one
    resumed = compbench.evaluate(suite, models=[model], out=out)  # the same model (its closure is its identity)
    assert (resumed.n_cached, resumed.n_run) == (2, 2)  # Net on add is reused; te trains now


@pytest.mark.slow
def test_pytest_reproduces_check_with_seeds_against_its_baseline(tmp_path):
    path = tmp_path / "seeds.yaml"
    path.write_text(kernel_suite("plugseeds", "leak", relu=False).replace(
        "expectations:", "  - {id: small, adapter: mlp, params: {width: 8, max_steps: 20}, tasks: [add]}\nexpectations:"),
        encoding="utf-8")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    results, base = ["--results", str(tmp_path / "res")], str(tmp_path / "base.json")
    recorded = subprocess.run([sys.executable, "-m", "compbench", "baseline", "record", "--suite", str(path), "--seeds", "3",
                               "--out", base, *results, "--quiet"], capture_output=True, text=True, env=env, timeout=600)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    check = subprocess.run([sys.executable, "-m", "compbench", "check", "--suite", str(path), "--seeds", "3",
                            "--baseline", base, *results, "--quiet"], capture_output=True, text=True, env=env, timeout=600)
    assert check.returncode == 0, check.stdout + check.stderr

    def plugin(*extra: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", str(path), "-p", "no:cacheprovider", "-q", "--compbench-results",
                               str(tmp_path / "res"), "--compbench-baseline", base, *extra],
                              capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path)

    passed = plugin("--compbench-seeds", "3")
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "4 passed" in passed.stdout  # overlap on add and te, small on add, the outcome
    suites_seeds = plugin()  # the suite's one seed against a baseline of three: what check without --seeds says too
    assert suites_seeds.returncode == 1, suites_seeds.stdout
    assert "fewer seeds" in suites_seeds.stdout or "fewer-seeds" in suites_seeds.stdout, suites_seeds.stdout
    refused = plugin("--compbench-seeds", "0")
    assert refused.returncode == 4 and "--compbench-seeds" in refused.stderr, refused.stderr
