"""Runs that survive: resume after SIGKILL, Ctrl-C, concurrent runs, failure isolation, determinism."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

from compbench.adapters import Adapter, AdapterParams, register_adapter
from compbench.cli import main
from compbench.records import CellRecord
from compbench.runner.run import run_suite
from compbench.store import ResultStore, StoreSchemaError
from compbench.suite import parse_suite
from tiny_suites import cli_popen, suite_text

# ~300 small jobs (a sweep of overlap kernels on CD) plus a few MLP cells: long enough to interrupt.
SLOW = """\
name: slow
seeds: 2
tasks:
  - {id: cd-2, family: context_dependence, params: {preset: CD-2}}
  - {id: te, family: transitive_equivalence}
models:
  - id: lazy
    adapter: mlp
    params: {width: 128, init_scale: 1.0, lr: 0.05, max_steps: 2000, loss_tol: 1.0e-3}
  - id: sweep
    adapter: kernel
    params: {kernel: overlap, weights: [0.0, 0.0, 0.0, 1.0], relative: {1: 0.0}, objective: svm}
    sweep: {weights.2: {linspace: [0.01, 0.6, 20]}, relative.1: {linspace: [0.0, 0.5, 15]}}
    skip_invalid: true
    tasks: [cd-2]
"""


def stored(out: Path) -> dict[str, dict]:
    return ResultStore(out / "store").latest()


def predictions(records: dict[str, dict]) -> dict[str, list]:
    return {k: r.get("predictions") for k, r in records.items()}


def default_sigint() -> None:
    """In the child before it starts: Ctrl-C as a terminal delivers it. A shell without job control starts background
    commands with SIGINT ignored, and Python then keeps ignoring it (a CI run launched with `&` did)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cli(*args: str) -> subprocess.Popen:
    return cli_popen(*args, preexec_fn=default_sigint)


def count_rows(out: Path) -> int:
    path = out / "store" / "records.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as db:
            return db.execute("SELECT COUNT(*) FROM records").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def wait_for_rows(out: Path, proc: subprocess.Popen, n: int, timeout: float = 60) -> None:
    end = time.time() + timeout
    while count_rows(out) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.time() < end, "no records appeared"
        time.sleep(0.05)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, dict]:
    out = tmp_path_factory.mktemp("ref")
    run_suite(parse_suite(SLOW, "slow.yaml"), out, device="cpu", progress=False)
    return stored(out)


def start_slow_run(tmp_path: Path, rows: int) -> tuple[Path, Path, subprocess.Popen]:
    """`compbench run` of SLOW in a subprocess, returned once `rows` records are stored."""
    suite = tmp_path / "slow.yaml"
    suite.write_text(SLOW)
    out = tmp_path / "out"
    proc = cli("run", "--suite", str(suite), "--out", str(out), "--quiet", "--device", "cpu")
    wait_for_rows(out, proc, rows)
    return suite, out, proc


@pytest.mark.slow
def test_sigkill_loses_only_jobs_in_flight_and_resume_equals_uninterrupted(tmp_path, reference):
    suite, out, proc = start_slow_run(tmp_path, 20)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    before = stored(out)
    assert 20 <= len(before) < len(reference)
    summary = run_suite(parse_suite(SLOW, str(suite)), out, device="cpu", progress=False)
    assert summary.n_cached == len(before)  # nothing finished was recomputed
    assert summary.n_run == len(reference) - len(before)
    after = stored(out)
    assert predictions(after) == predictions(reference)


@pytest.mark.slow
def test_ctrl_c_keeps_finished_cells_and_says_how_to_resume(tmp_path):
    _, out, proc = start_slow_run(tmp_path, 10)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "interrupted: finished cells are kept; run the same command again to resume" in err
    assert "Traceback" not in err
    n = len(stored(out))
    assert n >= 10
    assert (out / "leaderboard.md").exists()  # the partial report is written too


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["auto", "process"])
def test_two_concurrent_runs_share_the_store(tmp_path, reference, executor):
    # A process pool claims its jobs as this process does, so a second run waits for them instead of computing them again.
    suite = tmp_path / "slow.yaml"
    suite.write_text(SLOW)
    out = tmp_path / "out"
    procs = [cli("run", "--suite", str(suite), "--out", str(out), "--quiet", "--device", "cpu", "--executor", executor)
             for _ in range(2)]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
    rows = count_rows(out)
    after = stored(out)
    assert predictions(after) == predictions(reference)
    # The second run re-checks the store before each job, so most work is not done twice.
    assert rows < 1.5 * len(reference)


OK_MODEL = "{id: ok, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.3, 1.0]}}"
DIVERGE = suite_text(name="isolate", seeds=2, models=[OK_MODEL, "{id: nan, adapter: mlp, params: {width: 64, lr: 1.0e+6, max_steps: 50}}",
                                                      "{id: boom, adapter: raises}"])


class RaisesParams(AdapterParams):
    pass


@register_adapter("raises")
class RaisingAdapter(Adapter):
    Params = RaisesParams

    def fit_seeds(self, train, evaluate, seeds):
        raise RuntimeError("adapter exploded")


def test_diverging_and_raising_cells_are_isolated(tmp_path, capsys):
    suite = tmp_path / "isolate.yaml"
    suite.write_text(DIVERGE)
    assert main(["run", "--suite", str(suite), "--out", str(tmp_path / "o"), "--quiet"]) == 1
    recs = {(r["model"], r["seed"]): r for r in stored(tmp_path / "o").values()}
    assert recs[("ok", 0)]["status"] == "ok"
    assert recs[("nan", 0)]["status"] == "error" and "diverged" in recs[("nan", 0)]["error"]
    assert recs[("boom", 1)]["status"] == "error" and recs[("boom", 1)]["error"] == "RuntimeError: adapter exploded"
    assert "4 failed" in capsys.readouterr().out  # 2 seeds × (nan, boom); the kernel cell is fine
    board = (tmp_path / "o" / "leaderboard.md").read_text()
    assert "| nan " in board and "error" in board


def test_same_key_gives_identical_predictions_across_runs_and_workers(tmp_path, reference):
    one = run_suite(parse_suite(SLOW, "slow.yaml"), tmp_path / "a", device="cpu", progress=False)
    two = run_suite(parse_suite(SLOW, "slow.yaml"), tmp_path / "b", device="cpu", progress=False, executor="process", workers=2)
    by_key = lambda s: {r["key"]: r.get("predictions") for r in s.records}  # noqa: E731
    assert by_key(one) == by_key(two) == predictions(reference)


@pytest.mark.slow
def test_ray_executor_end_to_end(tmp_path):
    pytest.importorskip("ray")
    tiny = SLOW.replace("sweep: {weights.2: {linspace: [0.01, 0.6, 20]}, relative.1: {linspace: [0.0, 0.5, 15]}}", "sweep: {weights.2: [0.2, 0.4]}")
    local = run_suite(parse_suite(tiny, "t.yaml"), tmp_path / "l", device="cpu", progress=False)
    ray = run_suite(parse_suite(tiny, "t.yaml"), tmp_path / "r", device="cpu", progress=False, executor="ray")
    assert ray.n_run == local.n_run == len(local.records)
    assert {r["key"]: r.get("predictions") for r in ray.records} == {r["key"]: r.get("predictions") for r in local.records}


def test_store_of_another_schema_version_is_refused(tmp_path):
    run_suite(parse_suite(suite_text(name="isolate", seeds=2, models=[OK_MODEL]), "x.yaml"),
              tmp_path, device="cpu", progress=False)
    with sqlite3.connect(tmp_path / "store" / "records.sqlite") as db:
        db.execute("UPDATE meta SET value = '0' WHERE name = 'schema_version'")
    with pytest.raises(StoreSchemaError, match="store schema version 0 != 2"):
        ResultStore(tmp_path / "store").latest()


def test_records_are_plain_json(reference):
    rec = next(iter(reference.values()))
    stored = rec.to_dict()
    assert json.loads(json.dumps(stored)) == stored and CellRecord.from_dict(stored) == rec
    assert np.isfinite(rec.wall_time)
