"""Reports from fixed records: exact markdown (golden file), HTML, plots, failures, empty results."""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from compbench.cli import main
from compbench.report import publish
from compbench.report.plots import grid_heatmaps, sweep_curves, theory_scatter
from compbench.scoring.expectations import evaluate_expectations
from compbench.suite import parse_suite
from compbench.tasks import make_task

GOLDEN = Path(__file__).parent / "golden" / "leaderboard.md"

SUITE = """\
name: golden
seeds: 2
tasks:
  - {id: te, family: transitive_equivalence}
  - {id: add, family: additive, params: {anchors: [[4], [4]]}}
models:
  - {id: kern, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}
  - {id: net, adapter: mlp, params: {width: 8}, sweep: {init_scale: [0.001, 1.0]}}
expectations:
  - {id: chance, claim: at_chance, models: [kern], tasks: [te]}
"""


def _record(model, group, task, seed, status="ok", sweep=None, **metrics):
    t = make_task("transitive_equivalence") if task == "te" else make_task("additive", anchors=[[4], [4]])
    rng = np.random.default_rng(seed + len(model))
    preds = t.y * (1.0 if status == "ok" else 0) + 0.1 * rng.standard_normal(len(t.y))
    rec = {"key": f"{model}-{task}-{seed}", "suite": "golden", "task": task, "family": t.family, "model": model,
           "group": group, "adapter": "mlp", "sweep": sweep or {}, "seed": seed, "device": "cpu", "status": status,
           "n_train": t.n_train, "n_test": t.n_test, "wall_time": 0.5}
    if status == "ok":
        rec.update(predictions=preds.tolist(), theory_predictions=(0.5 * preds).tolist(), theory_kernel="analytic_ntk",
                   theory_objective="min_norm", **metrics)
    else:
        rec["error"] = "RuntimeError: boom"
    return rec


def fixed_records():
    recs = []
    for seed, (acc, th) in enumerate([(1.0, 0.5), (0.75, 0.5)]):
        recs.append(_record("net[init_scale=0.001]", "net", "te", seed, sweep={"init_scale": 0.001}, heldout_acc=acc, theory_acc=th,
                            additivity=0.1 * seed, theory_r2=0.2, theory_max_abs_diff=0.9, separation=1.0))
        recs.append(_record("net[init_scale=0.001]", "net", "add", seed, sweep={"init_scale": 0.001}, heldout_r2=0.9 + 0.01 * seed,
                            theory_heldout_r2=0.8, additivity=0.99, theory_r2=0.95, theory_max_abs_diff=0.3, slope=0.8, theory_slope=0.75))
        recs.append(_record("net[init_scale=1]", "net", "te", seed, sweep={"init_scale": 1.0}, heldout_acc=0.5, theory_acc=0.5,
                            additivity=0.9, theory_r2=0.9, theory_max_abs_diff=0.1, separation=0.0))
    recs.append(_record("net[init_scale=1]", "net", "add", 0, status="error", sweep={"init_scale": 1.0}))
    recs.append(_record("net[init_scale=1]", "net", "add", 1, status="error", sweep={"init_scale": 1.0}))
    recs.append(_record("kern", "kern", "te", 0, heldout_acc=0.5, theory_acc=0.5, additivity=1.0, theory_r2=1.0,
                        theory_max_abs_diff=0.0, separation=0.0))
    recs.append(_record("kern", "kern", "add", 0, status="skipped"))
    return recs


@pytest.fixture
def published(tmp_path):
    loaded = parse_suite(SUITE, "golden.yaml")
    recs = fixed_records()
    summary = {"device": "cpu", "wall_time": 1.5, "n_run": 9, "n_cached": 0, "n_failed": 2, "n_skipped": 1}
    verdicts, paths = publish(tmp_path, loaded, recs, summary)
    return tmp_path, verdicts, paths


def test_markdown_matches_golden_file(published):
    out, _, _ = published
    assert (out / "leaderboard.md").read_text() == GOLDEN.read_text()


def test_leaderboard_marks_best_beats_kernel_errors_and_skips(published):
    out, verdicts, _ = published
    text = (out / "leaderboard.md").read_text()
    board = text.split("## Held-out score")[1].split("##")[0]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in board.splitlines()
            if line.startswith("| net") or line.startswith("| kern")}
    assert rows["net[init_scale=0.001]"][:2] == ["**0.875 ± 0.177 †**", "**0.905 ± 0.007 †**"]  # best, beats theory
    assert rows["net[init_scale=1]"][:2] == ["0.500 ± 0.000", "error"]
    assert rows["kern"][:2] == ["0.500", "skipped"]
    assert [v.status for v in verdicts] == ["PASS"]


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.refs: list[str] = []
        self._in = False

    def handle_starttag(self, tag, attrs):
        self._in = tag in ("td", "th")
        self.refs += [v for k, v in attrs if k in ("src", "href") and v]

    def handle_data(self, data):
        if self._in:
            self.cells.append(data.strip())


def test_html_is_self_contained_and_has_every_cell(published):
    out, _, _ = published
    parser = _Collect()
    parser.feed((out / "leaderboard.html").read_text())
    for value in ["net[init_scale=0.001]", "0.875 ± 0.177 †", "error", "skipped", "0.500", "PASS"]:
        assert value in parser.cells, value
    assert parser.refs and all(r.startswith("data:image/png;base64,") for r in parser.refs)


def test_every_plot_is_written(published):
    out, _, paths = published
    names = sorted(p.name for p in paths if p.suffix == ".png")
    assert names == ["grid-add.png", "grid-te.png", "sweep-init_scale.png", "theory-add.png", "theory-te.png"]
    for p in paths:
        if p.suffix == ".png":
            assert p.stat().st_size > 1000 and p.with_suffix(".svg").exists()


def test_plot_axes_are_labelled():
    recs = fixed_records()
    t = make_task("transitive_equivalence")
    ax = theory_scatter("te", [r for r in recs if r["task"] == "te"], ~t.train_mask).axes[0]
    assert ax.get_xlabel() == "kernel-theory prediction (held-out cells)"
    assert ax.get_ylabel() == "model prediction (held-out cells)"
    assert {t.get_text() for t in ax.get_legend().get_texts()} >= {"kern", "y = x (model = theory)"}
    fig = grid_heatmaps("te", [r for r in recs if r["task"] == "te"], t.cells, t.y, t.train_mask)
    assert [a.get_title() for a in fig.axes[:4]] == ["truth", "kern", "net[init_scale=0.001]", "net[init_scale=1]"] or fig.axes[0].get_title() == "truth"
    assert fig.axes[0].get_ylabel() == "component 1 value"
    sweep = sweep_curves(recs, "init_scale")
    assert sweep.axes[0].get_xlabel() == "init scale σ (small = rich, 1 = lazy)"
    assert sweep.axes[0].get_xscale() == "log" and sweep.axes[1].get_ylabel() == "held-out additivity R²"


def test_report_on_empty_results_is_a_clear_error(tmp_path, capsys):
    suite = tmp_path / "golden.yaml"
    suite.write_text(SUITE)
    assert main(["report", "--suite", str(suite), "--out", str(tmp_path / "empty")]) == 2
    assert "no stored results for suite 'golden'" in capsys.readouterr().err


def test_expectations_evaluated_on_fixed_records():
    loaded = parse_suite(SUITE, "golden.yaml")
    (v,) = evaluate_expectations(loaded.suite.expectations, fixed_records())
    assert v.subject == "kern" and v.measured == 0.5 and v.passed
