"""A warm run only reads: stored records' arrays are not decoded to reuse or judge them, the report's inputs digest is
cached under the stored rows it read, and that cache follows the suite, the rows and the code."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import pickle
import sqlite3
from pathlib import Path

import pytest

import compbench
from compbench.records import CellRecord
INPUTS_CACHE = ".report/inputs.json"  # the digest cache, as docs/reference/guarantees.md names it
from compbench.store import ResultStore
from tiny_suites import cli, kernel_suite

SUITE = kernel_suite("warm", "leak", "chance")


def _report(out: Path) -> dict[str, bytes]:
    """The report's files (the run's facts and the directory's bookkeeping left out)."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and "store" not in p.parts and ".report" not in p.parts
            and p.name not in ("summary.json", ".compbench")}


def _run(suite: Path, out: Path, *more: str) -> str:
    r = cli("run", "--suite", str(suite), "--results", str(out), "--quiet", *more)
    assert r.rc == 0, r.text
    return r.text


def _cache_key(out: Path) -> str:
    return json.loads((out / INPUTS_CACHE).read_text())["key"]


@pytest.fixture
def warm(tmp_path: Path) -> tuple[Path, Path]:
    """A suite run cold, then warm once (which computes the inputs digest from the records and caches it)."""
    suite, out = tmp_path / "warm.yaml", tmp_path / "out"
    suite.write_text(SUITE)
    _run(suite, out)
    _run(suite, out)
    return suite, out


def _count_decodes(monkeypatch) -> list[str]:  # type: ignore[no-untyped-def]
    """Every text json.loads decodes from now until monkeypatch.undo(), in order (the list fills as they happen)."""
    decoded: list[str] = []
    loads = json.loads

    def counting(text, *args, **kwargs):  # type: ignore[no-untyped-def]
        decoded.append(text if isinstance(text, str) else text.decode())
        return loads(text, *args, **kwargs)

    monkeypatch.setattr(json, "loads", counting)
    return decoded


def test_a_warm_run_decodes_no_stored_predictions_and_reports_the_same(warm, monkeypatch):
    suite, out = warm
    before = _report(out)
    decoded = _count_decodes(monkeypatch)
    said = _run(suite, out)
    monkeypatch.undo()
    rows = [t for (t,) in sqlite3.connect(out / "store" / "records.sqlite").execute("SELECT record FROM records")]
    assert len(rows) == 4  # 2 kernels × 2 tasks, every one with its predictions stored
    assert all(json.loads(t)["predictions"] for t in rows)
    # Each stored record decoded once, without its arrays: no text the run decoded holds a prediction.
    records = [t for t in decoded if '"record_schema"' in t]
    assert len(records) == 4
    assert not [t for t in records if '"predictions"' in t or '"theory_predictions"' in t]
    assert "report unchanged: 5 writers skipped" in said and "digest cached" in said
    assert _report(out) == before


def test_a_record_read_lazily_is_the_stored_record(warm):
    _, out = warm
    store = ResultStore(out / "store")
    lazy = sorted(store, key=lambda r: (r.key, r.seed))
    store.close()
    db = sqlite3.connect(out / "store" / "records.sqlite")
    whole = {k: CellRecord.from_dict(json.loads(t))
             for k, t in db.execute("SELECT key, record FROM records WHERE superseded = 0")}
    assert len(lazy) == 4 and all(r.stored_row is not None for r in lazy)
    # Sent to another process (pickled) or copied under another name before anything decoded its arrays: whole.
    assert pickle.loads(pickle.dumps(lazy[0])) == whole[lazy[0].key]
    renamed = dataclasses.replace(lazy[1], model="other")
    assert renamed.stored_row is None and renamed.predictions == whole[lazy[1].key].predictions
    for r in lazy:
        assert r.predictions == whole[r.key].predictions and r.predictions  # decoded on first read
        assert r.to_dict() == whole[r.key].to_dict() and r == whole[r.key]


def test_the_digest_cache_follows_the_suite_file(warm):
    suite, out = warm
    key = _cache_key(out)
    assert "digest cached" in _run(suite, out) and _cache_key(out) == key
    # The same records, another expectation's threshold: the report must say the new one, not the cached digest's.
    suite.write_text(SUITE.replace("tolerance: 0.01", "tolerance: 0.02"))
    said = _run(suite, out)
    assert "report unchanged" not in said and _cache_key(out) != key
    assert "0.02" in (out / "expectations.csv").read_text()


def test_the_digest_cache_follows_the_code_and_the_rows(warm, monkeypatch):
    suite, out = warm
    key = _cache_key(out)
    monkeypatch.setattr(compbench, "__version__", "0.0.0+another")
    assert "digest cached" not in _run(suite, out)
    assert _cache_key(out) not in (key, "")
    monkeypatch.undo()
    assert "digest cached" not in _run(suite, out)
    key = _cache_key(out)
    assert "digest cached" in _run(suite, out)
    # Recomputed cells are new rows, with other tokens, even where their content is the same.
    assert "digest cached" not in _run(suite, out, "--force")
    _run(suite, out)
    assert _cache_key(out) != key


def _bytes_read(step) -> int:
    """The bytes this process read (Linux's rchar: every read and pread, SQLite's page reads included) during step()."""
    def rchar() -> int:
        return int(next(line for line in Path("/proc/self/io").read_text().splitlines() if line.startswith("rchar:")).split()[1])
    before = rchar()
    step()
    return rchar() - before


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts the bytes read through Linux's /proc/self/io")
def test_earlier_runs_and_superseded_rows_do_not_make_a_warm_run_read_more(warm):
    # Each open of the store ran a quick_check of the whole file and the warm run read every row to find the current
    # ones: the file grows by a runs row per run (its ~15k cells: 1.5 MB for kernel-limits) and by a superseded row per
    # recomputed cell, so each run made every later warm run read more (1.2 GB read from a 229 MB store).
    suite, out = warm
    _run(suite, out)
    first = _bytes_read(lambda: _run(suite, out))
    path = out / "store" / "records.sqlite"
    size = path.stat().st_size
    store = ResultStore(out / "store")
    last = store.runs()[-1]
    current = list(store.latest().values())
    for _ in range(80):  # 80 earlier runs, each recomputing every cell (the same records, stored again)
        run_id = store.begin_run(last.suite or "", last.profile, {})
        store.append(current)
        store.end_run(run_id, last.info)
    store.close()
    grown = path.stat().st_size - size  # the last connection closed: its write-ahead log is in the file
    assert grown > 1_000_000 and grown > size  # the history is most of the file now
    _run(suite, out)  # the current rows are new rows: the report is written again, its digest cached
    later = _bytes_read(lambda: _run(suite, out))
    assert later - first < grown / 20, (first, later, grown)
    # and the warm run still reads the current records, as before
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*), SUM(superseded) FROM records").fetchone() == (4 * 81, 4 * 80)


def test_damage_in_the_current_rows_refuses_the_store_before_anything_is_written(warm):
    # The open no longer checks the whole file: what a run reads (its current rows) is read before its first write.
    suite, out = warm
    path = out / "store" / "records.sqlite"
    db = sqlite3.connect(path)
    (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'records'").fetchone()
    (page_size,) = db.execute("PRAGMA page_size").fetchone()
    db.close()
    data = bytearray(path.read_bytes())
    data[(root - 1) * page_size + 8:(root - 1) * page_size + 40] = bytes(range(200, 232))  # its root page's cells
    path.write_bytes(bytes(data))
    r = cli("run", "--suite", str(suite), "--results", str(out), "--quiet")
    assert r.rc == 2 and "Traceback" not in r.text
    assert f"{path}: the compbench store is corrupt" in r.err and "nothing in it was changed" in r.err
    assert path.read_bytes() == bytes(data)
    assert sorted(p.name for p in path.parent.iterdir()) == ["records.sqlite"]


def _reads_of_current_rows(monkeypatch) -> list[str]:
    """The statements every store connection of this process runs from now on that read the current rows' records."""
    import compbench.store.records as store_module

    seen: list[str] = []
    connect = sqlite3.connect

    def traced(*args, **kwargs):
        db = connect(*args, **kwargs)
        db.set_trace_callback(seen.append)
        return db

    monkeypatch.setattr(store_module.sqlite3, "connect", traced)
    monkeypatch.setattr(store_module, "_verified_files", set())  # as in a fresh process: nothing checked yet
    return seen


def test_a_warm_run_reads_the_current_records_once(warm, monkeypatch):
    # The check before a run's first write (ResultStore._verify), the cache of the reuse check and the check before
    # its verdicts are written each read every current row: a warm kernel-limits run read its 55 MB three times.
    suite, out = warm
    statements = _reads_of_current_rows(monkeypatch)
    said = _run(suite, out)
    assert "0 cells run, 4 reused from the cache" in said
    whole = [s for s in statements if "FROM records WHERE superseded = 0" in s and "key IN" not in s]
    assert len(whole) == 1 and "json_valid(record)" in whole[0], whole  # the reuse check's read, which is also the check
    assert not [s for s in statements if "SUM(LENGTH(record))" in s]
    # and the run still recorded its end and its verdicts in the store
    last = ResultStore(out / "store").runs()[-1]
    assert last.ended is not None and len(last.info["verdicts"]) >= 1 and last.info["n_cached"] == 4


def test_a_forced_run_still_checks_the_current_rows_before_its_first_write(warm, monkeypatch):
    suite, out = warm
    statements = _reads_of_current_rows(monkeypatch)
    _run(suite, out, "--force")
    checks = [i for i, s in enumerate(statements) if "SUM(LENGTH(record))" in s]
    first_write = next(i for i, s in enumerate(statements) if s.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")))
    assert len(checks) == 1 and checks[0] < first_write


def _hashed(monkeypatch) -> list[str]:
    """The report files the report's skip check reads whole to hash them, from now on."""
    status = importlib.import_module("compbench.report.file_status")  # where the skip check hashes a file

    seen: list[str] = []
    sha256 = status.sha256_contained

    def counting(root, relative):
        seen.append(str(relative))
        return sha256(root, relative)

    monkeypatch.setattr(status, "sha256_contained", counting)
    return seen


def test_a_warm_run_does_not_hash_its_settled_report_files_again(warm, monkeypatch):
    # The skip check hashed every file the report wrote (85 MB for kernel-limits, its predictions most of it) on every
    # warm run: a file whose size, times and inode are those recorded when its sha256 was last checked is not read.
    status = importlib.import_module("compbench.report.file_status")

    suite, out = warm
    monkeypatch.setattr(status, "SETTLED_NS", 0)  # every file has settled (the tests run faster than a clock tick)
    before = _report(out)
    hashed = _hashed(monkeypatch)
    assert "report unchanged: 5 writers skipped" in _run(suite, out)
    # Files written less than SETTLED_NS before the fixture's warm run had no status recorded: hashed now, recorded.
    assert set(hashed) <= set(before)
    hashed.clear()
    manifest = (out / ".report" / "manifest.json").read_text()
    assert "report unchanged: 5 writers skipped" in _run(suite, out)
    assert hashed == [] and _report(out) == before
    # The statuses are this copy's (inodes, change times): kept beside the manifest, which is published, not in it.
    assert (out / ".report" / "manifest.json").read_text() == manifest
    assert all(set(entry) == {"digest", "files", "beside", "sha256"} for entry in json.loads(manifest).values())
    statuses = json.loads((out / ".report" / "status.json").read_text())
    assert statuses["predictions.parquet"][0] == (out / "predictions.parquet").stat().st_size
    # A change that keeps the size and sets the modification time back still changes the file's change time.
    path = out / "records.csv"
    st = path.stat()
    text = path.read_bytes()
    path.write_bytes(text.replace(b"warm", b"WARM", 1))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_size == st.st_size and path.read_bytes() != text
    said = _run(suite, out)
    # read for the check: the only file whose status changed (then the csv writer's files, hashed as it writes them)
    assert hashed[0] == "records.csv" and not {"predictions.parquet", "leaderboard.md", "leaderboard.html"} & set(hashed)
    assert "report partly rewritten" in said and path.read_bytes() == text


def test_a_report_file_not_settled_is_hashed(warm, monkeypatch):
    status = importlib.import_module("compbench.report.file_status")

    suite, out = warm
    monkeypatch.setattr(status, "SETTLED_NS", 10**18)  # nothing settles: every file is hashed, as before
    hashed = _hashed(monkeypatch)
    for _ in range(2):
        hashed.clear()
        assert "report unchanged: 5 writers skipped" in _run(suite, out)
        assert "predictions.parquet" in hashed and "records.csv" in hashed


def test_a_run_decodes_the_stored_records_of_its_own_cells_only(tmp_path, monkeypatch):
    # A store shared with another suite (82 cells of swept kernels): a run of a suite with 4 cells, 2 of them stored by
    # the other suite, decided reuse on every current row, each decoded from its JSON (82); now only the 2 it reuses.
    out = tmp_path / "out"
    (tmp_path / "a.yaml").write_text(kernel_suite("shared-a", sweep=40))
    (tmp_path / "b.yaml").write_text(kernel_suite("shared-b"))
    _run(tmp_path / "a.yaml", out)
    decoded = _count_decodes(monkeypatch)
    results = compbench.evaluate(tmp_path / "b.yaml", out=out, device="cpu")
    monkeypatch.undo()
    records = [t for t in decoded if '"record_schema"' in t]
    assert sorted(json.loads(t)["model"] for t in records) == ["relu", "relu"]
    assert (results.n_run, results.n_cached) == (2, 2)
    stored = {r.key: r for r in ResultStore(out / "store").latest().values()}
    assert len(stored) == 84
    for r in results.records:
        assert r.metrics == stored[r.key].metrics and r.predictions == stored[r.key].predictions


def test_the_digest_cache_holds_for_records_reused_under_other_names(warm):
    # A renamed model's cells are reused and relabelled: the relabelled copies had no identity, so every warm run after
    # a rename decoded and hashed every prediction again for the report's digest.
    suite, out = warm
    suite.write_text(SUITE.replace("{id: relu,", "{id: renamed,"))
    said = _run(suite, out)
    assert "0 cells run, 4 reused from the cache" in said and "digest cached" not in said  # the suite changed
    said = _run(suite, out)
    assert "report unchanged" in said and "digest cached" in said
    assert "renamed" in (out / "leaderboard.md").read_text()
