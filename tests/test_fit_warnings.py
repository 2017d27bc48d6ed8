"""A model that did not fit its training cells is warned about in run, report and check (issue #38, item 4).

The fit threshold is a fact of the training metric (compbench.records.metric_facts), a suite may set
its own (`fit_threshold`), and the warning never changes an exit code.
"""

from __future__ import annotations

import re

import pytest

from compbench.cli import main
from compbench.records import CellError, CellRecord, Status
from compbench.records.metric_facts import fit_thresholds, fit_warnings
from tiny_suites import suite_text

SUITE = suite_text(name="fit", seeds=2, models=["{id: stuck, adapter: mlp, params: {width: 16, lr: 1.0e-6, max_steps: 1}}",
                                               "{id: overlap, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}"])
LINE = ("stuck did not fit its training cells on te: training accuracy (train_acc) 0.5 (mean over 2 seeds), "
        "fit threshold ≥ 0.9")


def _rec(model: str, seed: int, **metrics: float) -> CellRecord:
    return CellRecord(f"{model}-{seed}", "t", model, seed, Status.OK, kind="classification", metrics=metrics)


def test_the_fit_threshold_is_a_fact_of_each_training_metric_and_the_suite_can_set_it():
    # train_mse: no default (its scale is the task's); train_r2: none (measured at new inputs, not a fit)
    assert fit_thresholds() == {"train_acc": 0.9}
    records = [_rec("stuck", 0, train_acc=0.5), _rec("stuck", 1, train_acc=0.75), _rec("fits", 0, train_acc=1.0),
               CellRecord("x", "t", "broken", 0, Status.ERROR, kind="classification", error=CellError("boom"))]
    (w,) = fit_warnings(records)
    assert (w.model, w.task, w.metric, w.value, w.threshold, w.n_seeds) == ("stuck", "t", "train_acc", 0.625, 0.9, 2)
    assert fit_warnings(records, {"train_acc": 0.6}) == []  # the suite's threshold over the default
    mse = [CellRecord("r", "add", "net", 0, Status.OK, kind="regression", metrics={"train_mse": 0.5})]
    assert fit_warnings(mse) == []
    (w,) = fit_warnings(mse, {"train_mse": 0.1})  # lower is better: above the threshold misses it
    assert w.line() == "net did not fit its training cells on add: training MSE (train_mse) 0.5 (1 seed), fit threshold ≤ 0.1"


@pytest.mark.parametrize("value, message", [
    ("{train_ac: 0.9}", "'train_ac' is not a training metric a fit threshold applies to; did you mean 'train_acc'? "
                        "choose from train_acc, train_mse, train_r2"),
    ("{train_acc: 1.5}", "fit_threshold.train_acc is an accuracy, from 0 to 1; got 1.5"),
    ("{train_mse: -1}", "fit_threshold.train_mse is an MSE, at least 0; got -1"),
    ("{train_r2: .nan}", "fit_threshold.train_r2 must be a finite number, got nan"),
])
def test_a_bad_fit_threshold_is_one_clear_error_with_its_line(tmp_path, capsys, value, message):
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE + f"fit_threshold: {value}\n")
    assert main(["validate", str(suite)]) == 2
    err = capsys.readouterr().err
    assert f"{suite}:8: fit_threshold: {message}" in err and "Traceback" not in err


def test_a_model_that_did_not_fit_is_warned_about_in_run_report_and_check(tmp_path, capsys):
    suite = tmp_path / "fit.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--results", str(out), "-q"]) == 0  # a warning, not a failure
    err = capsys.readouterr().err
    assert f"warning: {LINE}" in err and "a warning, not a failure" in err
    assert "overlap did not fit" not in err  # the kernel interpolates its training cells
    board = (out / "leaderboard.md").read_text()
    assert "> **Warning: 1 model/task pair(s) did not fit their training cells**" in board and f"> - {LINE}" in board
    page = (out / "leaderboard.html").read_text()
    assert re.search(r'<section class="warnings"[^>]*>.*<li>' + re.escape(LINE) + "</li>", page)

    assert main(["report", "--suite", str(suite), "--results", str(out), "-q"]) == 0
    assert f"warning: {LINE}" in capsys.readouterr().err

    base = tmp_path / "base.json"
    assert main(["baseline", "record", "--suite", str(suite), "--results", str(out), "--out", str(base), "-q"]) == 0
    capsys.readouterr()
    assert main(["check", "--suite", str(suite), "--results", str(out), "--baseline", str(base), "-q"]) == 0
    assert f"warning: {LINE}" in capsys.readouterr().err


def test_a_suite_threshold_the_model_meets_shows_no_warning(tmp_path, capsys):
    suite = tmp_path / "fit.yaml"
    suite.write_text(SUITE + "fit_threshold: {train_acc: 0.5}\n")
    out = tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--results", str(out), "-q"]) == 0
    assert "did not fit" not in capsys.readouterr().err
    assert "did not fit" not in (out / "leaderboard.md").read_text()
    assert 'class="warnings"' not in (out / "leaderboard.html").read_text()
