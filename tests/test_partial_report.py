"""A partial run (--task, --model, evaluate(tasks=..)) never replaces a fuller report (issue #38, item 5).

Its report is of the whole suite as the store holds it (the cells it did not run and the store lacks
shown as missing), its exit code judges only what it selected, and it never deletes a plot that
shows a cell outside its selection.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from tiny_suites import cli_process, kernel_suite

ROOT = Path(__file__).resolve().parent.parent

SUITE = kernel_suite("part", "leak", "chance")
TE_PLOTS = ("theory-te.png", "theory-te.svg", "grid-te.png", "grid-te.svg")


def _cli(*args: str) -> subprocess.CompletedProcess:
    """`python -m compbench.cli ARGS` with this worktree's code (not an installed copy's)."""
    return cli_process(*args, cwd=ROOT)


def _cells(out: Path) -> dict[tuple[str, str], str]:
    board = pd.read_csv(out / "leaderboard.csv")
    return {(m, t): s for m, t, s in zip(board.model, board.task, board.status)}


@pytest.mark.slow
def test_a_partial_run_reports_the_whole_suite_and_keeps_the_other_tasks_plots(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "out"
    # Into an empty directory: te did not run and the store lacks it: its cells are listed, marked missing.
    done = _cli("run", "--suite", str(suite), "--results", str(out), "--task", "add", "-q")
    assert done.returncode == 0, done.stderr
    assert _cells(out) == {("overlap", "add"): "ok", ("relu", "add"): "ok",
                           ("overlap", "te"): "missing", ("relu", "te"): "missing"}
    board = (out / "leaderboard.md").read_text()
    assert "| this run      | --task add: only the selected cells were run" in board
    assert "| cells missing | 2: not in the store" in board
    assert "report: the whole suite as the store holds it (part: 4 cells (2 ok, 2 missing)" in done.stdout
    assert list(pd.read_csv(out / "expectations.csv").expectation) == ["leak"]  # chance (on te) not judged, not failed

    done = _cli("run", "--suite", str(suite), "--results", str(out), "-q")
    assert done.returncode == 0, done.stderr
    before = {name: (out / "plots" / name).read_bytes() for name in TE_PLOTS}

    # --task add again, recomputed: the leaderboard keeps te's rows and verdict, te's plots keep their bytes.
    done = _cli("run", "--suite", str(suite), "--results", str(out), "--task", "add", "--force", "-q")
    assert done.returncode == 0, done.stderr
    assert "2 cells run, 0 reused" in done.stdout
    assert set(_cells(out).values()) == {"ok"} and len(_cells(out)) == 4
    records = pd.read_csv(out / "records.csv")
    assert sorted(zip(records.model, records.task)) == [("overlap", "add"), ("overlap", "te"), ("relu", "add"), ("relu", "te")]
    assert sorted(pd.read_csv(out / "expectations.csv").expectation) == ["chance", "leak"]
    assert {name: (out / "plots" / name).read_bytes() for name in TE_PLOTS} == before
    assert "te" in (out / "leaderboard.html").read_text().split("Held-out score", 1)[1]

    # --model relu: the same, selecting by model.
    done = _cli("run", "--suite", str(suite), "--results", str(out), "--model", "relu", "--force", "-q")
    assert done.returncode == 0, done.stderr
    assert set(_cells(out).values()) == {"ok"} and len(_cells(out)) == 4
    assert {name: (out / "plots" / name).read_bytes() for name in TE_PLOTS} == before


@pytest.mark.slow
def test_a_partial_run_judges_only_its_selection_while_the_report_shows_the_rest(tmp_path):
    # `impossible` fails on te; a run of --task add exits 0 (it judged add only), its report still shows te's FAIL.
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE + "  - {id: impossible, source: {paper: compbench, threshold: a test fixture}, claim: beats_kernel, models: [overlap], tasks: [te]}\n")
    out = tmp_path / "out"
    assert _cli("run", "--suite", str(suite), "--results", str(out), "-q").returncode == 1
    done = _cli("run", "--suite", str(suite), "--results", str(out), "--task", "add", "-q")
    assert done.returncode == 0, done.stderr
    assert "expectations 1/1 pass" in done.stdout  # the run's own verdicts
    verdicts = pd.read_csv(out / "expectations.csv")
    assert dict(zip(verdicts.expectation, verdicts.verdict))["impossible"] == "FAIL"  # the report's: the whole suite


@pytest.mark.slow
def test_a_partial_run_leaves_a_fuller_report_whose_store_is_gone(tmp_path):
    # A published results directory: the report files without the store (it is not committed).
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    full, published = tmp_path / "full", tmp_path / "published"
    assert _cli("run", "--suite", str(suite), "--results", str(full), "-q").returncode == 0
    shutil.copytree(full, published, ignore=shutil.ignore_patterns("store"))
    files = {p: p.read_bytes() for p in published.rglob("*") if p.is_file() and p.name != "status.json"}  # not a report file
    done = _cli("run", "--suite", str(suite), "--results", str(published), "--task", "add", "-q")
    assert done.returncode == 0, done.stderr
    assert f"the report in {published} was left as it was: it shows 2 cell(s) outside this run's selection" in done.stderr
    assert {p: p.read_bytes() for p in files} == files  # every report file, byte for byte


@pytest.mark.slow
def test_a_partial_report_never_deletes_a_plot_outside_its_selection(tmp_path):
    # Without records.csv (--format md,png) nothing says the old report was fuller: it is rewritten from the
    # store, which lacks te, yet te's plots stay (listed as left) until a report of the whole suite removes them.
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "out"
    assert _cli("run", "--suite", str(suite), "--results", str(out), "--format", "md,png", "-q").returncode == 0
    before = {name: (out / "plots" / name).read_bytes() for name in TE_PLOTS}
    shutil.rmtree(out / "store")
    done = _cli("run", "--suite", str(suite), "--results", str(out), "--task", "add", "--format", "md,png", "-q")
    assert done.returncode == 0, done.stderr
    assert {name: (out / "plots" / name).read_bytes() for name in TE_PLOTS} == before
    manifest = json.loads((out / "plots" / "manifest.json").read_text())
    assert [n for n, _ in manifest["plots"]] == ["theory-add", "grid-add"] and manifest["left"] == ["grid-te", "theory-te"]
    # `compbench report` is of the whole suite: te has no record, so its plots go.
    done = _cli("report", "--suite", str(suite), "--results", str(out), "--format", "md,png", "-q")
    assert done.returncode == 1, done.stderr  # te's cells are missing
    assert not any((out / "plots" / name).exists() for name in TE_PLOTS)
    assert "left" not in json.loads((out / "plots" / "manifest.json").read_text())


def test_evaluate_with_a_task_filter_keeps_the_whole_report(tmp_path):
    import compbench

    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "out"
    assert compbench.evaluate(str(suite), out=out, report=True).passed
    before = {name: (out / "plots" / name).read_bytes() for name in TE_PLOTS}
    res = compbench.evaluate(str(suite), tasks=["add"], out=out, report=True, force=True)
    assert res.passed and {r.task for r in res.records} == {"add"}  # the result is the selection's
    assert set(_cells(out).values()) == {"ok"} and len(_cells(out)) == 4  # the report is the suite's
    assert {name: (out / "plots" / name).read_bytes() for name in TE_PLOTS} == before
