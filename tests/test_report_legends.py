"""Reports a new reader understands: Tasks and Models legends, run facts, headline, metric and direction in
headers, no "best" within noise of chance, no R² where it means nothing, finite sort keys and accessible
HTML structure, and the compact leaderboard at the end of `compbench run` / `compbench report`.
(The same page in a real browser: tests/test_browser.py.)"""

from __future__ import annotations

import io
import math
import os
import re
import time

import numpy as np
import pytest

from compbench.outcome.expectations import evaluate_expectations
from compbench.report import publish
from compbench.report.html import sort_value
from compbench.report.legend import git_commit, run_date
from compbench.report.statistics import near_chance
from compbench.report.tables import leaderboard, theory_table
from compbench.report.terminal import print_files, print_leaderboard
from compbench.scoring.metrics import cell_metrics
from compbench.suite import parse_suite
from compbench.tasks import make_task

SUITE = """\
name: legends
seeds: 2
tasks:
  - {id: te, family: transitive_equivalence}
  - {id: add, family: additive, params: {anchors: [[4], [4]]}, description: "symbolic addition, anchor 0"}
  - {id: cd, family: context_dependence, params: {preset: CD-1}}
models:
  - {id: kern, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}, description: an overlap kernel}
  - {id: net, adapter: mlp, params: {width: 8}}
expectations:
  - {id: chance, source: {paper: compbench, threshold: a test fixture}, claim: at_chance, models: [kern], tasks: [te]}
  - {id: rich, source: {paper: compbench, threshold: a test fixture}, claim: beats_kernel, models: [net], tasks: [te], tolerance: 0.25}
"""
TASKS = {"te": make_task("transitive_equivalence"), "add": make_task("additive", anchors=[[4], [4]]),
         "cd": make_task("context_dependence", preset="CD-1")}


def _rec(model, task, seed, preds, theory, adapter="mlp"):
    t = TASKS[task]
    rec = {"key": f"{model}|{task}|{seed}", "suite": "legends", "task": task, "family": t.family, "model": model,
           "group": model, "adapter": adapter, "sweep": {}, "seed": seed, "device": "cpu", "status": "ok",
           "n_train": t.n_train, "n_test": t.n_test, "wall_time": 0.5, "theory_kernel": "overlap", "theory_objective": "min_norm",
           "predictions": list(map(float, preds)), "theory_predictions": list(map(float, theory))}
    rec.update(cell_metrics(t.kind, t.y, t.train_mask, np.asarray(preds), np.asarray(theory), 1.0))
    return rec


def _fit(task, shrink):
    t = TASKS[task]
    return np.where(t.train_mask, t.y, shrink * t.y)


def _flip_first(task, n):
    """The truth with the sign of the first n held-out cells flipped."""
    preds = _fit(task, 1.0)
    preds[np.flatnonzero(~TASKS[task].train_mask)[:n]] *= -1
    return preds


def records():
    """kern: at chance on te (predicts 0 there), additive shrinkage on add, right on cd; net: wrong on te by seed."""
    recs = []
    for s in (0, 1):
        recs += [_rec("kern", "te", s, _fit("te", 0.0), _fit("te", 0.0), "kernel"),
                 _rec("kern", "add", s, _fit("add", 0.6), _fit("add", 0.6), "kernel"),
                 _rec("kern", "cd", s, _fit("cd", 1.0), _fit("cd", 1.0), "kernel")]
        te = _fit("te", 0.9)
        held = np.flatnonzero(~TASKS["te"].train_mask)
        te[held[: 1 + 2 * s]] *= -1  # seed 0: 3/4 right, seed 1: 1/4 right → mean 0.5 ± 0.354: chance
        recs += [_rec("net", "te", s, te, _fit("te", 0.0)), _rec("net", "add", s, _fit("add", 0.9 + 0.02 * s), _fit("add", 0.6)),
                 _rec("net", "cd", s, _flip_first("cd", s), _fit("cd", 1.0))]
    return recs


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("legends")
    loaded = parse_suite(SUITE, "legends.yaml")
    verdicts = evaluate_expectations(loaded.suite.expectations, records(), loaded.tags)
    publish(out, loaded, records(), {"device": "cpu", "wall_time": 2.0}, verdicts=verdicts, formats=("md", "html"))
    return out, loaded, verdicts


def _section(md: str, title: str) -> list[list[str]]:
    part = md.split(f"## {title}\n")[1].split("\n## ")[0]
    rows = [line for line in part.splitlines() if line.startswith("| ")][1:]
    return [[c.strip() for c in r.split("|")[1:-1]] for r in rows]


def test_near_chance_is_two_standard_errors_or_005_for_one_seed():
    assert near_chance(0.505, 0.024, 3, 0.5)  # 2 SE = 2 · 0.024 / √3 = 0.0277 > 0.005
    assert not near_chance(0.54, 0.024, 3, 0.5)  # 0.04 > 0.0277
    assert near_chance(0.5, 0.0, 6, 0.5)  # every seed exactly at chance
    assert near_chance(0.54, math.nan, 1, 0.5) and not near_chance(0.56, math.nan, 1, 0.5)
    assert near_chance(0.03, math.nan, 1, 0.0) and not near_chance(0.9, math.nan, 1, None)


def test_best_is_not_awarded_at_chance_and_headers_name_the_metric(report):
    out, _, _ = report
    md = (out / "leaderboard.md").read_text()
    board = md.split("## Held-out score\n")[1].split("\n## ")[0]
    assert re.search(r"\| model +\| te \(accuracy ↑\) +\| add \(R² ↑\) +\| cd \(accuracy ↑\) +\|", board)
    rows = {r[0]: r[1:] for r in _section(md, "Held-out score")}
    # kern on te: 0.500 (one value over both seeds); net: 0.500 ± 0.354: both at chance, so no bold on te
    # each beside its theory's score (net's theory: the kernel's 0 on te, 0.840 on add, 1.000 on cd)
    assert rows["kern"][0] == "0.500 ± 0.000 (theory 0.500)" and rows["net"][0] == "0.500 ± 0.354 (theory 0.500)"
    assert rows["net"][1].startswith("**0.99") and rows["kern"][1] == "0.840 ± 0.000 (theory 0.840)"
    # cd has 2 held-out cells: kern 1.000 both seeds is best; net 1.000 and 0.5 → 0.75 ± 0.354 is within 2 SE of ½
    assert rows["kern"][2] == "**1.000 ± 0.000 (theory 1.000)**" and rows["net"][2] == "0.750 ± 0.354 (theory 1.000)"


def test_theory_r2_is_na_on_two_cells_and_on_a_constant_theory(report):
    out, _, _ = report
    rows = {(r[0], r[1]): r for r in _section((out / "leaderboard.md").read_text(), "Agreement with the kernel theory and "
                                                                                      "conjunction-wise additivity")}
    assert rows[("kern", "te")][3] == "n/a (theory constant)"  # the theory predicts 0 on every held-out pair
    assert rows[("kern", "cd")][3] == "n/a (2 cells)" and rows[("net", "cd")][3] == "n/a (2 cells)"
    assert rows[("kern", "add")][3] == "1.000 ± 0.000" and rows[("net", "cd")][4] == "2.00e+00"  # max |Δ| still shown
    # without the held-out masks only the cell count is known
    table = theory_table([r for r in records() if r["task"] != "add"], ["te", "cd"])
    assert [r[3] for r in table.rows] == ["1.000 ± 0.000", "n/a (2 cells)", "0.000 ± 0.000", "n/a (2 cells)"]


def test_tasks_and_models_legends_and_headline(report):
    out, _, _ = report
    md = (out / "leaderboard.md").read_text()
    tasks = {r[0]: r[1:] for r in _section(md, "Tasks")}
    assert tasks["te"] == ["transitive_equivalence",
                           "Train every pair containing an anchor; kernels predict exactly 0 on the held-out pairs.",
                           "4 × 4 (item 1, item 2)", "12 / 4", "classification", "accuracy ↑", "0.5"]
    assert tasks["add"][1:] == ["symbolic addition, anchor 0", "9 × 9 (value 1, value 2)", "17 / 64", "regression", "R² ↑", "0"]
    assert tasks["cd"][3] == "70 / 2"
    models = {r[0]: r[1:] for r in _section(md, "Models")}
    assert models["kern"] == ["kernel", "weights=[0.0, 0.4, 1.0]", "–", "kernels", "an overlap kernel"]
    assert models["net"] == ["mlp", "width=8", "–", "networks", ""]
    assert ("Expectations: 1/2 pass (failing: rich). Best per task — te: none above chance; "
            "add: net (0.992); cd: kern (1.000).") in md.split("## ")[0].splitlines()  # under the title and the intro
    summary = dict((r[0], r[1]) for r in _section(md, "Run summary"))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", summary["date"]) and summary["device"] == "cpu"


def test_run_date_is_the_stores_last_write_and_commit_is_short_hex(tmp_path):
    (tmp_path / "store").mkdir()
    db = tmp_path / "store" / "records.sqlite"
    db.write_bytes(b"")
    os.utime(db, (1_000_000_000, 1_000_000_000))
    assert run_date(tmp_path) == "2001-09-09 01:46 UTC"
    assert run_date(tmp_path / "nowhere")[:10] in {time.strftime("%Y-%m-%d", time.gmtime(t)) for t in (time.time() - 60, time.time())}
    commit = git_commit()  # this test runs from a git checkout
    assert commit is None or re.fullmatch(r"[0-9a-f]{7,12}", commit)


def test_html_has_landmarks_row_headers_finite_sort_keys_and_cell_links(report):
    out, _, _ = report
    text = (out / "leaderboard.html").read_text()
    assert '<meta name="viewport" content="width=device-width, initial-scale=1">' in text
    assert text.count("<main>") == 1 and '<th scope="row">kern</th>' in text
    assert '<th scope="col" data-dir="higher" data-col-task="te"><button type="button">te (accuracy ↑)</button>' in text
    keys = re.findall(r'data-v="([^"]*)"', text)
    assert keys and all(math.isfinite(float(k)) for k in keys)
    links = set(re.findall(r'<a href="#(cell-[^"]+--[^"]+)"', text))
    ids = set(re.findall(r'<tr id="(cell-[^"]+)"', text))
    assert links and links <= ids and "cell-net--te" in ids
    detail = text.split('id="cell-net--te"')[1].split("</tr>")[0]
    assert "0: 0.750 · 1: 0.250" in detail and "overlap/min_norm" in detail
    assert sort_value(math.inf) == "1.7976931348623157e+308" and sort_value(-math.inf).startswith("-1.79")
    assert sort_value(math.nan) is None and sort_value(0.25) == "0.25"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_terminal_leaderboard_plain_and_rich(report, tmp_path):
    _, loaded, verdicts = report
    buf = io.StringIO()
    print_leaderboard(loaded, records(), verdicts, buf)
    lines = buf.getvalue().splitlines()
    assert lines[0] == "held-out score (mean ± std over seeds; * = best, above chance)"
    assert lines[1].split() == ["model", "te", "accuracy", "↑", "add", "R²", "↑", "cd", "accuracy", "↑"]
    assert lines[3].split() == ["kern", "0.500", "±0.00", "0.840", "±0.00", "1.000", "±0.00*"]
    assert lines[4].split() == ["net", "0.500", "±0.35", "0.992", "±0.00*", "0.750", "±0.35"]
    assert lines[5].startswith("  FAIL rich [beats_kernel] net on te:")
    tty = _Tty()
    print_leaderboard(loaded, records(), verdicts, tty)
    assert "held-out score" in tty.getvalue() and "│" in tty.getvalue() and "0.992 ±0.00" in tty.getvalue()
    files = io.StringIO()
    print_files(tmp_path, [tmp_path / "leaderboard.md", tmp_path / "leaderboard.html", tmp_path / "records.csv",
                           tmp_path / "plots" / "a.png"], files)
    assert files.getvalue() == (f"report: {tmp_path / 'leaderboard.md'}, {tmp_path / 'leaderboard.html'} "
                                f"(and records.csv, 1 plots in {tmp_path})\n")


def test_leaderboard_without_kinds_reads_the_metric_from_records():
    table = leaderboard(records(), ["te", "add"])
    assert table.headers == ["model", "te (accuracy ↑)", "add (R² ↑)"] and table.directions == {1: "higher", 2: "higher"}
