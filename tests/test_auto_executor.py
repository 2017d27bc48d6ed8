"""The default executor, `auto` (compbench.runner.schedule): a pool of one-thread workers on every usable core when a
run has enough to compute, this process otherwise; the same records either way."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from compbench.runner import schedule
from compbench.runner.progress import NETWORK_COST
from compbench.runner.schedule import POOL_MIN_COST, WORKER_MEMORY, choose, longest_first
from compbench.store import ResultStore
from tiny_suites import TINY, cli

GiB = 1024**3


def job(n_train: int, seeds: int = 2, network: bool = True) -> SimpleNamespace:
    """A stand-in job with what the ETA's cost reads: seeds, the training mask, the model's tags."""
    return SimpleNamespace(seeds=tuple(range(seeds)), task=SimpleNamespace(data=SimpleNamespace(train_mask=np.ones(n_train, bool))),
                           model=SimpleNamespace(tags=["networks"] if network else []))


BIG = [job(100), job(100)]  # 2 x (2 seeds x 100 samples x NETWORK_COST) = 2 x POOL_MIN_COST


def test_a_run_with_enough_work_goes_to_one_worker_per_core():
    assert sum(2 * 100 * NETWORK_COST for _ in BIG) >= POOL_MIN_COST
    c = choose(BIG, "cpu", cores=2, memory=None)
    assert (c.executor, c.workers) == ("process", 2)
    assert choose(BIG * 8, "cpu", cores=16, memory=None).workers == 16
    assert choose(BIG, "cpu", cores=16, memory=None).workers == 2  # never more workers than jobs
    assert choose(BIG * 3, "cpu", cores=2, workers=3, memory=None).workers == 3  # --workers is honoured


@pytest.mark.parametrize("jobs, kwargs, why", [
    (BIG, {"cores": 1}, "one usable core"),
    (BIG, {"cores": 2, "workers": 1}, "--workers 1"),
    (BIG[:1], {"cores": 2}, "fewer than two cells"),
    ([job(10, network=False)] * 50, {"cores": 2}, "a small run"),  # 50 x 2 x 10 kernel samples = 1,000 < POOL_MIN_COST
    (BIG, {"cores": 2, "fail_fast": True}, "--fail-fast"),
])
def test_a_run_a_pool_cannot_help_stays_in_this_process(jobs, kwargs, why):
    c = choose(jobs, "cpu", memory=None, **kwargs)
    assert (c.executor, c.workers) == ("local", 1) and why in c.reason
    c = choose(BIG, "cuda", cores=8, memory=None)
    assert c.executor == "local" and "cuda" in c.reason


def test_the_pool_is_bounded_by_the_memory_available():
    # Room for this process plus one worker per WORKER_MEMORY beyond it.
    assert choose(BIG * 4, "cpu", cores=8, memory=3 * WORKER_MEMORY + GiB // 2).workers == 4
    assert choose(BIG * 4, "cpu", cores=8, memory=WORKER_MEMORY).workers == 2
    c = choose(BIG * 4, "cpu", cores=8, memory=WORKER_MEMORY - 1)
    assert c.executor == "local" and "room for one process" in c.reason


def test_a_cell_timeout_puts_even_one_job_in_a_worker():
    c = choose(BIG[:1], "cpu", cores=2, memory=None, cell_timeout=5.0)
    assert (c.executor, c.workers) == ("process", 1)


def test_jobs_go_longest_first_ties_in_the_suites_order():
    jobs = [job(10, network=False), job(50), job(10, network=False), job(200), job(50)]
    assert longest_first(jobs) == [3, 1, 4, 0, 2]


def _predictions(out) -> dict[str, list]:
    return {k: r.get("predictions") for k, r in ResultStore(out / "store").latest().items()}


def test_the_default_run_uses_the_pool_and_stores_what_this_process_would(tmp_path, monkeypatch):
    monkeypatch.setattr(schedule, "usable_cores", lambda: 2)
    monkeypatch.setattr(schedule, "POOL_MIN_COST", 0)  # TINY is small: the pool is forced to meet it
    (tmp_path / "tiny.yaml").write_text(TINY)
    pooled = cli("run", "--suite", str(tmp_path / "tiny.yaml"), "--results", str(tmp_path / "p"), "--quiet", "--device", "cpu")
    assert pooled.rc == 0, pooled.err
    assert "(2 worker processes)" in pooled.out
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert (summary["executor"], summary["workers"]) == ("process", 2)
    assert summary["executor_reason"] == "2 one-thread workers, one per usable core"
    local = cli("run", "--suite", str(tmp_path / "tiny.yaml"), "--results", str(tmp_path / "l"), "--quiet", "--device", "cpu",
                "--executor", "local")
    assert local.rc == 0, local.err
    assert _predictions(tmp_path / "p") == _predictions(tmp_path / "l")  # bit for bit: one thread in every process
    assert "| process, 2 workers (auto: 2 one-thread workers, one per usable core) |" in (
        tmp_path / "p" / "leaderboard.md").read_text()
    # Warm: nothing to compute, nothing started.
    warm = cli("run", "--suite", str(tmp_path / "tiny.yaml"), "--results", str(tmp_path / "p"), "--quiet", "--device", "cpu")
    assert warm.rc == 0 and " 0 cells run" in warm.out and "worker process" not in warm.out
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert (summary["executor"], summary["executor_reason"]) == ("local", "fewer than two cells to compute")


def test_fail_fast_keeps_the_auto_executor_in_this_process(tmp_path, monkeypatch):
    monkeypatch.setattr(schedule, "usable_cores", lambda: 2)
    monkeypatch.setattr(schedule, "POOL_MIN_COST", 0)
    (tmp_path / "tiny.yaml").write_text(TINY)
    r = cli("run", "--suite", str(tmp_path / "tiny.yaml"), "--results", str(tmp_path / "p"), "--quiet", "--device", "cpu",
            "--fail-fast")
    assert r.rc == 0, r.err
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert (summary["executor"], summary["executor_reason"]) == ("local", "--fail-fast runs in this process")
    r = cli("run", "--suite", str(tmp_path / "tiny.yaml"), "--results", str(tmp_path / "q"), "--quiet", "--fail-fast",
            "--executor", "process")
    assert r.rc == 2 and "--fail-fast works with --executor local only" in r.err
