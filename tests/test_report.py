"""Reports from fixed, hand-made records: exact markdown (golden file), typed CSV, self-contained HTML,
plots (files and labelled axes), failed/skipped/missing cells, --format, and an empty results directory.

Set COMPBENCH_UPDATE_GOLDEN=1 to rewrite tests/golden/leaderboard.md (then review the diff).
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from compbench.cli import main
from compbench.outcome.expectations import evaluate_expectations
from compbench.report import publish
from compbench.report.figures import cd_blocks, grid_heatmaps, sweep_curves, theory_scatter
from compbench.report.tables import leaderboard
from compbench.scoring.metrics import cell_metrics
from compbench.suite import parse_suite
from compbench.tasks import make_task
from tiny_suites import scenario

GOLDEN = Path(__file__).parent / "golden" / "leaderboard.md"

SUITE = scenario("golden")  # tests/suites/golden.yaml
TASKS = {"te": make_task("transitive_equivalence"), "add": make_task("additive", anchors=[[4], [4]])}


def _record(model, task, seed, status="ok", preds=None, theory=None, additivity=1.0, adapter="mlp", group=None, sweep=None):
    t = TASKS[task]
    rec = {"key": f"{model}|{task}|{seed}", "suite": "golden", "task": task, "family": t.family, "model": model,
           "group": group or model, "adapter": adapter, "sweep": sweep or {}, "seed": seed, "device": "cpu",
           "status": status, "n_train": t.n_train, "n_test": t.n_test, "wall_time": 0.25}
    if status == "ok":
        rec.update(cell_metrics(t.kind, t.y, t.train_mask, preds, theory, additivity))
        rec.update(status="ok", theory_kernel="overlap" if adapter == "kernel" else "analytic_ntk", theory_objective="min_norm",
                   predictions=np.round(preds, 10).tolist(), theory_predictions=np.round(theory, 10).tolist())
    elif status == "error":
        rec["error"] = "RuntimeError: loss is nan at step 12"
    else:
        rec["error"] = "kernel is not positive semi-definite"
    return rec


def _kernel_like(task, shrink):
    """Fits the training cells; held-out cells shrunk towards 0 (the memorization leak)."""
    t = TASKS[task]
    return np.where(t.train_mask, t.y, shrink * t.y)


def fixed_records():
    """2 models × 2 tasks × 2 seeds, one cell that failed on one seed of three, one failed cell, one skipped cell."""
    recs = []
    te_theory, add_theory = _kernel_like("te", 0.0), _kernel_like("add", 0.6)
    for seed in (0, 1):
        recs.append(_record("kern", "te", seed, preds=te_theory, theory=te_theory, adapter="kernel"))
        recs.append(_record("kern", "add", seed, preds=add_theory, theory=add_theory, adapter="kernel"))
    wiggle = 0.05 * np.cos(np.arange(81))
    for seed in (0, 1):
        # the rich net: right on te (the theory predicts 0), near-perfect on add
        te_preds = _kernel_like("te", 0.9)
        if seed:  # seed 1 gets one held-out pair wrong
            te_preds[np.flatnonzero(~TASKS["te"].train_mask)[0]] *= -0.5
        recs.append(_record("net", "te", seed, preds=te_preds, theory=te_theory, additivity=0.1 * seed))
        recs.append(_record("net", "add", seed, preds=_kernel_like("add", 0.95) + (seed - 0.5) * wiggle, theory=add_theory,
                            additivity=0.99))
    recs.append(_record("net", "te", 2, status="error"))
    recs += [_record("boom", "add", s, status="error") for s in (0, 1)]
    recs += [_record("boom", "te", s, status="skipped") for s in (0, 1)]
    return recs  # `late` on te: asked for by the suite, never stored → missing


SUMMARY = {"device": "cpu", "executor": "local", "wall_time": 1.5, "n_run": 13, "n_cached": 0, "n_failed": 3, "n_skipped": 2}


@pytest.fixture(scope="module")
def published(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    loaded = parse_suite(SUITE, "golden.yaml")
    with pytest.MonkeyPatch.context() as mp:  # the golden file does not change with each release
        mp.setattr("compbench.report.tables.__version__", "0.0.0")
        mp.setattr("compbench.report.legend.run_date", lambda out_dir: "2026-01-02 03:04 UTC")
        mp.setattr("compbench.report.legend.git_commit", lambda: "abc1234")
        verdicts = evaluate_expectations(loaded.suite.expectations, fixed_records(), loaded.tags)
        paths = publish(out, loaded, fixed_records(), SUMMARY, verdicts=verdicts)
    return out, verdicts, paths


def _board_rows(md: str) -> dict[str, list[str]]:
    board = md.split("## Held-out score")[1].split("\n## ")[0]
    rows = [line for line in board.splitlines() if line.startswith("| ") and not line.startswith("| model")]
    return {r.split("|")[1].strip(): [c.strip() for c in r.split("|")[2:-1]] for r in rows}


@pytest.mark.slow
def test_markdown_matches_golden_file(published):
    out, _, _ = published
    text = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert "| compbench     | 0.0.0 " in text
    if os.environ.get("COMPBENCH_UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8")


def test_leaderboard_marks_best_beats_kernel_and_every_failure(published):
    out, verdicts, _ = published
    rows = _board_rows((out / "leaderboard.md").read_text(encoding="utf-8"))
    assert list(rows) == ["kern", "net", "boom", "late"]  # suite order, the never-stored model too
    te, add = 0, 1
    # best, beats its kernel (0.5, shown beside it), one seed failed
    assert rows["net"][te] == "**0.875 ± 0.177 (theory 0.500) † (1 error)**"
    assert rows["kern"][te] == "0.500 ± 0.000 (theory 0.500)"
    assert rows["net"][add] == "**0.997 ± 0.000 (theory 0.840) †**" and rows["kern"][add] == "0.840 ± 0.000 (theory 0.840)"
    assert rows["boom"] == ["skipped", "error"]
    assert rows["late"] == ["missing", ""]  # asked for on te; never on add
    # a claim about a cell with a failed seed is not judged on the seeds that survived
    assert {v.expectation: v.status for v in verdicts} == {"chance": "PASS", "rich": "FAIL"}


def test_beats_kernel_needs_more_than_two_standard_errors():
    recs = [_record("n", "te", s, preds=_kernel_like("te", 1.0 if s else -1.0), theory=_kernel_like("te", 0.0)) for s in (0, 1)]
    # held-out accuracy 1 and 0 around a theory of 0.5: mean gap 0, no mark; the better seed alone is not enough
    assert "†" not in leaderboard(recs, ["te"]).rows[0][1]
    assert "†" not in leaderboard(recs[1:], ["te"]).rows[0][1]  # one seed: noise unknown, no claim
    good = [_record("n", "te", s, preds=_kernel_like("te", 0.5 + 0.1 * s), theory=_kernel_like("te", 0.0)) for s in (0, 1)]
    assert "†" in leaderboard(good, ["te"]).rows[0][1]


def test_csv_files_load_with_typed_columns(published):
    out, _, _ = published
    board = pd.read_csv(out / "leaderboard.csv")
    assert board.dtypes["mean"] == float and board.dtypes["std"] == float and board.dtypes["gap_se"] == float
    assert board.dtypes["n_ok"] == int and board.dtypes["beats_kernel"] == bool and board.dtypes["best"] == bool
    cell = board[(board.model == "net") & (board.task == "te")].iloc[0]
    assert (cell["status"], cell["n_ok"], cell["n_error"], cell["mean"], cell["beats_kernel"]) == ("partial", 2, 1, 0.875, True)
    assert board.set_index(["model", "task"]).status.to_dict() == {
        ("kern", "te"): "ok", ("kern", "add"): "ok", ("net", "te"): "partial", ("net", "add"): "ok",
        ("boom", "te"): "skipped", ("boom", "add"): "error", ("late", "te"): "missing",
    }
    theory = pd.read_csv(out / "theory.csv")
    assert theory.dtypes["theory_r2_mean"] == float and theory.dtypes["worst_of"] == int
    assert theory[(theory.model == "kern") & (theory.task == "add")].theory_r2_mean.item() == 1.0
    records = pd.read_csv(out / "records.csv")
    assert len(records) == len(fixed_records()) and records.dtypes["heldout_acc"] == float
    assert pd.read_csv(out / "expectations.csv").dtypes["passed"] == bool


class _Collect(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.refs: list[str] = []
        self.tags: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.refs += [v for k, v in attrs if k in ("src", "href") and v]
        if tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.cells.append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def test_html_is_one_self_contained_file_with_every_leaderboard_cell(published):
    out, _, paths = published
    text = (out / "leaderboard.html").read_text(encoding="utf-8")
    parser = _Collect()
    parser.feed(text)
    parser.close()
    board = leaderboard(fixed_records(), ["te", "add"], [(m, m, t) for m in ("kern", "net", "boom") for t in ("te", "add")]
                        + [("late", "late", "te")])
    for row in board.rows:
        for value in row:
            assert value in parser.cells, value
    assert "0.875 ± 0.177 (theory 0.500) † (1 error)" in parser.cells and "missing" in parser.cells and "PASS" in parser.cells
    assert not re.search(r"https?:", text) and "<link" not in text and "<script src" not in text
    images = [r for r in parser.refs if r.startswith("data:image/png;base64,")]
    assert len(images) == len([p for p in paths if p.suffix == ".png"]) == 4
    assert all(r.startswith(("data:image/png;base64,", "#")) for r in parser.refs)
    assert parser.tags.count("style") == 1 and parser.tags.count("script") == 1


def test_every_plot_is_written(published):
    out, _, paths = published
    pngs = sorted(p.name for p in paths if p.suffix == ".png")
    assert pngs == ["grid-add.png", "grid-te.png", "theory-add.png", "theory-te.png"]
    for p in paths:
        if p.suffix == ".png":
            assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and p.stat().st_size > 5000
            svg = p.with_suffix(".svg")
            assert svg.stat().st_size > 5000 and "<svg" in svg.read_text()[:2000]


@pytest.mark.slow
def test_plots_reused_when_records_unchanged_and_redrawn_when_changed(tmp_path):
    loaded = parse_suite(SUITE, "golden.yaml")
    recs = [r for r in fixed_records() if r["task"] == "te"]
    first = publish(tmp_path, loaded, recs, SUMMARY, verdicts=[], formats=("png",))
    stamp = {p: p.stat().st_mtime_ns for p in first}
    again = publish(tmp_path, loaded, recs, SUMMARY, verdicts=[], formats=("png",))
    assert again == first and all(p.stat().st_mtime_ns == stamp[p] for p in again)
    fewer = publish(tmp_path, loaded, [r for r in recs if r["model"] != "net"], SUMMARY, verdicts=[], formats=("png",))
    assert [p.name for p in fewer] == ["theory-te.png", "grid-te.png"]
    assert all(p.stat().st_mtime_ns != stamp.get(p) for p in fewer)


def _legend_texts(fig):
    texts = []
    for leg in [a.get_legend() for a in fig.axes] + list(fig.legends):
        if leg is not None:
            texts += [t.get_text() for t in leg.get_texts()]
    return texts


def test_theory_scatter_axes_legend_and_failures():
    recs = [r for r in fixed_records() if r["task"] == "te"]
    fig = theory_scatter("te", recs, TASKS["te"].test_mask)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "kernel-theory prediction (held-out cells)"
    assert ax.get_ylabel() == "model prediction (held-out cells)"
    assert ax.get_title().startswith("te: each model vs its own kernel-theory prediction")
    legend = _legend_texts(fig)
    assert "kern (R² 1.000)" in legend and "y = x (model = theory)" in legend
    assert any(t.startswith("net (R² ") and "1 seed(s) failed" in t for t in legend)
    assert "boom: skipped (invalid model)" in legend
    fig = theory_scatter("te", recs, TASKS["te"].test_mask, missing=["late"])
    assert "late: missing (no stored result)" in _legend_texts(fig)


def test_theory_scatter_summarises_big_sweeps():
    theory = _kernel_like("te", 0.0)
    recs = [_record(f"k[{i}]", "te", 0, preds=theory, theory=theory, adapter="kernel", group="k", sweep={"w": i}) for i in range(13)]
    recs.append(_record("net", "te", 0, preds=_kernel_like("te", 0.8), theory=theory))
    fig = theory_scatter("te", recs, TASKS["te"].test_mask)
    legend = _legend_texts(fig)
    assert "k: 13-model sweep not drawn (worst R² 1.000)" in legend
    assert len(fig.axes[0].collections) == 1  # only `net` is drawn point by point


def test_grid_heatmap_panels_labels_and_failed_model():
    t = TASKS["add"]
    fig = grid_heatmaps("add", [r for r in fixed_records() if r["task"] == "add"], t.cells, t.y, t.train_mask, t.component_names)
    visible = [a for a in fig.axes if a.get_visible() and a.get_label() != "<colorbar>"]
    titles = [a.get_title() for a in visible]
    assert titles == ["truth", "kern (seed 0)", "net (seed 0)", "boom"]
    assert visible[0].get_xlabel() == "value 2" and visible[0].get_ylabel() == "value 1"
    assert any("error" in txt.get_text() for txt in visible[3].texts)
    assert fig.axes[-1].get_ylabel() == "truth / model prediction"  # the colour bar
    t = TASKS["te"]
    fig = grid_heatmaps("te", [r for r in fixed_records() if r["task"] == "te"], t.cells, t.y, t.train_mask, missing=["late"])
    late = [a for a in fig.axes if a.get_title() == "late"][0]
    assert [x.get_text() for x in late.texts] == ["late:\nmissing (no stored result)"]


def test_sweep_curves_axes_theory_line_and_failed_point():
    theory = _kernel_like("te", 0.0)
    recs = [_record(f"sig[{s}]", "te", seed, preds=_kernel_like("te", 1.0 - s), theory=theory, group="sig", sweep={"init_scale": s},
                    additivity=s) for s in (0.001, 0.1, 1.0) for seed in (0, 1)]
    recs.append(_record("sig[3]", "te", 0, status="error", group="sig", sweep={"init_scale": 3.0}))
    fig = sweep_curves(recs, "init_scale")
    ax1, ax2 = fig.axes
    assert ax1.get_xlabel() == ax2.get_xlabel() == "init scale σ (log scale; small = rich, 1 = lazy)"
    assert ax1.get_xscale() == "log" and ax1.get_ylabel() == "held-out score (accuracy; R² for regression)"
    assert ax2.get_ylabel() == "held-out additivity R²"
    legend = _legend_texts(fig)
    assert legend == ["sig on te", "sig on te: its kernel theory", "every seed failed"]
    np.testing.assert_allclose(np.asarray(ax2.containers[0].lines[0].get_ydata(), dtype=float), [0.001, 0.1, 1.0])  # additivity per σ


def test_cd_blocks_models_and_big_sweeps():
    cd = {p: make_task("context_dependence", preset=p) for p in ("CD-1", "CD-3")}
    TASKS.update({f"cd{p[-1]}": t for p, t in cd.items()})
    recs = []
    for task in ("cd1", "cd3"):
        t = TASKS[task]
        truth = np.where(t.train_mask, t.y, t.y)
        for i in range(13):  # a big sweep: the first 5 kernels perfect on cd3, every one on cd1
            pred = truth if (task == "cd1" or i < 5) else -truth
            recs.append(_record(f"k[{i}]", task, 0, preds=pred, theory=pred, adapter="kernel", group="k", sweep={"w": i}))
        recs += [_record("net", task, s, preds=truth, theory=truth) for s in (0, 1)]
    recs.append(_record("boom", "cd3", 0, status="error"))
    fig = cd_blocks(recs, ["cd1", "cd3"])
    models, sweeps = fig.axes
    assert models.get_ylabel() == "held-out accuracy (mean ± std over seeds)" and models.get_xlabel() == "model"
    assert sweeps.get_ylabel().startswith("share of kernels with 100% held-out accuracy")
    assert [t.get_text() for t in models.get_xticklabels()] == ["net", "boom"]
    assert [round(p.get_height(), 3) for p in sweeps.patches] == [1.0, round(5 / 13, 3)]
    assert "error" in [t.get_text() for t in models.texts]
    assert _legend_texts(fig) == [f"cd1 ({TASKS['cd1'].n_test} held-out cells)", f"cd3 ({TASKS['cd3'].n_test} held-out cells)"]


def _store_with_records(out: Path) -> None:
    from compbench.runner.run import SuiteRunner
    from compbench.store import ResultStore

    # `report` finds cells by their cache keys, as `run` does: store the records under the suite's keys.
    jobs = SuiteRunner(parse_suite(SUITE, "golden.yaml"), out, device="cpu").jobs
    keys = {(j.model.id, j.task.entry.id, s): k for j in jobs for s, k in zip(j.seeds, j.keys)}
    store = ResultStore(out / "store")
    store.append([{**r, "key": keys.get((r["model"], r["task"], r["seed"]), r["key"])} for r in fixed_records()])
    store.close()


def test_report_command_rebuilds_only_the_formats_asked_for(tmp_path, capsys):
    suite = tmp_path / "golden.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "res"
    _store_with_records(out)
    assert main(["report", "--suite", str(suite), "--out", str(out), "--format", "md,csv"]) == 1  # `rich` fails
    assert sorted(p.name for p in out.iterdir() if p.is_file()) == [
        ".compbench", "expectations.csv", "leaderboard.csv", "leaderboard.md", "records.csv", "summary.json", "theory.csv"]
    assert "expectations 1/2 pass" in capsys.readouterr().out
    # boom does not set skip_invalid: its stored `skipped` cells are the errors `run` would report.
    assert _board_rows((out / "leaderboard.md").read_text())["boom"] == ["error", "error"]
    assert main(["report", "--suite", str(suite), "--out", str(out), "--format", "md,pdf"]) == 2
    assert "unknown report format" in capsys.readouterr().err


def test_report_on_empty_results_is_a_clear_error(tmp_path, capsys):
    suite = tmp_path / "golden.yaml"
    suite.write_text(SUITE)
    assert main(["report", "--suite", str(suite), "--out", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "no stored results for suite 'golden'" in err and "compbench run --suite golden" in err
