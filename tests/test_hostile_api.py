"""Hostile and careless use of `compbench.evaluate()` and of ids (issue #35, items 4, 7, 16, 22, 23).

Every bad argument ends in one documented exception, `compbench.suite.SuiteError` (a ValueError),
whose message names the argument, raised before anything trains; never a raw TypeError from deep
inside, and never a run of nothing that passes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import compbench
from compbench.suite import SuiteError

ROOT = Path(__file__).resolve().parent.parent

TINY = """\
name: hostile-api
seeds: 1
tasks:
  - {id: add, family: additive, params: {}}
  - {id: te, family: transitive_equivalence, params: {classes: [2, 2]}}
models:
  - {id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}, tags: [rich]}
expectations:
  - id: rich-fails
    claim: above
    models: ["@rich"]
    tasks: [te]
    metric: heldout_acc
    bound: 2.0
    source: {paper: compbench, threshold: a test fixture}
"""


@pytest.fixture()
def suite(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY, encoding="utf-8")
    return path


def refused(suite: Path, argument: str, *phrases: str, **kwargs) -> str:
    """evaluate(suite, **kwargs) raises SuiteError naming `argument` (and saying `phrases`); its message."""
    with pytest.raises(SuiteError) as caught:
        compbench.evaluate(suite, **kwargs)
    text = str(caught.value)
    assert f"{argument}:" in text, text
    for phrase in phrases:
        assert phrase in text, (phrase, text)
    return text


# --- 4: a task glob that matches nothing, and empty lists ------------------------------------------

def test_a_task_typo_is_refused_with_the_clis_message(suite, tmp_path):
    text = refused(suite, "tasks", "ad matches no task of suite hostile-api (tasks: add, te)", tasks=["ad"])
    cli = subprocess.run([sys.executable, "-m", "compbench", "run", "--suite", str(suite), "--task", "ad",
                          "--results", str(tmp_path / "out"), "-q"], capture_output=True, text=True,
                         env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert cli.returncode == 2, cli.stderr
    assert text.split("tasks: ", 1)[1] in cli.stderr  # one check, one message: the CLI's words after its flag
    # One typo among good globs is refused too, by both faces (a typo is never silently ignored).
    refused(suite, "tasks", "zz matches no task", tasks=["add", "zz"])


@pytest.mark.parametrize("argument", ["tasks", "models"])
def test_empty_lists_are_refused_not_read_as_everything(suite, argument):
    refused(suite, argument, "selects nothing", "pass None", **{argument: []})


# --- 7: a str is not a list of tags -----------------------------------------------------------------

def test_tags_as_a_str_is_refused_not_split_into_letters(suite):
    refused(suite, "tags", "tags=['rich']", models=["kernel"], tags="rich")
    # As a list it is one tag, and the suite's @rich claim judges the added model (and fails it: bound 2).
    res = compbench.evaluate(suite, models=["kernel"], model_args={"kernel": "overlap", "weights": [0.0, 0.4, 1.0]},
                             tags=["rich"], tasks=["te"])
    assert any(v.subject == "kernel" and not v.passed for v in res.verdicts) and not res.passed


# --- 16 and 22: each argument's type and range, named --------------------------------------------

@pytest.mark.parametrize(("kwargs", "argument", "phrase"), [
    ({"models": [torch.nn.Linear(2, 1)]}, "models", "pass its class (Linear) or a factory"),
    ({"models": torch.nn.Linear}, "models", "not a single model: models=[Linear]"),
    ({"models": ["k", 3]}, "models", "item 1 is int 3"),
    ({"models": "k"}, "models", "models=['k']"),
    ({"models": ["nope"]}, "models", "nope matches no model of suite hostile-api"),
    ({"tasks": [1]}, "tasks", "item 0 is int 1"),
    ({"tasks": "te"}, "tasks", "tasks=['te']"),
    ({"seeds": "2"}, "seeds", "got str '2'"),
    ({"seeds": 2.5}, "seeds", "got float 2.5"),
    ({"seeds": True}, "seeds", "got bool True"),
    ({"seeds": 0}, "seeds", "must be 1 or more"),
    ({"threads": "x"}, "threads", "got str 'x'"),
    ({"threads": -1}, "threads", "must be 0 or more"),
    ({"device": "gpu"}, "device", "auto, cpu, cuda"),
    ({"report": "yes", "out": "x"}, "report", "True or False"),
    ({"model_args": [1]}, "model_args", "must be a dict"),
])
def test_bad_arguments_are_refused_naming_the_argument(suite, kwargs, argument, phrase, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # out="x": nothing is written, but never into the checkout
    refused(suite, argument, phrase, **kwargs)


def test_report_into_another_suites_folder_is_refused_before_training(suite, tmp_path, monkeypatch):
    out = tmp_path / "other"
    out.mkdir()
    (out / "summary.json").write_text(json.dumps({"suite": "another"}), encoding="utf-8")
    import compbench.runner.run as run

    def no_training(*args, **kwargs):
        raise AssertionError("trained before refusing the results folder")

    monkeypatch.setattr(run, "run_suite", no_training)
    from compbench.report.publish import ForeignResultsError

    with pytest.raises(ForeignResultsError, match="holds the report of suite 'another'"):
        compbench.evaluate(suite, out=out, report=True)


class _NotAModel:
    pass


_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 3), st.floats(allow_nan=True), st.text(max_size=4),
    st.sampled_from(["k", "te", "add", "a*", "rich", "kernel", "", "nope"]),
    st.just(torch.nn.Linear(2, 1)), st.just(torch.nn.Linear), st.just(_NotAModel),
)
_ARGS = st.one_of(_VALUES, st.lists(_VALUES, max_size=3), st.tuples(_VALUES))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(models=_ARGS, tasks=_ARGS, tags=_ARGS, seeds=_ARGS, threads=_ARGS)
def test_fuzzed_arguments_run_or_are_refused_naming_the_argument(suite, models, tasks, tags, seeds, threads):
    try:
        compbench.evaluate(suite, models=models, tasks=tasks, tags=tags, seeds=seeds, threads=threads, report=False)
    except SuiteError as exc:
        named = {i.field for i in exc.issues}
        assert named and named <= {"suite", "models", "tasks", "tags", "seeds", "threads"}, str(exc)
        assert all(i.message for i in exc.issues), str(exc)


# --- 23: ids and tags ending in a newline, and a verdict without a threshold -----------------------

@pytest.mark.parametrize("where", ["task id", "model id", "tag"])
def test_ids_and_tags_with_a_trailing_newline_are_refused(tmp_path, where):
    text = {"task id": TINY.replace("{id: add,", '{id: "add\\n",'),
            "model id": TINY.replace("{id: k,", '{id: "k\\n",'),
            "tag": TINY.replace("tags: [rich]", 'tags: ["rich\\n"]').replace('"@rich"', '"*"')}[where]
    path = tmp_path / "nl.yaml"
    path.write_text(text, encoding="utf-8")
    done = subprocess.run([sys.executable, "-m", "compbench", "validate", str(path)], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "nl.yaml:" in done.stderr


BOOM = """\
import torch


class Boom(torch.nn.Module):
    def __init__(self, in_shape, n_out):
        super().__init__()
        self.layer = torch.nn.Linear(4, n_out)

    def forward(self, x):
        raise RuntimeError("boom")
"""


def test_a_failed_cells_verdict_says_why_it_has_no_threshold(tmp_path):
    (tmp_path / "boom.py").write_text(BOOM, encoding="utf-8")
    path = tmp_path / "s.yaml"
    path.write_text(TINY.replace("bound: 2.0", "bound: 0.0").replace('models: ["@rich"]', 'models: ["*"]')
                    + "", encoding="utf-8")
    res = compbench.evaluate(path, models=[str(tmp_path / "boom.py") + ":Boom"], tasks=["te"], out=tmp_path / "out",
                             report=True)
    line = next(v.line() for v in res.verdicts if v.subject == "Boom")
    assert "no threshold: the claim had no value to judge" in line and "(needs )" not in line, line
    board = (tmp_path / "out" / "leaderboard.md").read_text(encoding="utf-8")
    row = next(r for r in board.splitlines() if r.startswith("| rich-fails") and "| Boom" in r)
    assert "no threshold: the claim had no value to judge" in row, row
