"""Hostile and careless use (#35): a results directory that is not compbench's, a baseline by name,
a damaged store row, a store reached through a symbolic link."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from compbench.cli import main

TINY = """\
name: tiny
seeds: 1
tasks:
  - {id: te, family: transitive_equivalence}
models:
  - {id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}
"""


@pytest.fixture
def suite(tmp_path: Path) -> Path:
    path = tmp_path / "suites" / "tiny.yaml"
    path.parent.mkdir()
    path.write_text(TINY)
    return path


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
