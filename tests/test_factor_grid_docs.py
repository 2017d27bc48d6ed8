"""docs/explanation/suites/factor-grid.md: its example builds the splits it counts and runs; its refusal text and measured numbers are real."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import numpy as np
import pytest

from compbench.runner.run import run_suite
from compbench.suite import parse_suite
from compbench.tasks import TaskParamError, make_task

ROOT = Path(__file__).parents[1]
DOCS = ROOT / "docs" / "explanation" / "suites" / "factor-grid.md"


def docs_suite() -> str:
    (block,) = re.findall(r"```yaml\n(.*?)```", DOCS.read_text(encoding="utf-8"), re.DOTALL)
    return "name: docs\nseeds: 1\ntasks:\n" + "".join("  " + line + "\n" for line in block.splitlines()) + (
        "models:\n  - {id: ntk, adapter: kernel, params: {kernel: relu_ntk}}\n"
    )


def test_docs_example_builds_the_counted_splits_and_runs(tmp_path):
    loaded = parse_suite(docs_suite(), "docs.yaml")
    comp, extra = (make_task(e.family, **e.params) for e in loaded.suite.tasks)
    assert len(comp.cells) == 288 and (comp.n_test, extra.n_test) == (72, 72)
    held = comp.cells[comp.test_mask]
    assert set(held[:, 1]) == {2, 3} and set(held[:, 3]) == {2, 3}
    assert set(extra.cells[extra.test_mask][:, 1]) == {3} and 3 not in set(extra.cells[extra.train_mask][:, 1])
    records = run_suite(loaded, tmp_path, device="cpu", progress=False).records
    assert [r["status"] for r in records] == ["ok", "ok"]
    for r in records:
        m = r["metrics"]
        assert {"factor_r2", "factor_r2.scale", "factor_slope.x", "class_acc.shape", "theory_factor_r2"} <= set(m)
        assert m["theory_r2"] == pytest.approx(1.0, abs=1e-6)
        assert np.mean([m[f"factor_r2.{f}"] for f in ("scale", "x", "y")]) == pytest.approx(m["factor_r2"])


def test_docs_refusal_text_is_the_real_one():
    loaded = parse_suite(docs_suite(), "docs.yaml")
    params = dict(loaded.suite.tasks[1].params, allow_unseen_values=False)
    with pytest.raises(TaskParamError) as exc:
        make_task("sprites", **params)
    text = " ".join(DOCS.read_text(encoding="utf-8").split("naming the value and the opt-in:\n", 1)[1].split("\n\n", 1)[0].split())
    assert str(exc.value) == text


def _numbers(cell: str) -> list[float]:
    """'0.278 (−0.519)' → [0.278, -0.519]; '0.33 (−0.07) / 1.01 (1.11)' → [0.33, -0.07, 1.01, 1.11]; '–' → []."""
    return [float(x) for x in re.findall(r"-?\d+\.\d+", cell.replace("−", "-"))]


def test_docs_measured_numbers_are_the_published_ones():
    with open(ROOT / "results" / "factor-grid" / "records.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    doc = DOCS.read_text(encoding="utf-8")
    tasks = ("random", "composition", "interpolation", "extrapolation")

    def mean(model: str, task: str, metric: str) -> float:
        return float(np.mean([float(r[metric]) for r in rows if r["model"] == model and r["task"] == task]))

    labels = (("relu-ntk", "ReLU NTK on pixels"), ("convnet", "small CNN"), ("vanilla-cnn", "VanillaCNN (¼ width)"),
              ("convnet-lazy", "lazy CNN"), ("probe", "frozen-feature probe"))
    for model, label in labels:
        r2_line, slope_line = [ln for ln in doc.splitlines() if ln.startswith(f"| {label} |")]  # the R² table, then the slopes'
        r2_cells, slope_cells = (ln.strip("|").split("|")[1:] for ln in (r2_line, slope_line))
        for task, r2_cell, slope_cell in zip(tasks, r2_cells, slope_cells):
            ran = any(r["model"] == model and r["task"] == task for r in rows)
            assert bool(_numbers(r2_cell)) == ran, (model, task, r2_cell)
            if not ran:
                continue
            shown = _numbers(r2_cell)  # the mean R² and, in parentheses, its theory's
            assert shown == pytest.approx([round(mean(model, task, m), 3) for m in ("factor_r2", "theory_factor_r2")],
                                          abs=1e-9), (model, task)
            slopes = _numbers(slope_cell)  # scale (theory) / y (theory); a kernel machine's theory is itself: not repeated
            metrics = [f"{p}factor_slope.{f}" for f in ("scale", "y") for p in ("", "theory_")]
            if len(slopes) == 2:
                metrics = metrics[::2]
                assert mean(model, task, "theory_r2") == pytest.approx(1.0), (model, task)
            assert slopes == pytest.approx([round(mean(model, task, m), 2) for m in metrics], abs=1e-9), (model, task)

def test_docs_probe_and_similarity_numbers_are_the_published_ones():
    """The read-out / probe (similarity) table: each cell the published means over seeds, '–' where a model has none."""
    with open(ROOT / "results" / "factor-grid" / "records.csv", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    doc = DOCS.read_text(encoding="utf-8").split("**Read-out, probe and nearest-training similarity.**", 1)[1].split("\n\n- ", 1)[0]
    tasks = ("random", "composition", "interpolation", "extrapolation")

    def mean(model: str, task: str, metric: str) -> float:
        return float(np.mean([float(r[metric]) for r in rows if r["model"] == model and r["task"] == task]))

    for model in ("relu-ntk", "convnet", "vanilla-cnn", "convnet-lazy", "probe"):
        (line,) = [ln for ln in doc.splitlines() if ln.startswith(f"| `{model}` |")]
        for task, cell in zip(tasks, line.strip("|").split("|")[1:]):
            ran = any(r["model"] == model and r["task"] == task for r in rows)
            if not ran:
                assert _numbers(cell) == [], (model, task, cell)
                continue
            metrics = ["factor_r2", "probe_r2", "nearest_train_similarity"]
            if model == "relu-ntk":  # a kernel: no features, its probe n/a
                assert all(r["probe_r2.n/a"] for r in rows if r["model"] == model and r["task"] == task)
                metrics.remove("probe_r2")
            assert _numbers(cell) == pytest.approx([round(mean(model, task, m), 3) for m in metrics], abs=1e-9), (model, task)
