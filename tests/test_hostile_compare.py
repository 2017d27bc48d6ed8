"""Issue #37 items 1-2: every run recorded with its provenance (superseded records kept), and `compbench compare A B`."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from pathlib import Path

import pytest

from compbench.cli import main
from compbench.store import ResultStore
from tiny_suites import kernel_suite, suite_text

DOCS = Path(__file__).resolve().parent.parent / "docs" / "how-to" / "compare-runs.md"
# A network whose seeds differ, so that a paired t-test has something to pair (seconds on one core).
NET = suite_text("add", name="nets", seeds=3, models=["{id: net, adapter: mlp, params: {width: 32, lr: 0.05, max_steps: 400}}"])


def run(suite: Path, results: Path) -> None:
    assert main(["run", "--suite", str(suite), "--results", str(results), "-q", "--device", "cpu", "--format", "md"]) in (0, 1)


def compare(capsys, *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["compare", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def cells(doc: dict) -> dict[str, dict]:
    return {f"{c['model']} on {c['task']}": c for c in doc["cells"]}


def test_a_worse_kernel_regresses_exactly_its_cells_and_flips_its_claim(tmp_path, capsys):
    (tmp_path / "a.yaml").write_text(kernel_suite("k", "leak", "chance"))
    (tmp_path / "b.yaml").write_text(kernel_suite("k", "leak", "chance").replace("[0.0, 0.4, 1.0]", "[0.0, 0.0, 1.0]"))
    run(tmp_path / "a.yaml", tmp_path / "A")
    run(tmp_path / "b.yaml", tmp_path / "B")
    code, out, err = compare(capsys, str(tmp_path / "A"), str(tmp_path / "B"), "--format", "json,md", "--out", str(tmp_path))
    assert code == 0, err  # no --fail-on: the comparison is said, not gated
    doc = json.loads((tmp_path / "compare.json").read_text())
    by = cells(doc)
    assert {k: c["status"] for k, c in by.items()} == {
        "overlap on add": "regressed", "overlap on te": "unchanged", "relu on add": "unchanged", "relu on te": "unchanged"}
    worse = by["overlap on add"]
    assert worse["metric"] == "heldout_r2" and worse["a"] == pytest.approx(8 / 9) and worse["b"] == pytest.approx(0.0, abs=1e-9)
    assert worse["model_change"] == ["weights [0.0, 0.4, 1.0] → [0.0, 0.0, 1.0]"]  # the same cell, the change beside it
    assert by["relu on add"]["delta"] == 0.0 and by["relu on add"]["model_change"] == []
    assert doc["flips"] == [{"expectation": "leak", "subject": "overlap", "task": "add", "a": "PASS", "b": "FAIL"}]
    assert doc["averages"]["heldout_r2"]["cells"] == 2
    assert any(m["field"] == "suite_sha256" for m in doc["metadata"])
    assert "| overlap on add | regressed |" in out and (tmp_path / "compare.md").read_text() == out
    assert compare(capsys, str(tmp_path / "A"), str(tmp_path / "B"), "--fail-on", "regressed")[0] == 1
    assert compare(capsys, str(tmp_path / "A"), str(tmp_path / "A"), "--fail-on", "changed")[0] == 0


def test_unchanged_seeds_pair_to_zero_and_fewer_steps_regress_by_a_paired_t_test(tmp_path, capsys):
    (tmp_path / "n.yaml").write_text(NET)
    (tmp_path / "worse.yaml").write_text(NET.replace("max_steps: 400", "max_steps: 2"))
    for suite, results in (("n.yaml", "A"), ("n.yaml", "A2"), ("worse.yaml", "B")):
        run(tmp_path / suite, tmp_path / results)
    code, _, err = compare(capsys, str(tmp_path / "A"), str(tmp_path / "A2"), "--format", "json", "--out", str(tmp_path),
                           "--fail-on", "changed")
    assert code == 0, err
    same = cells(json.loads((tmp_path / "compare.json").read_text()))["net on add"]
    assert same["status"] == "unchanged" and same["n_pairs"] == 3
    assert same["seed_deltas"] == {"0": 0.0, "1": 0.0, "2": 0.0}
    code, out, _ = compare(capsys, str(tmp_path / "A"), str(tmp_path / "B"), "--format", "json", "--out", str(tmp_path),
                           "--fail-on", "regressed")
    assert code == 1
    worse = cells(json.loads((tmp_path / "compare.json").read_text()))["net on add"]
    assert worse["status"] == "regressed" and worse["n_pairs"] == 3 and worse["p_value"] < 0.05
    assert worse["model_change"] == ["max_steps 400 → 2"]
    assert "paired t-test over 3 seeds" in worse["rule"]


def test_a_missing_cell_is_gone_not_regressed(tmp_path, capsys):
    (tmp_path / "a.yaml").write_text(kernel_suite("k", "leak"))
    (tmp_path / "b.yaml").write_text(kernel_suite("k", "leak", relu=False))
    run(tmp_path / "a.yaml", tmp_path / "A")
    run(tmp_path / "b.yaml", tmp_path / "B")
    code, out, err = compare(capsys, str(tmp_path / "A"), str(tmp_path / "B"), "--fail-on", "regressed", "--format", "json",
                             "--out", str(tmp_path))
    assert code == 0, out + err  # gone is not a regression
    by = cells(json.loads((tmp_path / "compare.json").read_text()))
    assert {k: c["status"] for k, c in by.items()} == {
        "overlap on add": "unchanged", "overlap on te": "unchanged", "relu on add": "gone", "relu on te": "gone"}
    assert compare(capsys, str(tmp_path / "A"), str(tmp_path / "B"), "--fail-on", "changed")[0] == 1
    # and the other way round, new
    compare(capsys, str(tmp_path / "B"), str(tmp_path / "A"), "--format", "json", "--out", str(tmp_path))
    assert cells(json.loads((tmp_path / "compare.json").read_text()))["relu on te"]["status"] == "new"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
                          check=True, capture_output=True, text=True).stdout.strip()


def test_provenance_comes_from_the_users_git_repository_clean_and_dirty(tmp_path, capsys):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    suite = repo / "s.yaml"
    suite.write_text(kernel_suite("k", "leak"))
    git(repo, "add", "s.yaml")
    git(repo, "commit", "-qm", "suite")
    head = git(repo, "rev-parse", "HEAD")
    results = tmp_path / "res"
    run(suite, results)
    (repo / "notes.txt").write_text("an untracked file")
    run(suite, results)  # the same cells (reused), from a dirty tree
    store = ResultStore(results / "store")
    clean, dirty = store.runs()
    store.close()
    assert clean.info["code"] == [{"repo": str(repo.resolve()), "sha": head, "dirty": False}]
    assert dirty.info["code"][0]["sha"] == head and dirty.info["code"][0]["dirty"] is True
    assert re.fullmatch(r"[0-9a-f]{64}", dirty.info["code"][0]["diff_sha256"])
    assert clean.info["command"] == f"compbench run --suite {suite} --results {results} -q --device cpu --format md"
    assert clean.info["suite_sha256"] == dirty.info["suite_sha256"] and clean.profile is None
    assert clean.info["machine"]["cores_usable"] >= 1 and clean.info["machine"]["device"] == "cpu"
    assert clean.info["compbench"]["version"] and clean.info["n_run"] == 4 and dirty.info["n_cached"] == 4
    # Two runs of one store compare by id: the same cells, unchanged, and the dirty state shown as what differs.
    code, out, err = compare(capsys, clean.id, dirty.id, "--results", str(results), "--format", "json", "--out", str(tmp_path))
    doc = json.loads((tmp_path / "compare.json").read_text())
    assert code == 0 and doc["counts"]["unchanged"] == 4 and doc["counts"]["regressed"] == 0, out + err
    fields = {m["field"]: (m["a"], m["b"]) for m in doc["metadata"]}
    assert fields[f"code[{repo.resolve()}].dirty"] == ("False", "True")
    assert compare(capsys, "no-such-run", dirty.id, "--results", str(results))[0] == 2


def test_a_recomputed_cell_keeps_its_superseded_record_and_the_earlier_run_compares_as_it_was(tmp_path, capsys):
    suite = tmp_path / "k.yaml"
    suite.write_text(kernel_suite("k", "leak", relu=False))
    results = tmp_path / "res"
    run(suite, results)
    assert main(["run", "--suite", str(suite), "--results", str(results), "-q", "--force", "--format", "md"]) == 0
    with sqlite3.connect(results / "store" / "records.sqlite") as db:
        rows = db.execute("SELECT key, superseded FROM records ORDER BY id").fetchall()
    assert [s for _, s in rows] == [1, 1, 0, 0] and {k for k, _ in rows[:2]} == {k for k, _ in rows[2:]}
    store = ResultStore(results / "store")
    first, second = store.runs()
    assert [r.key for r in store.run_records(first)] == [r.key for r in store.run_records(second)]
    assert len(store.latest()) == 2  # readers see the current record of each cell only
    store.close()


V1_TABLES = [
    "CREATE TABLE meta (name TEXT PRIMARY KEY, value TEXT)",
    "CREATE TABLE records (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, suite TEXT, status TEXT, created REAL,"
    " record TEXT NOT NULL)",
    "CREATE TABLE claims (job TEXT PRIMARY KEY, owner TEXT, created REAL)",
    "CREATE INDEX records_key ON records (key)",
]


def test_a_store_without_a_runs_table_migrates_keeping_every_record(tmp_path, capsys):
    suite = tmp_path / "k.yaml"
    suite.write_text(kernel_suite("k", "leak"))
    run(suite, tmp_path / "new")
    with sqlite3.connect(tmp_path / "new" / "store" / "records.sqlite") as db:
        rows = db.execute("SELECT key, suite, status, created, record FROM records ORDER BY id").fetchall()
    old = tmp_path / "old"
    (old / "store").mkdir(parents=True)
    with sqlite3.connect(old / "store" / "records.sqlite") as db:  # the layout compbench wrote before issue #37
        for statement in V1_TABLES:
            db.execute(statement)
        db.execute("INSERT INTO meta VALUES ('schema_version', '1')")
        db.executemany("INSERT INTO records (key, suite, status, created, record) VALUES (?, ?, ?, ?, ?)", rows)
    # Read as it is (a comparison writes nothing): every record, no verdicts, said so.
    code, out, err = compare(capsys, str(old), str(tmp_path / "new"), "--fail-on", "changed")
    assert code == 0 and "4 unchanged" in out and "records no run" in out, out + err
    with sqlite3.connect(old / "store" / "records.sqlite") as db:
        assert db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone() == ("1",)
    # A run migrates it: every record kept (and reused), the runs table added, the layout 2.
    capsys.readouterr()
    assert main(["run", "--suite", str(suite), "--results", str(old), "-q", "--format", "md"]) == 0
    assert "0 cells run, 4 reused" in capsys.readouterr().out
    with sqlite3.connect(old / "store" / "records.sqlite") as db:
        assert db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone() == ("2",)
        kept = db.execute("SELECT key, suite, status, created, record, superseded FROM records ORDER BY id").fetchall()
        assert [r[:5] for r in kept] == rows and all(r[5] == 0 for r in kept)
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (1,)


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for args in ([str(tmp_path / "empty"), str(tmp_path / "empty")], ["r1", "r2"],
                 [str(tmp_path), str(tmp_path), "--format", "pdf"]):
        code, out, err = compare(capsys, *args)
        assert code == 2 and err.startswith("compbench: ") and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.slow
def test_the_how_to_example_runs_as_written(tmp_path, capsys, monkeypatch):
    text = DOCS.read_text(encoding="utf-8")
    before = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    after = before.replace("[0.0, 0.4, 1.0]", "[0.0, 0.0, 1.0]")
    monkeypatch.chdir(tmp_path)
    Path("before.yaml").write_text(before)
    Path("after.yaml").write_text(after)
    summary = tmp_path / "step-summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    commands = re.search(r"```bash\n(.*?)```", text, re.S).group(1).strip().splitlines()
    codes = []
    for line in commands:
        assert line.startswith("compbench ")
        codes.append(main(line.split()[1:]))
    assert codes == [0, 1, 1]  # the pull request's run fails its claim; the comparison fails on the regression
    doc = json.loads(Path("compare.json").read_text())
    assert {c["model"] + " on " + c["task"]: c["status"] for c in doc["cells"]} == {
        "overlap on add": "regressed", "overlap on te": "unchanged", "relu on add": "unchanged", "relu on te": "unchanged"}
    assert [f["expectation"] for f in doc["flips"]] == ["leak"]
    assert "| overlap on add | regressed |" in summary.read_text() and Path("compare.md").is_file()
