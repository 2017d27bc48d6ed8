"""compbench.session, the one run use case: `compbench run`, `compbench.evaluate` and the pytest plugin are faces of it
(issue #36, item 1). The same request gives the same store rows, verdicts and report files from each face, and each
refuses the same misuse in the same words, where they used to differ."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_suites import NET, cli, kernel_suite

import compbench
from compbench.store import ResultStore
from compbench.suite import SuiteError

# Two kernels and, where a request adds it, the width-8 file model; `impossible` fails, so the outcome has a FAIL.
SUITE = kernel_suite("faces", "leak", "chance", "impossible")
REPORT_FILES = ("leaderboard.csv", "theory.csv", "records.csv", "expectations.csv", "predictions.parquet")
TIMES = ("wall_time", "time", "seconds", "date", "commit")  # what tells one run from another, never what it found


@pytest.fixture()
def work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding the suite and net.py, the current directory of every face (net.py:Net resolves alike)."""
    (tmp_path / "faces.yaml").write_text(SUITE, encoding="utf-8")
    (tmp_path / "net.py").write_text(NET, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def plugin(work: Path, *args: str) -> subprocess.CompletedProcess:
    """`pytest faces.yaml ARGS` in `work`: the plugin's face (a process of its own, as a user runs it: pytester's
    in-process runs would import torch a second time after this test)."""
    return subprocess.run([sys.executable, "-m", "pytest", "faces.yaml", "-p", "no:cacheprovider", *args], cwd=work,
                          capture_output=True, text=True, timeout=600)


def rows(results: Path) -> list[tuple]:
    """The store's records as what a run found: cell, status, every metric, the predictions (not timings or ids)."""
    out = []
    for r in ResultStore(results / "store"):
        out.append((r.model, r.task, r.seed, r.key, r.status.value, r.adapter, json.dumps(r.metrics, sort_keys=True),
                    json.dumps(r.predictions), json.dumps(r.theory_predictions)))
    return sorted(out)


def table(results: Path, name: str) -> list[dict[str, str]]:
    """A report table's rows (CSV, or the predictions' parquet file) without the columns that time the run."""
    if name.endswith(".parquet"):
        import pandas as pd

        frame = pd.read_parquet(results / name)
        frame = frame.astype(object).where(frame.notna(), None)  # a missing cell (NaN) equals another one
        return [{k: v for k, v in row.items() if not any(t in k for t in TIMES)} for row in frame.to_dict("records")]
    text = (results / name).read_text(encoding="utf-8")
    return [{k: v for k, v in row.items() if not any(t in k for t in TIMES)} for row in csv.DictReader(io.StringIO(text))]


def summary(results: Path) -> dict:
    doc = json.loads((results / "summary.json").read_text(encoding="utf-8"))
    return {k: v for k, v in doc.items() if k not in TIMES}


def verdicts_of(outcome) -> list[tuple]:
    return sorted((v.expectation, v.subject, v.task, v.status, json.dumps(v.measured)) for v in outcome.verdicts)


@pytest.mark.slow
@pytest.mark.parametrize("models", [(), ("net.py:Net", "*")], ids=["suite", "added-file-model"])
def test_the_three_faces_give_the_same_records_outcome_and_report(work, models):
    from compbench import session

    flags = [x for m in models for x in ("--model", m)]
    ran = cli("run", "--suite", "faces.yaml", "--results", "by-cli", "-q", *flags)
    assert ran.rc == 1, ran.text  # `impossible` fails
    res = compbench.evaluate("faces.yaml", models=list(models) or None, out="by-api", report=True)
    plugged = plugin(work, "--compbench-results", "by-plugin", *[x for m in models for x in ("--compbench-model", m)])

    # Records: the same rows in every face's store.
    expected = rows(work / "by-cli")
    assert len(expected) == (6 if models else 4)
    assert rows(work / "by-api") == expected
    assert rows(work / "by-plugin") == expected
    # Outcome: the same verdicts (the plugin's read back from its store by the same outcome), the same exit.
    request = session.RunRequest("faces.yaml", models=models or None, results=work / "by-plugin")
    assert verdicts_of(res.outcome) == verdicts_of(session.stored(session.plan(request)))
    cli_verdicts = table(work / "by-cli", "expectations.csv")
    assert sorted((v["expectation"], v["verdict"]) for v in cli_verdicts) == \
        sorted((v.expectation, v.status) for v in res.verdicts) == [("chance", "PASS"), ("impossible", "FAIL"), ("leak", "PASS")]
    assert res.exit_code == ran.rc == 1 and plugged.returncode == 1, plugged.stdout
    # Report: every file field by field (but the run's timings).
    for name in REPORT_FILES:
        assert table(work / "by-api", name) == table(work / "by-cli", name), name
    assert summary(work / "by-api") == summary(work / "by-cli")


def test_evaluate_shows_the_stored_models_beside_an_added_one_as_run_does(work):
    assert cli("run", "--suite", "faces.yaml", "--results", "res", "-q").rc == 1
    res = compbench.evaluate("faces.yaml", models=["net.py:Net"], tasks=["add"], out="res", report=True)
    # Judged: only what ran (Net on add); shown: the suite's stored models beside it, as `compbench run` shows them.
    assert [(r.model, r.task) for r in res.records] == [("Net", "add")]
    board = res.leaderboard()
    assert list(board.index) == ["overlap", "relu", "Net"] and list(board.columns) == ["add", "te"]
    stored = next(float(r["mean"]) for r in table(work / "res", "leaderboard.csv") if (r["model"], r["task"]) == ("overlap", "add"))
    assert board.loc["overlap", "add"] == pytest.approx(stored)
    again = cli("run", "--suite", "faces.yaml", "--results", "res", "--model", "net.py:Net", "--task", "add")
    shown = [line.split()[0] for line in again.out.splitlines() if line.split()[:1] in (["overlap"], ["relu"], ["Net"])]
    assert shown == list(board.index)


def _api_refusal(**kwargs) -> str:
    with pytest.raises(SuiteError) as caught:
        compbench.evaluate("faces.yaml", **kwargs)
    (issue,) = caught.value.issues
    return f"{issue.field}: {issue.message}"


@pytest.mark.parametrize(("argv", "kwargs", "cli_says", "api_says"), [
    # A file model cannot go to Ray: evaluate() had no executor at all.
    (["--model", "net.py:Net", "--executor", "ray"], {"models": ["net.py:Net"], "executor": "ray"},
     "model 'Net' comes from a file or module (file.py:Name) or a Python object, which runs on the local or process "
     "executor", "executor: model 'Net' comes from a file or module"),
    # A typo among good model globs: the CLI ran the others and said nothing.
    (["--model", "nope", "--model", "overlap"], {"models": ["nope", "overlap"]},
     "--model nope matches no model of suite faces and no adapter", "models: nope matches no model of suite faces"),
    # Tags without a model to tag: the CLI ignored them.
    (["--model-tags", "lazy"], {"tags": ["lazy"]},
     "--model-tags are the tags of a model added with --model: give --model too",
     "tags: are the tags of a model added with models: give models too"),
])
def test_misuse_is_refused_in_the_same_words_by_the_cli_and_evaluate(work, argv, kwargs, cli_says, api_says):
    ran = cli("run", "--suite", "faces.yaml", "--results", "res", "-q", *argv)
    assert ran.rc == 2 and f"compbench: {cli_says}" in ran.err, ran.text
    assert not (work / "res" / "store").exists()  # refused before anything ran
    said = _api_refusal(**kwargs)
    assert said.startswith(api_says), said
    # One message: past the argument's name (and its spelling inside), the words are the CLI's.
    cli_line = next(line for line in ran.err.splitlines() if line.startswith("compbench: "))
    assert said.split(": ", 1)[1].replace(" models", " --model") in cli_line


@pytest.mark.slow
def test_the_plugin_refuses_a_model_typo_in_the_clis_words(work):
    result = plugin(work, "--compbench-model", "nope", "--collect-only")
    said = _api_refusal(models=["nope"]).split(": ", 1)[1]
    assert result.returncode != 0 and f"--compbench-model {said}" in result.stdout, result.stdout


@pytest.mark.slow
def test_the_plugin_refuses_a_users_folder_as_run_does_in_one_line(work):
    mine = work / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine", encoding="utf-8")
    result = plugin(work, "--compbench-results", "mine")
    ran = cli("run", "--suite", "faces.yaml", "--results", "mine", "-q")
    said = "mine: is not a compbench results directory (it holds notes.txt)"
    assert ran.rc == 2 and said in ran.err
    assert result.returncode == 1 and said in result.stdout and "Traceback" not in result.stdout, result.stdout
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]  # no store, no marker


def test_a_plan_never_changes_the_callers_suite_and_builds_each_task_once(work, monkeypatch):
    from compbench import session
    from compbench.runner import cells
    from compbench.suite import load_suite

    loaded = load_suite("faces.yaml")
    before = [(m.id, m.seeds) for m in loaded.models]
    built: list[str] = []
    real = cells.make_task
    monkeypatch.setattr(cells, "make_task", lambda family, **p: built.append(family) or real(family, **p))
    plan = session.plan(session.RunRequest(loaded, models=("net.py:Net", "overlap"), seeds=3, tasks=("add",),
                                           results=work / "res", formats=("csv",)))
    result = session.run(plan)
    published = session.report(plan, result)
    assert [(m.id, m.seeds) for m in loaded.models] == before and plan.whole is not loaded
    assert [m.id for m in plan.suite.models] == ["overlap", "Net"] and [m.id for m in plan.whole.models] == ["overlap", "relu", "Net"]
    assert sorted(built) == ["additive", "transitive_equivalence"]  # each of the suite's tasks once: plan, run, report
    assert [(c.model, c.task, c.seed) for c in result.outcome.cells] == [("overlap", "add", 0), ("Net", "add", 0),
                                                                         ("Net", "add", 1), ("Net", "add", 2)]
    assert {(c.model, c.task) for c in published.outcome.cells} >= {("relu", "te"), ("Net", "te")}


@pytest.mark.parametrize("models", [(), ("net.py:Net", "*")], ids=["suite", "added-file-model"])
def test_compbench_report_writes_the_report_compbench_run_wrote(work, models):
    # `compbench report` is a face of the session too (plan → stored → report): over the store a run left, it writes
    # that run's report, field by field, into another folder (--report-dir), and says the same outcome.
    flags = [x for m in models for x in ("--model", m)]
    ran = cli("run", "--suite", "faces.yaml", "--results", "by-run", "-q", *flags)
    assert ran.rc == 1, ran.text  # `impossible` fails
    again = cli("report", "--suite", "faces.yaml", "--results", "by-run", "--report-dir", "by-report", "-q")
    assert again.rc == ran.rc, again.text
    for name in REPORT_FILES:
        assert table(work / "by-report", name) == table(work / "by-run", name), name
    assert summary(work / "by-report") == summary(work / "by-run")
    assert sorted(p.name for p in (work / "by-report").iterdir() if p.name != ".compbench") == \
        sorted(p.name for p in (work / "by-run").iterdir() if p.name not in (".compbench", "store"))
