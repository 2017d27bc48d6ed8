"""Hostile and careless use (#35): a results directory that is not compbench's, a baseline by name,
a damaged store row, a store reached through a symbolic link."""

from __future__ import annotations

import importlib
import json
import sqlite3
from pathlib import Path

import pytest

from compbench.cli import main
from tiny_suites import suite_text


@pytest.fixture
def suite(suite_file) -> Path:
    return suite_file(name="tiny", file="suites/tiny.yaml")  # tests/suites/te.yaml


def refused(capsys) -> str:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.startswith("compbench: ")]
    assert len(lines) == 1, err
    return lines[0]


# -- 17: only an empty folder, or one compbench made, is a results directory ----------------------


def test_a_users_folder_is_refused_and_nothing_of_it_replaced(suite, tmp_path, capsys, monkeypatch):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "records.csv").write_text("my data")
    (mine / "leaderboard.md").write_text("my notes")
    monkeypatch.setattr("compbench.runner.run.run_suite", lambda *a, **k: pytest.fail("trained before refusing"))
    assert main(["run", "--suite", str(suite), "--results", str(mine), "-q"]) == 2
    line = refused(capsys)
    assert "is not a compbench results directory" in line and "--results results/tiny" in line
    assert sorted(p.name for p in mine.iterdir()) == ["leaderboard.md", "records.csv"]
    assert (mine / "records.csv").read_text() == "my data"
    assert main(["report", "--suite", str(suite), "--results", str(mine)]) == 2
    assert "is not a compbench results directory" in refused(capsys)


@pytest.mark.parametrize("where", ["/", "home", "suites"])
def test_root_home_and_the_suites_folder_are_refused(where, suite, tmp_path, capsys, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setattr("compbench.runner.run.run_suite", lambda *a, **k: pytest.fail("trained before refusing"))
    target = {"/": "/", "home": str(home), "suites": str(suite.parent)}[where]
    assert main(["run", "--suite", str(suite), "--results", target, "-q"]) == 2
    line = refused(capsys)
    assert "compbench never writes a report there" in line and "pass a folder of its own" in line
    assert sorted(p.name for p in home.iterdir()) == []
    assert sorted(p.name for p in suite.parent.iterdir()) == ["tiny.yaml"]


def test_a_new_folder_is_claimed_and_an_existing_published_one_keeps_working(suite, tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["run", "--suite", str(suite), "--results", str(out), "-q"]) == 0
    assert json.loads((out / ".compbench").read_text())["suite"] == "tiny"
    assert main(["run", "--suite", str(suite), "--results", str(out), "-q"]) == 0  # its own: resumes
    # A results directory published before the marker existed: summary.json naming the suite claims it.
    (out / ".compbench").unlink()
    assert main(["report", "--suite", str(suite), "--results", str(out)]) == 0
    assert (out / ".compbench").is_file()
    capsys.readouterr()


def test_another_runs_half_written_marker_does_not_make_the_folder_foreign(suite, tmp_path, capsys):
    # Two runs started together on one new folder: the first is writing `.compbench` through its
    # temporary when the second looks (CI saw the second refuse the folder, exit 2).
    out = tmp_path / "res"
    out.mkdir()
    (out / ".compbench.4242.0123abcd.tmp").write_text("")
    assert main(["run", "--suite", str(suite), "--results", str(out), "-q"]) == 0
    assert json.loads((out / ".compbench").read_text())["suite"] == "tiny"
    # A user's file that merely ends in .tmp is still the user's.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "draft.tmp").write_text("mine")
    assert main(["run", "--suite", str(suite), "--results", str(mine), "-q"]) == 2
    assert "is not a compbench results directory" in refused(capsys)


def test_a_concurrent_run_claiming_the_folder_while_this_one_looks_does_not_make_it_foreign(suite, tmp_path, capsys,
                                                                                              monkeypatch):
    # Two runs started together on one new folder: the other one writes its `.compbench` (and starts its store) just
    # after this one found none, before this one lists the folder. Forced here at the look for the marker; CI saw
    # test_two_concurrent_runs_share_the_store[process] exit 2 on it, under load.
    publish = importlib.import_module("compbench.report.publish")  # the package exports a function of that name

    out = tmp_path / "res"
    real = publish.read_contained
    raced = []

    def look(root, relative):
        found = real(root, relative)
        if relative == publish.MARKER_FILE and not raced:
            raced.append(True)
            out.mkdir(exist_ok=True)
            (out / ".compbench").write_text(json.dumps({"compbench": "results directory", "suite": "tiny"}))
            (out / "store").mkdir()
        return found

    monkeypatch.setattr(publish, "read_contained", look)
    assert main(["run", "--suite", str(suite), "--results", str(out), "-q"]) == 0, capsys.readouterr().err
    assert raced
    assert json.loads((out / ".compbench").read_text())["suite"] == "tiny"
    assert json.loads((out / "summary.json").read_text())["suite"] == "tiny"
    assert (out / "leaderboard.md").is_file() and (out / "store" / "records.sqlite").is_file()


def test_check_and_baseline_record_refuse_a_users_folder_too(suite, tmp_path, capsys):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    assert main(["baseline", "record", "--suite", str(suite), "--results", str(mine), "--out",
                 str(tmp_path / "b.json"), "-q"]) == 2
    assert "is not a compbench results directory" in refused(capsys)
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


# -- 18: `check --baseline NAME` finds the bundled baseline, as `--suite NAME` finds the bundled suite --


def test_a_bare_baseline_name_is_the_bundled_one_and_says_which_file(suite, tmp_path, capsys, monkeypatch):
    from compbench.suite import bundled_dir

    monkeypatch.chdir(tmp_path)
    # The bundled kernel-limits baseline is found (and named); it is another suite's, so nothing runs.
    assert main(["check", "--suite", str(suite), "--baseline", "kernel-limits", "--results", "res", "-q"]) == 2
    err = capsys.readouterr().err
    assert f"baseline 'kernel-limits' from {bundled_dir('baselines') / 'kernel-limits.json'}" in err
    assert "is for suite 'kernel-limits'" in err and not (tmp_path / "res").exists()


def test_a_bare_baseline_name_runs_the_check_and_a_local_copy_is_an_ambiguity(suite, tmp_path, capsys, monkeypatch):
    bundled = tmp_path / "bundled"
    bundled.mkdir()
    real = __import__("compbench.suite.load", fromlist=["bundled_dir"]).bundled_dir
    monkeypatch.setattr("compbench.suite.load.bundled_dir", lambda kind: bundled if kind == "baselines" else real(kind))
    monkeypatch.chdir(tmp_path)
    assert main(["baseline", "record", "--suite", str(suite), "--results", "res", "--out",
                 str(bundled / "tiny.json"), "-q"]) == 0
    assert main(["check", "--suite", str(suite), "--baseline", "tiny", "--results", "res", "-q"]) == 0
    assert f"baseline 'tiny' from {bundled / 'tiny.json'}" in capsys.readouterr().err
    (tmp_path / "baselines").mkdir()
    (tmp_path / "baselines" / "tiny.json").write_bytes((bundled / "tiny.json").read_bytes())
    assert main(["check", "--suite", str(suite), "--baseline", "tiny", "--results", "res", "-q"]) == 2
    err = capsys.readouterr().err
    assert "'tiny' names the bundled baseline" in err and "give a path to choose (baselines/tiny.json for yours)" in err
    assert "Traceback" not in err


# -- 15: a damaged row of the store is one line naming its key; the other records are used -----------

DAMAGE = {
    "bad JSON": lambda text: text[: len(text) // 2],
    "not an object": lambda text: json.dumps([1, 2, 3]),
    "metrics not a mapping": lambda text: json.dumps({**json.loads(text), "metrics": "oops"}),
    "seed not a number": lambda text: json.dumps({**json.loads(text), "seed": "zero"}),
    "record_schema 99": lambda text: json.dumps({**json.loads(text), "record_schema": 99}),
    # Fields a record leaves to decode on first read (records.LAZY_FIELDS) are still checked as the row is read.
    "predictions not a list": lambda text: json.dumps({**json.loads(text), "predictions": "oops"}),
    "params not a mapping": lambda text: json.dumps({**json.loads(text), "params": [1, 2]}),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_damaged_store_row_is_named_and_its_cell_recomputed(damage, suite, tmp_path, capsys):
    suite.write_text(suite_text(name="tiny", models=["{id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}",
                                                     "{id: k2, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.3, 1.0]}}"]))
    out = tmp_path / "res"
    assert main(["run", "--suite", str(suite), "--results", str(out), "-q"]) == 0
    capsys.readouterr()
    with sqlite3.connect(out / "store" / "records.sqlite") as db:
        (row, key, text), *others = db.execute("SELECT id, key, record FROM records ORDER BY id").fetchall()
        db.execute("UPDATE records SET record = ? WHERE id = ?", (DAMAGE[damage](text), row))
    assert others
    main(["report", "--suite", str(suite), "--results", str(out)])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    warned = [line for line in err.splitlines() if "is damaged" in line]
    assert len(warned) == 1 and f"cell {key} is damaged" in warned[0], err
    assert main(["run", "--suite", str(suite), "--results", str(out), "-q"]) == 0
    done = capsys.readouterr()
    assert "Traceback" not in done.err and f"cell {key} is damaged" in done.err
    assert "1 cells run, 1 reused" in done.out + done.err
    assert main(["report", "--suite", str(suite), "--results", str(out)]) == 0  # the recomputed row supersedes it
    assert "is damaged" not in capsys.readouterr().err


# -- 8: the store is never opened through a symbolic link ----------------------------------------------


@pytest.mark.parametrize("linked", ["store", "store/records.sqlite"])
def test_a_symlinked_store_is_refused_and_the_target_untouched(linked, suite, tmp_path, capsys):
    out = tmp_path / "res"
    assert main(["run", "--suite", str(suite), "--results", str(out), "-q"]) == 0
    elsewhere = tmp_path / "elsewhere"
    (out / linked).rename(elsewhere)
    (out / linked).symlink_to(elsewhere, target_is_directory=linked == "store")
    before = sorted(p.name for p in (elsewhere.iterdir() if elsewhere.is_dir() else [elsewhere]))
    snapshot = {p: p.read_bytes() for p in (elsewhere.rglob("*") if elsewhere.is_dir() else [elsewhere])}
    capsys.readouterr()
    for command in (["run", "--suite", str(suite), "--results", str(out), "-q", "--force"],
                    ["report", "--suite", str(suite), "--results", str(out)]):
        assert main(command) == 2
        line = refused(capsys)
        assert f"{out / linked}: is a symbolic link" in line or f"{out / 'store'}: is a symbolic link" in line, line
    assert sorted(p.name for p in (elsewhere.iterdir() if elsewhere.is_dir() else [elsewhere])) == before
    assert {p: p.read_bytes() for p in snapshot} == snapshot
