"""Results that cannot be lost or misreported: concurrent --force, a store deleted mid-run, --force on
one model, reports after a rename or from a shared store, stale claims, SIGTERM, and store files that
are not usable compbench stores (each a clear message and exit 2, never a traceback, never repaired)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compbench.cli import main
from compbench.runner.run import SuiteRunner
from compbench.store import ResultStore, claim_is_live, process_start_time
from compbench.suite import parse_suite
from tiny_suites import cli_popen as cli
from tiny_suites import suite_text

# ~120 small kernel jobs: long enough to interrupt, delete or race, short enough to run twice.
SLOW = """\
name: slow
seeds: 2
tasks:
  - {id: cd-2, family: context_dependence, params: {preset: CD-2}}
models:
  - id: sweep
    adapter: kernel
    params: {kernel: overlap, weights: [0.0, 0.0, 0.0, 1.0], relative: {1: 0.0}, objective: svm}
    sweep: {weights.2: {linspace: [0.01, 0.6, 12]}, relative.1: {linspace: [0.0, 0.5, 10]}}
    skip_invalid: true
"""

TINY = suite_text(name="tiny", seeds=2, models=["{id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.3, 1.0]}}"],
                 expectations=["{id: chance, source: {paper: compbench, threshold: a test fixture}, claim: at_chance, "
                               "models: [k], tasks: [te]}"])
INTERRUPTED = "interrupted: finished cells are kept; run the same command again to resume"

# A run that is surely still running when a test acts on it: each job of this file model sleeps 0.1 s, 60 jobs (of
# 2 seeds, one cell each: the model is deterministic). SLOW's kernel jobs take milliseconds: a run of it could end,
# and be writing its report, before the test saw 5 rows stored and sent its SIGTERM, which then met the report.
PACED_MODEL = """\
import time

import numpy as np

from compbench.adapters import Adapter, AdapterParams, Fitted


class PacedParams(AdapterParams):
    ridge: float = 1.0


class Paced(Adapter):
    Params = PacedParams
    deterministic = True

    def fit_seeds(self, train, evaluate, seeds):
        time.sleep(0.1)
        x_tr = np.asarray(train.x, float).reshape(len(train), -1)
        x_ev = np.asarray(evaluate.x, float).reshape(len(evaluate), -1)
        alpha = np.linalg.solve(x_tr @ x_tr.T + self.params.ridge * np.eye(len(train)), np.asarray(train.y, float))
        return [Fitted(x_ev @ x_tr.T @ alpha) for _ in seeds]
"""
PACED = """\
name: paced
seeds: 2
tasks:
  - {id: add, family: additive, params: {values: [[0, 1, 2, 3], [0, 2, 4, 6]], anchors: [[1], [1]]}}
models:
  - {id: paced, adapter: paced.py:Paced, sweep: {ridge: {linspace: [0.1, 6.0, 60]}}}
"""


def paced_suite(tmp_path: Path) -> Path:
    """PACED and its model file, written side by side; the suite's path."""
    (tmp_path / "paced.py").write_text(PACED_MODEL)
    return write(tmp_path, "paced.yaml", PACED)


def suite_keys_of(path: Path, out: Path) -> set[str]:
    """The cell keys of the suite file at `path` (its file models found beside it)."""
    runner = SuiteRunner(parse_suite(path.read_text(), str(path), path=path), out, device="cpu")
    return {k for job in runner.jobs for k in job.keys}


def store_path(out: Path) -> Path:
    return out / "store" / "records.sqlite"


def query(out: Path, sql: str) -> list[tuple]:
    """Read the store without creating or changing anything (read-only URI)."""
    if not store_path(out).exists():
        return []
    try:
        with sqlite3.connect(f"file:{store_path(out)}?mode=ro", uri=True, timeout=10) as db:
            return db.execute(sql).fetchall()
    except sqlite3.OperationalError:  # not created yet
        return []


def keys_of(out: Path) -> list[str]:
    return [k for (k,) in query(out, "SELECT key FROM records")]


def wait_for_rows(out: Path, proc: subprocess.Popen, n: int, timeout: float = 120) -> None:
    end = time.time() + timeout
    while len(keys_of(out)) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.time() < end, "no records appeared"
        time.sleep(0.05)


def suite_keys(text: str, out: Path) -> set[str]:
    runner = SuiteRunner(parse_suite(text, "s.yaml"), out, device="cpu")
    return {k for job in runner.jobs for k in job.keys}


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# -- #14.1: --force never deletes the store; a store deleted under a run stops it -----------------------


@pytest.mark.slow
def test_concurrent_force_run_recomputes_in_the_same_file_and_loses_nothing(tmp_path):
    suite, out = write(tmp_path, "slow.yaml", SLOW), tmp_path / "out"
    first = cli("run", "--suite", str(suite), "--out", str(out), "--quiet", "--device", "cpu")
    wait_for_rows(out, first, 10)
    inode = store_path(out).stat().st_ino
    before, started = set(keys_of(out)), time.time()
    forced = cli("run", "--suite", str(suite), "--out", str(out), "--quiet", "--device", "cpu", "--force")
    for proc in (first, forced):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
    assert store_path(out).stat().st_ino == inode  # the same file throughout: nothing was deleted
    rows = query(out, "SELECT key, created FROM records WHERE superseded = 0")
    assert sorted(k for k, _ in rows) == sorted(suite_keys(SLOW, out))  # every cell, each exactly once
    created = dict(rows)
    assert all(created[k] >= started for k in before)  # --force recomputed what was stored before it began
    assert query(out, "SELECT * FROM claims") == []


@pytest.mark.slow
def test_store_deleted_mid_run_stops_the_run_loudly(tmp_path):
    suite, out = paced_suite(tmp_path), tmp_path / "out"
    proc = cli("run", "--suite", str(suite), "--out", str(out), "--quiet", "--device", "cpu")
    wait_for_rows(out, proc, 10)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{store_path(out)}{suffix}").unlink(missing_ok=True)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert f"{store_path(out)} was deleted while this run was writing to it" in err
    assert "Traceback" not in err
    assert not store_path(out).exists()  # no ghost store written in its place


# -- #14.2: --force --model recomputes exactly the selected cells ----------------------------------------

TWO_MODELS = suite_text(name="x", seeds=2, models=["{id: a, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.3, 1.0]}}",
                                                  "{id: b, adapter: kernel, params: {kernel: relu_ntk}}"])
OTHER_SUITE = suite_text(name="y", seeds=2, models=["{id: c, adapter: kernel, params: {kernel: relu_nngp}}"])


def test_force_on_one_model_recomputes_only_its_cells(tmp_path, capsys):
    x, y, out = write(tmp_path, "x.yaml", TWO_MODELS), write(tmp_path, "y.yaml", OTHER_SUITE), str(tmp_path / "out")
    assert main(["run", "--suite", str(x), "--out", out, "--quiet", "--format", "md"]) == 0
    # y shares x's store; a results directory holds one suite's report, so y's cells come from a
    # command that only runs cells.
    y_cells = ["baseline", "record", "--suite", str(y), "--results", out, "--quiet", "--out", str(tmp_path / "y.json")]
    assert main(y_cells) == 0
    # the current rows (a replaced row is kept, marked superseded: issue #37)
    sql = "SELECT id, created, json_extract(record, '$.model') FROM records WHERE superseded = 0 ORDER BY id"
    before = query(Path(out), sql)
    assert {m for *_, m in before} == {"a", "b", "c"}
    capsys.readouterr()
    assert main(["run", "--suite", str(x), "--out", out, "--quiet", "--format", "md", "--force", "--model", "a"]) == 0
    assert "1 cells run, 0 reused" in capsys.readouterr().out
    after = query(Path(out), sql)
    assert [r for r in after if r[2] != "a"] == [r for r in before if r[2] != "a"]  # untouched rows, same ids
    old_a, new_a = [r for r in before if r[2] == "a"], [r for r in after if r[2] == "a"]
    assert len(new_a) == len(old_a) and min(r[0] for r in new_a) > max(r[0] for r in before)  # replaced, not added
    kept = query(Path(out), "SELECT id FROM records WHERE superseded = 1 ORDER BY id")
    assert [r[0] for r in kept] == [r[0] for r in old_a]  # the replaced rows are kept, marked superseded
    for command in (["run", "--suite", str(x), "--out", out, "--quiet", "--format", "md"], y_cells):
        assert main(command) == 0
        assert ": 0 cells run" in capsys.readouterr().out  # everything else is still served from the cache


# -- #14.4: the report selects records as the run does (renames, shared cells) ---------------------------


def test_report_after_a_rename_and_from_a_shared_store_matches_the_run(tmp_path, capsys):
    out = str(tmp_path / "out")
    other = write(tmp_path, "other.yaml", TINY.replace("name: tiny", "name: other").replace("id: k,", "id: m,")
                  .replace("models: [k]", "models: [m]"))
    # Another suite's cells in the same store (a results directory holds one suite's report, so they
    # come from `baseline record`, which only runs cells, here).
    assert main(["baseline", "record", "--suite", str(other), "--results", out, "--quiet",
                 "--out", str(tmp_path / "other.json")]) == 0
    capsys.readouterr()
    tiny = write(tmp_path, "tiny.yaml", TINY)
    for name in ("k", "k2"):  # k's cells come from the other suite; then k is renamed k2
        tiny.write_text(TINY.replace("id: k,", f"id: {name},").replace("models: [k]", f"models: [{name}]"))
        assert main(["run", "--suite", str(tiny), "--out", out, "--quiet", "--format", "csv"]) == 0
        assert "0 cells run, 1 reused" in capsys.readouterr().out
        run_verdicts = pd.read_csv(Path(out) / "expectations.csv")
        assert main(["report", "--suite", str(tiny), "--out", out, "--format", "csv"]) == 0
        assert "expectations 1/1 pass" in capsys.readouterr().out
        report_verdicts = pd.read_csv(Path(out) / "expectations.csv")
        pd.testing.assert_frame_equal(report_verdicts, run_verdicts)
        recs = pd.read_csv(Path(out) / "records.csv")
        assert set(recs["model"]) == {name} and set(recs["suite"]) == {"tiny"} and (recs["status"] == "ok").all()
        assert set(pd.read_csv(Path(out) / "leaderboard.csv")["model"]) == {name}


# -- #14.12: a claim whose pid now belongs to another process is stale -----------------------------------


def test_claim_liveness_uses_host_pid_and_start_time():
    host, now = socket.gethostname(), time.time()
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        start = process_start_time(sleeper.pid)
        if start is None:
            pytest.skip("no /proc here: claims fall back to a TTL")
        assert claim_is_live(f"{host}:{sleeper.pid}:{start}", now)
        assert not claim_is_live(f"{host}:{sleeper.pid}:{int(start) + 1}", now)  # pid reused by another process
        assert claim_is_live(f"{host}:{sleeper.pid}", now) and not claim_is_live(f"{host}:{sleeper.pid}", now - 7200)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert not claim_is_live(f"{host}:{sleeper.pid}:{start}", now)  # dead
    assert claim_is_live("elsewhere:1:5", now - 60) and not claim_is_live("elsewhere:1:5", now - 7200)


def test_run_takes_over_a_claim_whose_pid_was_reused(tmp_path):
    suite, out = write(tmp_path, "tiny.yaml", TINY), tmp_path / "out"
    runner = SuiteRunner(parse_suite(TINY, str(suite)), out, device="cpu")
    ResultStore(out / "store").open(write=True)
    sleeper = subprocess.Popen(["sleep", "300"])  # alive, but not the process that claimed the jobs
    try:
        owner = f"{socket.gethostname()}:{sleeper.pid}:1"
        with sqlite3.connect(store_path(out)) as db:
            db.executemany("INSERT INTO claims VALUES (?, ?, ?)", [("|".join(j.keys), owner, time.time()) for j in runner.jobs])
        proc = cli("run", "--suite", str(suite), "--out", str(out), "--quiet", "--device", "cpu", "--format", "md")
        _, err = proc.communicate(timeout=120)  # before the fix this waited forever
    finally:
        sleeper.kill()
        sleeper.wait()
    assert proc.returncode == 0, err
    assert set(keys_of(out)) == suite_keys(TINY, out)
    assert query(out, "SELECT * FROM claims") == []


# -- #14.13: SIGTERM behaves like Ctrl-C -----------------------------------------------------------------


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


@pytest.mark.slow
@pytest.mark.parametrize("executor", ["local", "process"])
def test_sigterm_stops_like_ctrl_c(tmp_path, executor):
    suite, out = paced_suite(tmp_path), tmp_path / "out"
    proc = cli("run", "--suite", str(suite), "--out", str(out), "--quiet", "--device", "cpu", "--format", "md",
               "--executor", executor, "--workers", "2", start_new_session=True)
    wait_for_rows(out, proc, 5)
    os.killpg(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143, err
    assert INTERRUPTED in err and "Traceback" not in err
    assert (out / "leaderboard.md").exists()
    assert 5 <= len(keys_of(out)) < len(suite_keys_of(suite, out)) == 60  # deterministic: one cell for both seeds
    assert query(out, "SELECT * FROM claims") == []
    end = time.time() + 60
    while group_members(proc.pid) and time.time() < end:  # workers are stopped, not orphaned
        time.sleep(0.1)
    assert group_members(proc.pid) == []


# -- #13: a store file that cannot be used → a message naming it, exit 2, the file untouched -------------


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> dict[str, Path]:
    """A tiny suite, a real store of it and a baseline recorded from it."""
    root = tmp_path_factory.mktemp("good")
    suite = write(root, "tiny.yaml", TINY)
    assert main(["run", "--suite", str(suite), "--out", str(root / "out"), "--quiet", "--format", "md"]) == 0
    assert main(["baseline", "record", "--suite", str(suite), "--results", str(root / "out"), "--quiet",
                 "--out", str(root / "baseline.json")]) == 0
    return {"suite": suite, "store": store_path(root / "out"), "baseline": root / "baseline.json"}


def foreign_schema(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE records (id INTEGER PRIMARY KEY, value TEXT)")
        db.execute("CREATE TABLE meta (name TEXT, value TEXT)")
        db.execute("INSERT INTO records (value) VALUES ('mine')")


def other_program(path: Path) -> None:
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE users (name TEXT)")
        db.execute("INSERT INTO users VALUES ('ada')")


def snapshot(path: Path) -> str:
    if path.is_dir():
        return "dir:" + ",".join(sorted(p.name for p in path.iterdir()))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def commands(good: dict[str, Path], out: Path) -> dict[str, list[str]]:
    suite = str(good["suite"])
    return {
        "run": ["run", "--suite", suite, "--out", str(out), "--quiet", "--device", "cpu", "--format", "md"],
        "report": ["report", "--suite", suite, "--out", str(out), "--format", "md"],
        "check": ["check", "--suite", suite, "--results", str(out), "--baseline", str(good["baseline"]), "--quiet",
                  "--device", "cpu"],
    }


def run_all(good: dict[str, Path], out: Path, which: tuple[str, ...] = ("run", "report", "check")) -> dict[str, tuple[int, str]]:
    """The commands at once (none of them may write to a broken store, so they cannot race)."""
    procs = {name: cli(*args) for name, args in commands(good, out).items() if name in which}
    outputs = {name: "".join(p.communicate(timeout=180)) for name, p in procs.items()}
    return {name: (p.returncode, outputs[name]) for name, p in procs.items()}


CASES = {
    "garbage": (lambda p, good: p.write_bytes(os.urandom(5000)), "not an SQLite database"),
    "truncated": (lambda p, good: p.write_bytes(good["store"].read_bytes()[: good["store"].stat().st_size // 2]),
                  "is corrupt"),
    "foreign schema": (lambda p, good: foreign_schema(p), "lacks the column(s) created, key"),
    "other program": (lambda p, good: other_program(p), "an SQLite database of another program (tables: users)"),
    "a directory": (lambda p, good: p.mkdir(), "is a directory"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_unusable_store_is_refused_with_a_message_and_left_untouched(tmp_path, good, case):
    make, why = CASES[case]
    out = tmp_path / "out"
    store_path(out).parent.mkdir(parents=True)
    make(store_path(out), good)
    before = snapshot(store_path(out))
    for name, (code, output) in run_all(good, out).items():
        assert code == 2, (name, output)
        assert "Traceback" not in output, (name, output)
        assert f"{store_path(out)}: " in output and why in output, (name, output)
        assert "move it aside" in output or "--out" in output, (name, output)
    assert snapshot(store_path(out)) == before
    assert sorted(p.name for p in store_path(out).parent.iterdir()) == ["records.sqlite"]  # no -wal/-shm left


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions, so chmod cannot make the store read-only")
@pytest.mark.parametrize("what", ["file", "directory"])
def test_read_only_store_is_refused_by_run_and_read_by_report(tmp_path, good, what):
    out = tmp_path / "out"
    store_path(out).parent.mkdir(parents=True)
    shutil.copy(good["store"], store_path(out))
    target = store_path(out) if what == "file" else store_path(out).parent
    target.chmod(0o444 if what == "file" else 0o555)
    try:
        before = snapshot(store_path(out))
        results = run_all(good, out, ("run",))
        code, output = results["run"]
        assert code == 2 and "Traceback" not in output and f"{store_path(out)}: " in output, output
        assert "read-only" in output or "cannot be opened" in output, output
        assert snapshot(store_path(out)) == before
    finally:
        target.chmod(0o755 if what == "directory" else 0o644)


# -- #13: fuzz the store file ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_bytes(good) -> bytes:
    return good["store"].read_bytes()


# One interpreter per example runs both commands through compbench.cli.main, as the console script
# does: an exception escaping main would print a traceback and exit 1, which the test catches.
DRIVER = """\
import json, sys
from compbench.cli import main
codes = {}
for name, argv in json.loads(sys.argv[1]).items():
    codes[name] = main(argv)
    print(f"@@{name}", file=sys.stderr, flush=True)
print("@@codes=" + json.dumps(codes))
"""


@pytest.mark.slow
@settings(max_examples=15, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=st.data())
def test_fuzzed_store_file_gives_exit_2_or_a_working_store_never_a_traceback(good, good_bytes, data):
    content = data.draw(st.one_of(
        st.binary(max_size=3000),
        st.integers(0, len(good_bytes)).map(lambda n: good_bytes[:n]),
        st.binary(min_size=1, max_size=64).map(lambda b: good_bytes[:100] + b + good_bytes[100 + len(b):]),
    ))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "out"
        store_path(out).parent.mkdir(parents=True)
        store_path(out).write_bytes(content)
        argv = {name: args for name, args in commands(good, out).items() if name in ("report", "run")}
        proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(argv)], capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        codes = json.loads(proc.stdout.split("@@codes=")[1])
        assert set(codes.values()) <= {0, 2}, (codes, proc.stderr)
        if codes["report"] == 2 and codes["run"] == 2:
            assert str(store_path(out)) in proc.stderr, proc.stderr
            assert store_path(out).read_bytes() == content  # refused, never repaired


class _InterruptedAfterBegin:
    """A connection on which Ctrl-C lands just after BEGIN IMMEDIATE returned (before any guarded code ran)."""

    def __init__(self, db):
        self.db = db

    @property
    def in_transaction(self):
        return self.db.in_transaction

    def execute(self, sql, *args):
        out = self.db.execute(sql, *args)
        if sql == "BEGIN IMMEDIATE":
            raise KeyboardInterrupt
        return out


def test_a_ctrl_c_just_after_begin_leaves_no_transaction_and_no_lock(tmp_path):
    # It used to leave the write lock held: the next writer of the same file in this process waited SQLite's
    # 60 s busy timeout in C, deaf to Ctrl-C (a repeatedly interrupted `run --executor process` hung in CI).
    import sqlite3

    from compbench.store.records import _immediate

    path = tmp_path / "s.sqlite"
    db = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    db.execute("CREATE TABLE t (x)")
    with pytest.raises(KeyboardInterrupt):
        with _immediate(_InterruptedAfterBegin(db)):
            db.execute("INSERT INTO t VALUES (1)")
    assert not db.in_transaction
    other = sqlite3.connect(path, isolation_level=None, timeout=0.1)
    other.execute("INSERT INTO t VALUES (2)")  # the lock is free: no 'database is locked'
    # A transaction an interrupt left open earlier (BEGIN ran, nothing after) is rolled back by the next one.
    db.execute("BEGIN IMMEDIATE")
    db.execute("INSERT INTO t VALUES (3)")
    with _immediate(db):
        db.execute("INSERT INTO t VALUES (4)")
    assert sorted(x for (x,) in other.execute("SELECT x FROM t")) == [2, 4]


def test_a_store_deleted_after_the_last_write_is_said_at_the_end_of_the_run(tmp_path, monkeypatch):
    """run_suite verifies the store after its runner closed it: the check read only an open connection, so a store
    deleted between the run's last write and its end went unsaid (the run reported cells the disk no longer held)."""
    from compbench.runner.run import run_suite
    from compbench.store.records import StoreGoneError
    from compbench.suite import load_suite

    suite = write(tmp_path, "two.yaml", TWO_MODELS)
    out = tmp_path / "out"
    original = ResultStore.close

    def close_then_lose_the_file(self):
        original(self)
        for suffix in ("", "-wal", "-shm"):
            Path(f"{self.path}{suffix}").unlink(missing_ok=True)

    monkeypatch.setattr(ResultStore, "close", close_then_lose_the_file)
    with pytest.raises(StoreGoneError, match="was deleted while this run was writing to it"):
        run_suite(load_suite(suite), out, device="cpu", executor="local", progress=False)
