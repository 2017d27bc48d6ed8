"""Issue #37 item 4: `compbench bundle` writes one file that `report`, `compare` and `check` read as they read a directory."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
from pathlib import Path

import pytest

from compbench import bundle_pack
from compbench.bundle import _content_sha256, open_results
from compbench.cli import main
from tiny_suites import kernel_suite

STORED = 1577836800.0  # 2020-01-01 00:00 UTC
DOCS = Path(__file__).resolve().parent.parent / "docs" / "how-to" / "compare-runs.md"


def run(suite: Path, results: Path, *extra: str) -> None:
    assert main(["run", "--suite", str(suite), "--results", str(results), "-q", "--device", "cpu", *extra]) in (0, 1)


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def files(folder: Path) -> dict[str, bytes]:
    """Every file of a report folder by its relative path (the store apart: a report from a bundle has none; and the
    statuses of its files, this copy's own, recorded only for a file 2 s old: report.file_status)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.relative_to(folder).parts[0] != "store"
            and p.relative_to(folder).as_posix() != ".report/status.json"}


@pytest.fixture
def made(tmp_path, capsys):
    """A results directory of a kernel suite, and its bundle."""
    suite = tmp_path / "k.yaml"
    suite.write_text(kernel_suite("k", "leak", "chance"))
    run(suite, tmp_path / "A")
    for f in (tmp_path / "A" / "store").iterdir():  # results stored on a known day, which their report must state
        os.utime(f, (STORED, STORED))
    assert main(["bundle", "--suite", str(suite), "--results", str(tmp_path / "A"), "-o", str(tmp_path / "a.cbz")]) == 0
    capsys.readouterr()
    return suite, tmp_path / "A", tmp_path / "a.cbz"


@pytest.mark.slow
def test_the_report_from_a_bundle_is_byte_identical_to_the_report_from_its_directory(made, tmp_path, capsys):
    suite, results, bundle = made
    with sqlite3.connect(bundle) as db:
        manifest = dict(db.execute("SELECT name, value FROM bundle"))
        carried = {n: bytes(d) for n, d in db.execute("SELECT name, data FROM bundle_files")}
        assert db.execute("SELECT COUNT(*) FROM claims").fetchone() == (0,)
    assert manifest["kind"] == "compbench-bundle" and manifest["bundle_format"] == "2" and manifest["suite"] == "k"
    assert manifest["suite_sha256"] == sha(suite) and manifest["records"] == "4" and manifest["store_layout"] == "2"
    assert carried == {"suite.yaml": suite.read_bytes(), "summary.json": (results / "summary.json").read_bytes()}
    before = sha(bundle)
    assert main(["report", "--suite", str(suite), "--results", str(results), "-q"]) == 0
    assert main(["report", "--results", str(bundle), "--report-dir", str(tmp_path / "R"), "-q"]) == 0
    err = capsys.readouterr().err
    assert f"suite 'k' from {bundle} (its suite file k.yaml)" in err
    mine, theirs = files(tmp_path / "R"), files(results)
    assert sorted(mine) == sorted(theirs) and "leaderboard.md" in mine and "summary.json" in mine
    # What may differ: the date row of leaderboard.md and .html (the minute of the store's last write, as the
    # directory's store file says it now and as the bundle recorded it), and the manifest's hashes of those two files.
    dated = ("leaderboard.md", "leaderboard.html", ".report/manifest.json")
    assert [name for name in mine if mine[name] != theirs[name] and name not in dated] == []
    undate = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC")
    for name in dated[:2]:
        assert undate.sub(b"DATE", mine[name]) == undate.sub(b"DATE", theirs[name]), name
    assert float(manifest["stored"]) == STORED
    # The results' date, not the report's (the table's padding follows its longest row).
    assert re.search(r"\| date +\| 2020-01-01 00:00 UTC +\|", mine["leaderboard.md"].decode())
    assert sha(bundle) == before  # read from a private copy: never written


@pytest.mark.slow
def test_compare_and_run_ids_read_a_bundle_as_its_directory(made, tmp_path, capsys):
    suite, results, bundle = made
    worse = tmp_path / "b.yaml"
    worse.write_text(suite.read_text().replace("[0.0, 0.4, 1.0]", "[0.0, 0.0, 1.0]"))
    run(worse, results)  # a second run into the same store: the first run's records are kept
    assert main(["bundle", "--suite", str(worse), "--results", str(results), "-o", str(bundle)]) == 0  # replaces the bundle
    capsys.readouterr()
    docs = []
    for a, b in ((str(tmp_path / "A"), str(bundle)), (str(bundle), str(results))):
        assert main(["compare", a, b, "--format", "json", "--out", str(tmp_path)]) == 0
        docs.append(json.loads((tmp_path / "compare.json").read_text()))
    assert docs[0]["counts"] == docs[1]["counts"] == {"fixed": 0, "gone": 0, "new": 0, "regressed": 0, "unchanged": 4}
    with sqlite3.connect(bundle) as db:
        assert db.execute("SELECT value FROM bundle WHERE name = 'records'").fetchone() == ("6",)  # both runs' overlap cells
    with sqlite3.connect(results / "store" / "records.sqlite") as db:  # the bundle's runs are packed
        first, second = [r for (r,) in db.execute("SELECT id FROM runs ORDER BY started")]
    assert main(["compare", first, second, "--results", str(bundle), "--format", "json", "--out", str(tmp_path),
                 "--fail-on", "regressed"]) == 1
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert {f"{c['model']} on {c['task']}": c["status"] for c in doc["cells"]}["overlap on add"] == "regressed"
    assert doc["flips"] == [{"expectation": "leak", "subject": "overlap", "task": "add", "a": "PASS", "b": "FAIL"}]


@pytest.mark.slow
def test_check_and_baseline_read_a_bundle_and_never_write_it(made, tmp_path, capsys):
    suite, _, bundle = made
    before = sha(bundle)
    base = tmp_path / "base.json"
    assert main(["baseline", "record", "--suite", str(suite), "--results", str(bundle), "--out", str(base), "-q",
                 "--device", "cpu"]) == 0
    assert main(["check", "--suite", str(suite), "--results", str(bundle), "--baseline", str(base), "-q",
                 "--device", "cpu"]) == 0
    out = capsys.readouterr().out
    assert out.count("k: 0 cells run, 4 reused from the cache (the bundle") == 2
    assert "0 regressed" in out and sha(bundle) == before


@pytest.mark.slow
def test_a_bundle_whose_store_an_older_compbench_wrote_is_read_as_it_is(made, tmp_path, capsys):
    suite, results, _ = made
    old = tmp_path / "old"
    (old / "store").mkdir(parents=True)
    with sqlite3.connect(results / "store" / "records.sqlite") as db:
        rows = db.execute("SELECT key, suite, status, created, record FROM records ORDER BY id").fetchall()
    with sqlite3.connect(old / "store" / "records.sqlite") as db:  # layout 1: no runs table, no superseded column
        db.execute("CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)")
        db.execute("CREATE TABLE records (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, suite TEXT, status TEXT,"
                   " created REAL, record TEXT NOT NULL)")
        db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        db.executemany("INSERT INTO records (key, suite, status, created, record) VALUES (?, ?, ?, ?, ?)", rows)
    assert main(["bundle", "--suite", str(suite), "--results", str(old), "-o", str(tmp_path / "old.cbz")]) == 0
    assert main(["report", "--results", str(tmp_path / "old.cbz"), "--report-dir", str(tmp_path / "R"), "-q",
                 "--format", "csv"]) == 0
    assert "k: 4 cells (4 ok); expectations 2/2 pass" in capsys.readouterr().out
    assert (tmp_path / "R" / "records.csv").read_bytes() == (results / "records.csv").read_bytes()


def _edit(bundle: Path, *statements: str, rehash: bool = False, records: bool = False) -> None:
    """Run SQL on a bundle; with `records`, on its records unpacked, packed again afterwards (as compbench packs them)."""
    with sqlite3.connect(bundle, isolation_level=None) as db:
        packed = json.loads(dict(db.execute("SELECT name, value FROM bundle"))["packed_columns"]) if records else {}
        if records:
            bundle_pack.unpack(db, packed)
        for statement in statements:
            db.execute(statement)
        if records:
            bundle_pack.pack(db)
        if rehash:
            db.execute("UPDATE bundle SET value = ? WHERE name = 'content_sha256'", (_content_sha256(db),))


@pytest.mark.slow
def test_foreign_damaged_and_newer_files_are_one_line_and_exit_2(made, tmp_path, capsys):
    suite, results, bundle = made
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as db:
        db.execute("CREATE TABLE t (x)")
    cases = {"garbage": (b"not a bundle\n" * 10, "not an SQLite file"),
             "store": ((results / "store" / "records.sqlite").read_bytes(), "a compbench store, not a bundle"),
             "other": (other.read_bytes(), "another program"),
             "truncated": (bundle.read_bytes()[:5000], "damaged"),
             "empty": (b"", "not an SQLite file")}
    for name, (data, why) in cases.items():
        (tmp_path / f"{name}.cbz").write_bytes(data)
    edits = {"newer": (["UPDATE bundle SET value = '3' WHERE name = 'bundle_format'"], "upgrade compbench"),
             "edited": (["UPDATE records SET record = replace(record, '\"seed\": 0', '\"seed\": 7')"], "do not match"),
             "chunk": (["UPDATE bundle_rows SET data = X'00' WHERE tbl = 'records'"], "records' chunk 0 does not match its size"),
             "bomb": (["UPDATE bundle_rows SET size = 1000000000"], "at most"),
             "unpacked": (["DROP TABLE bundle_rows"], "rows packed as"),
             "newer-store": (["UPDATE bundle SET value = '3' WHERE name = 'store_layout'"], "store has layout 3"),
             "suite": (["UPDATE bundle_files SET data = X'00' WHERE name = 'suite.yaml'"], "suite.yaml does not match")}
    for name, (statements, why) in edits.items():
        (tmp_path / f"{name}.cbz").write_bytes(bundle.read_bytes())
        _edit(tmp_path / f"{name}.cbz", *statements, records=name == "edited")
        cases[name] = (b"", why)
    for name, (_, why) in cases.items():
        path = str(tmp_path / f"{name}.cbz")
        for argv in (["report", "--results", path, "--report-dir", str(tmp_path / "R")],
                     ["compare", path, str(results)], ["compare", "some-run", "other-run", "--results", path]):
            capsys.readouterr()
            assert main(argv) == 2, (name, argv)
            err = capsys.readouterr().err
            assert err.startswith(f"compbench: {path}: ") and len(err.strip().splitlines()) == 1 and why in err, (name, err)
    assert not (tmp_path / "R").exists()
    # A bundle is never written into, nor a file that is not a bundle replaced by one.
    for argv, why in ((["report", "--results", str(bundle)], "give --report-dir DIR"),
                      (["report", "--results", str(bundle), "--report-dir", str(bundle)], "is the bundle itself"),
                      (["bundle", "--suite", str(suite), "--results", str(results), "-o", str(suite)], "is not a compbench bundle"),
                      (["bundle", "--suite", str(suite), "--results", str(tmp_path / "none"), "-o", str(tmp_path / "n.cbz")],
                       "no compbench store")):
        before = suite.read_bytes()
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert err[-1].startswith("compbench: ") and why in err[-1] and "Traceback" not in "".join(err), err
        assert suite.read_bytes() == before
    assert not (tmp_path / "n.cbz").exists()


@pytest.mark.slow
def test_the_how_to_example_of_a_bundle_runs_as_written(tmp_path, capsys, monkeypatch):
    # The page's two-run example, up to its history section (a git repository's example: tests/test_history.py runs it).
    text = DOCS.read_text(encoding="utf-8").split("\n## A model family across runs")[0]
    before = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    Path("before.yaml").write_text(before)
    Path("after.yaml").write_text(before.replace("[0.0, 0.4, 1.0]", "[0.0, 0.0, 1.0]"))
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    codes = []
    for block in blocks:
        for line in block.strip().splitlines():
            assert line.startswith("compbench ")
            codes.append(main(line.split()[1:]))
    assert codes[-3:] == [0, 0, 1]  # bundle, report from it, compare it with the pull request (a regression)
    undate = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC")  # the date row may differ (a minute can turn)
    assert undate.sub(b"", Path("main-report/leaderboard.md").read_bytes()) == \
        undate.sub(b"", Path("results/main/leaderboard.md").read_bytes())


@pytest.mark.slow
def test_a_message_about_a_bundle_names_the_bundle_not_its_temporary_copy(made, tmp_path, capsys):
    suite, results, _ = made
    empty = tmp_path / "E"
    (empty / "store").mkdir(parents=True)
    (empty / "store" / "records.sqlite").write_bytes((results / "store" / "records.sqlite").read_bytes())
    with sqlite3.connect(empty / "store" / "records.sqlite") as db:
        db.execute("DELETE FROM records")
    assert main(["bundle", "--suite", str(suite), "--results", str(empty), "-o", str(tmp_path / "e.cbz")]) == 0
    capsys.readouterr()
    assert main(["report", "--results", str(tmp_path / "e.cbz"), "--report-dir", str(tmp_path / "R")]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"compbench: no stored results for suite 'k' in {tmp_path / 'e.cbz'}; run `compbench run --suite k` first"


def _rows(store: Path, table: str = "records") -> list[tuple]:
    with sqlite3.connect(f"file:{store}?mode=ro", uri=True) as db:
        return db.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()


def test_a_bundle_packs_its_records_and_gives_back_the_very_rows(made, tmp_path):
    # Format 1 held the store's rows as they are: a published suite's bundle was 1.4-170 MB of predictions as text.
    suite, results, bundle = made
    with sqlite3.connect(bundle) as db:
        assert db.execute("SELECT COUNT(*) FROM records").fetchone() == (0,)
        chunks = db.execute("SELECT size, length(data) FROM bundle_rows WHERE tbl = 'records'").fetchall()
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (0,)
        assert db.execute("SELECT COUNT(*) FROM bundle_rows WHERE tbl = 'runs'").fetchone() == (1,)
        manifest = dict(db.execute("SELECT name, value FROM bundle"))
    assert manifest["packing"] == "lzma-jsonl" and manifest["records_kept"] == "all"
    assert len(chunks) == 1 and chunks[0][1] < chunks[0][0] / 3  # the JSON lines, compressed
    store = results / "store" / "records.sqlite"
    with open_results(bundle) as view:  # every column of every row, floats to the last bit
        for table in ("records", "runs"):
            assert _rows(view.directory / "store" / "records.sqlite", table) == _rows(store, table) != []


def _files_undated(folder: Path) -> dict[str, bytes]:
    undate = re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC")
    return {n: undate.sub(b"DATE", d) for n, d in files(folder).items() if n != ".report/manifest.json"}


def test_a_current_bundle_leaves_out_superseded_records_and_the_runs_that_reported_them(made, tmp_path, capsys):
    suite, results, _ = made
    run(suite, results, "--force")  # recomputes every cell: the first rows are superseded, so is the first run's report
    with sqlite3.connect(results / "store" / "records.sqlite") as db:
        first, second = [r for (r,) in db.execute("SELECT id FROM runs ORDER BY started")]
        current = db.execute("SELECT * FROM records WHERE superseded = 0 ORDER BY id").fetchall()
    full, small = tmp_path / "full.cbz", tmp_path / "current.cbz"
    assert main(["bundle", "--suite", str(suite), "--results", str(results), "-o", str(full)]) == 0
    assert main(["bundle", "--suite", str(suite), "--results", str(results), "-o", str(small), "--current"]) == 0
    assert "4 records of" in capsys.readouterr().out.splitlines()[-1]
    with sqlite3.connect(small) as db:
        manifest = dict(db.execute("SELECT name, value FROM bundle"))
    assert (manifest["records_kept"], manifest["superseded_left_out"], manifest["runs_left_out"]) == ("current", "4", first)
    assert manifest["records"] == "4" and len(current) == 4
    with open_results(small) as view:
        assert _rows(view.directory / "store" / "records.sqlite") == current
        assert [r[0] for r in _rows(view.directory / "store" / "records.sqlite", "runs")] == [second]
    # What report, check and compare of the last run read is what the whole bundle gives.
    for name in ("full", "current"):
        assert main(["report", "--results", str(tmp_path / f"{name}.cbz"), "--report-dir", str(tmp_path / name), "-q"]) == 0
    assert _files_undated(tmp_path / "current") == _files_undated(tmp_path / "full")
    assert main(["compare", str(small), str(full), "--format", "json", "--out", str(tmp_path)]) == 0
    assert json.loads((tmp_path / "compare.json").read_text())["counts"]["unchanged"] == 4
    # history starts at the first run kept; the whole bundle has both
    for name, n in (("full", 2), ("current", 1)):
        assert main(["history", "--suite", "k", "--results", str(tmp_path / f"{name}.cbz"), "--format", "json",
                     "-o", str(tmp_path / f"{name}.json")]) == 0
        assert len({r["run"] for r in json.loads((tmp_path / f"{name}.json").read_text())["rows"]}) == n, name


def test_a_format_1_bundle_is_read_as_it_is(made, tmp_path, capsys):
    # A bundle written before records were packed: the same tables, its rows unpacked in `records`.
    suite, results, bundle = made
    old = tmp_path / "old.cbz"
    old.write_bytes(bundle.read_bytes())
    with sqlite3.connect(old, isolation_level=None) as db:
        bundle_pack.unpack(db, json.loads(dict(db.execute("SELECT name, value FROM bundle"))["packed_columns"]))
        db.execute("UPDATE bundle SET value = '1' WHERE name = 'bundle_format'")
        db.execute("DELETE FROM bundle WHERE name IN ('packing', 'packed_columns', 'records_kept', "
                   "'superseded_left_out', 'runs_left_out')")
    for name, path in (("old", old), ("new", bundle)):
        assert main(["report", "--results", str(path), "--report-dir", str(tmp_path / name), "-q"]) == 0
    assert files(tmp_path / "old") == files(tmp_path / "new")
    assert (tmp_path / "old" / "records.csv").read_bytes() == (results / "records.csv").read_bytes()
