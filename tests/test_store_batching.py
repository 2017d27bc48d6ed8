"""A run stores the results that arrive together in one transaction (issue #34), and still loses none it received.

Transactions are counted, not timed: every connection the store opens in this process reports its statements
(`sqlite3`'s trace callback), and a transaction that inserted records counts once at its COMMIT.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from compbench.cli import main
from compbench.runner import run as run_module
from compbench.runner.progress import Progress
from compbench.store import ResultStore
from tiny_suites import kernel_suite

# 40 swept overlap kernels and a ReLU NTK on two tasks: 82 millisecond jobs, one cell each, as kernel-limits' are.
SWEEP = kernel_suite("sweep", sweep=40)
JOBS = 82


@pytest.fixture
def transactions(monkeypatch) -> dict[str, int]:
    """Counts, in this process, of committed transactions that inserted records, and of those that released claims."""
    counts = {"records": 0, "claims released": 0}
    connect = sqlite3.connect

    def counting(*args, **kwargs):
        db = connect(*args, **kwargs)
        if str(args[0] if args else kwargs.get("database", "")).endswith("records.sqlite"):
            seen: set[str] = set()

            def trace(sql: str) -> None:
                head = sql.lstrip().upper()
                if head.startswith("BEGIN"):
                    seen.clear()
                elif head.startswith("INSERT INTO RECORDS"):
                    seen.add("records")
                elif head.startswith("DELETE FROM CLAIMS"):
                    seen.add("claims released")
                elif head.startswith("COMMIT"):
                    for what in seen:
                        counts[what] += 1
                    seen.clear()

            db.set_trace_callback(trace)
        return db

    monkeypatch.setattr(sqlite3, "connect", counting)
    return counts


def run(suite: Path, out: Path, *args: str) -> int:
    return main(["run", "--suite", str(suite), "--results", str(out), "--device", "cpu", "-q", "--format", "md", *args])


def stored(out: Path) -> dict[str, tuple]:
    """Each current record's key → its status, metrics and predictions."""
    store = ResultStore(out / "store")
    try:
        return {k: (r.status.value, r.metrics, r.predictions) for k, r in store.latest().items()}
    finally:
        store.close()


def rows(out: Path) -> tuple[int, int]:
    """(rows, current rows) of the store's records table."""
    with sqlite3.connect(out / "store" / "records.sqlite") as db:
        return db.execute("SELECT COUNT(*), SUM(superseded = 0) FROM records").fetchone()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict[str, tuple]:
    """The suite's records as the in-process executor stores them."""
    base = tmp_path_factory.mktemp("reference")
    (base / "sweep.yaml").write_text(SWEEP)
    assert run(base / "sweep.yaml", base / "out", "--executor", "local") == 0
    out = stored(base / "out")
    assert len(out) == JOBS
    return out


def test_a_cold_pool_run_commits_what_arrives_together_in_one_transaction(tmp_path, transactions, monkeypatch, reference):
    # A window longer than the run: every result the workers send is committed with the claims' release, once.
    # One transaction per job before (82).
    monkeypatch.setattr(run_module, "COMMIT_WINDOW", 3600.0, raising=False)
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    assert run(tmp_path / "sweep.yaml", tmp_path / "out", "--executor", "process", "--workers", "2") == 0
    assert transactions["records"] == 1
    assert stored(tmp_path / "out") == reference
    assert rows(tmp_path / "out") == (JOBS, JOBS)


def test_with_no_window_every_wait_commits_what_arrived_and_nothing_is_lost(tmp_path, transactions, monkeypatch, reference):
    # Committed each time the parent is about to wait for its workers: never more transactions than jobs.
    monkeypatch.setattr(run_module, "COMMIT_WINDOW", 0.0, raising=False)
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    assert run(tmp_path / "sweep.yaml", tmp_path / "out", "--executor", "process", "--workers", "2") == 0
    assert 1 <= transactions["records"] <= JOBS
    assert stored(tmp_path / "out") == reference
    assert rows(tmp_path / "out") == (JOBS, JOBS)


def test_in_process_each_batch_of_jobs_is_one_transaction_with_its_claims_released(tmp_path, transactions, monkeypatch,
                                                                                   reference):
    # In this process quick jobs run in batches (one claim transaction each): their records go in that transaction.
    monkeypatch.setattr(run_module, "COMMIT_WINDOW", 3600.0, raising=False)
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    assert run(tmp_path / "sweep.yaml", tmp_path / "out", "--executor", "local") == 0
    assert transactions["records"] == transactions["claims released"] - 1  # the last: release_all as the run closes
    assert stored(tmp_path / "out") == reference


@pytest.mark.parametrize("executor", ["process", "local"])
def test_ctrl_c_commits_every_result_the_run_had_received(tmp_path, monkeypatch, reference, executor):
    # Nothing is committed before the run stops (the window is longer than the run): Ctrl-C after the 30th job has
    # been handed to the progress display still leaves all 30 in the store, and nothing else.
    monkeypatch.setattr(run_module, "COMMIT_WINDOW", 3600.0, raising=False)
    shown: list[str] = []
    advance = Progress.advance

    def interrupting(self, job, statuses, cached):
        if len(shown) == 30:
            raise KeyboardInterrupt
        shown.append(job.keys[0])
        advance(self, job, statuses, cached)

    monkeypatch.setattr(Progress, "advance", interrupting)
    (tmp_path / "sweep.yaml").write_text(SWEEP)
    pool = ["--workers", "2"] if executor == "process" else []
    assert run(tmp_path / "sweep.yaml", tmp_path / "out", "--executor", executor, *pool) == 130
    kept = stored(tmp_path / "out")
    assert set(shown) <= set(kept)
    assert len(kept) >= 30
    assert kept == {k: reference[k] for k in kept}
    with sqlite3.connect(tmp_path / "out" / "store" / "records.sqlite") as db:
        assert db.execute("SELECT COUNT(*) FROM claims").fetchone() == (0,)


def test_staged_records_of_one_key_leave_one_current_row(tmp_path):
    # A batch holding two records of one cell (a retried error, then its result): the later is the current one.
    store = ResultStore(tmp_path / "store")
    try:
        store.open(write=True)
        first = _record("k1", "error")
        store.append([first])
        store.stage([_record("k1", "error"), _record("k2", "ok")])
        store.stage([_record("k1", "ok")])
        assert store.commit_staged(3600.0) is not None  # not yet due: still staged
        assert {k: r.status.value for k, r in store.latest().items()} == {"k1": "ok", "k2": "ok"}  # a read commits it
        assert store.commit_staged() is None
    finally:
        store.close()
    assert rows(tmp_path) == (4, 2)


def _record(key: str, status: str):
    from compbench.records import CellRecord

    return CellRecord(key=key, task="t", model="m", seed=0, status=status, metrics={"heldout_r2": 1.0} if status == "ok" else {})
