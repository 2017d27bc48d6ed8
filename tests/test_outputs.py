"""Vector, multi-class and function-valued targets: theory, metrics, irrelevant share, splits (#15)."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import Field

from compbench import theory
from compbench.encodings import encode
from compbench.encodings.onehot import onehot
from compbench.runner.run import run_suite
from compbench.scoring.metrics import pooled_r2, top1_accuracy
from compbench.suite import parse_suite
from compbench.tasks import FAMILIES, CellSamples, SplitError, TaskData, TaskParams, make_task, register_family
from compbench.tasks.base import validate_split

# --- multi-output kernel regression ------------------------------------------------------------


def test_multi_output_kernel_regression_equals_k_scalar_solves():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(9, 4))
    K = theory.relu_ntk(x, x, depth=1, sigma_w2=2.0, sigma_b2=0.1)
    tr = np.arange(9) < 6
    y = rng.normal(size=(6, 3))
    f0_tr, f0_ev = rng.normal(size=(6, 3)), rng.normal(size=(9, 3))
    for ridge in (0.0, 0.3):
        joint = theory.kernel_regression(K[np.ix_(tr, tr)], K[:, tr], y, ridge=ridge, f0_train=f0_tr, f0_cross=f0_ev)
        assert joint.shape == (9, 3)
        for k in range(3):
            one = theory.kernel_regression(K[np.ix_(tr, tr)], K[:, tr], y[:, k], ridge=ridge, f0_train=f0_tr[:, k], f0_cross=f0_ev[:, k])
            np.testing.assert_allclose(joint[:, k], one, rtol=1e-12, atol=1e-12)


# --- irrelevant share --------------------------------------------------------------------------


def _band_cells(n: int, band: int) -> tuple[np.ndarray, np.ndarray]:
    cells = np.array([(i, j) for i in range(n) for j in range(n)])
    return cells, (cells[:, 1] - cells[:, 0]) % n < band


def test_irrelevant_share_matches_a_hand_computation_on_3x3():
    # Trained: the diagonal; held out: the 6 off-diagonal cells (a connected design, so g1, g2 are
    # unique up to constants). Held-out predictions a_i + b_j with a = (1, 2, 4), b = (0, 3, −3):
    # values 4, −2, 2, −1, 4, 7 → variance 516/54; the irrelevant part b_j has variance 6 → 27/43.
    cells = np.array([(i, j) for i in range(3) for j in range(3)])
    train = cells[:, 0] == cells[:, 1]
    a, b = np.array([1.0, 2.0, 4.0]), np.array([0.0, 3.0, -3.0])
    preds = a[cells[:, 0]] + b[cells[:, 1]]
    preds[train] = [10.0, -7.0, 0.25]  # training cells have their own conjunction terms: no influence
    fit = theory.AdditivityFit(cells, train)
    assert theory.irrelevant_share(fit, preds, [1]) == pytest.approx(27 / 43, abs=1e-12)
    # The relevant component's share is the hand Var(a)/Var(f) = (84/54)/(516/54).
    assert theory.irrelevant_share(fit, preds, [0]) == pytest.approx(84 / 516, abs=1e-12)
    # Two rows (outputs): numerators and denominators add up.
    two = np.stack([preds, 2 * preds])
    assert theory.irrelevant_share(fit, two, [1]) == pytest.approx(27 / 43, abs=1e-12)


def test_irrelevant_share_is_zero_for_an_additive_kernel_and_not_for_a_conjunctive_one():
    cells, train = _band_cells(10, 2)
    y = np.where(cells[:, 0] < 5, 1.0, -1.0)
    fit = theory.AdditivityFit(cells, train)
    shares = {}
    for name, w in (("additive", (0.0, 0.5, 1.0)), ("overlap", (0.0, 0.3, 1.0))):
        K = theory.overlap_kernel(cells, cells, dict(enumerate(w)))
        f = theory.kernel_regression(K[np.ix_(train, train)], K[:, train], y[train])
        shares[name] = theory.irrelevant_share(fit, f, [1])
    assert shares["additive"] <= 1e-12
    assert shares["overlap"] > 0.3  # the conjunction terms of the band leak through Y2


# --- multi-class accuracy ------------------------------------------------------------------------


def test_top1_accuracy_and_ties():
    scores = np.array([[3.0, 1.0, 0.0], [1.0, 1.0, 0.0], [2.0, 2.0, 2.0], [0.0, 5.0, 1.0]])
    np.testing.assert_allclose(top1_accuracy(scores, np.array([0, 0, 2, 0])), [1.0, 0.5, 1 / 3, 0.0])
    np.testing.assert_allclose(top1_accuracy(scores, np.array([1, 2, 0, 1])), [0.0, 0.0, 1 / 3, 1.0])


def test_pooled_r2_sums_over_outputs_and_reduces_to_r2():
    t = np.array([[0.0, 1.0], [1.0, 3.0], [2.0, 5.0]])
    p = np.array([[0.0, 2.0], [1.0, 3.0], [3.0, 5.0]])
    # SS_res = 1 + 1 = 2; SS_tot = 2 + 8 = 10
    assert pooled_r2(t, p) == pytest.approx(0.8)
    assert pooled_r2(t[:, :1], p[:, :1]) == pytest.approx(1 - 1 / 2)


# --- test families: multi-class grid and function-valued cells ------------------------------------


class ClassGridParams(TaskParams):
    n: int = Field(default=3, ge=2)


def build_class_grid(p: ClassGridParams) -> TaskData:
    """n × n, class = first component, diagonal held out."""
    cells = np.array([(i, j) for i in range(p.n) for j in range(p.n)])
    train = cells[:, 0] != cells[:, 1]
    return TaskData("class_grid", cells, cells[:, 0].astype(np.int64), train, (p.n, p.n), "multiclass",
                    p.model_dump(), ("a", "b"), n_classes=p.n, relevant=(0,))


class FnParams(TaskParams):
    iid: bool = False
    overlap_x: bool = False


A, B = np.array([1.0, -2.0]), np.array([0.5, 3.0])
X_TRAIN = np.array([[-0.9], [-0.3], [0.2], [0.8]])
X_EVAL = np.array([[-0.7], [-0.1], [0.4], [0.6], [1.0]])


def build_fn(p: FnParams) -> TaskData:
    """2 × 2 cells, y(x; z) = A[z1]·x + B[z2]; cell (1, 1) held out (or, iid, scored on it)."""
    cells = np.array([(0, 0), (0, 1), (1, 0), (1, 1)])
    train = np.array([True, True, True, p.iid])
    tr_cells = np.repeat(np.flatnonzero(train), len(X_TRAIN))
    x_tr = np.tile(X_TRAIN, (int(train.sum()), 1))
    y_tr = A[cells[tr_cells, 0]] * x_tr[:, 0] + B[cells[tr_cells, 1]]
    x_ev = np.concatenate([X_EVAL[:-1], X_TRAIN[:1]]) if p.overlap_x else X_EVAL
    y_ev = A[cells[:, 0]][:, None] * x_ev[None, :, 0] + B[cells[:, 1]][:, None]
    return TaskData("fn_demo", cells, y_ev.mean(axis=1), train, (2, 2), "regression", p.model_dump(), ("a", "b"),
                    samples=CellSamples(x_tr, tr_cells, y_tr, x_ev, y_ev), iid=p.iid,
                    heldout=np.array([False, False, False, True]) if p.iid else None)


@pytest.fixture(scope="module", autouse=True)
def families():
    register_family("class_grid", ClassGridParams)(build_class_grid)
    register_family("fn_demo", FnParams)(build_fn)
    yield
    for name in ("class_grid", "fn_demo"):
        FAMILIES._entries.pop(name, None)


SUITE = """\
name: outputs
seeds: 1
tasks:
  - {{id: t, family: {family}, encoding: onehot{params}}}
models:
  - {{id: ntk, adapter: kernel, params: {{kernel: relu_ntk, sigma_b2: 0.1}}}}
"""


def _run(tmp_path, family: str, params: str = "") -> dict:
    text = SUITE.format(family=family, params=f", params: {params}" if params else "")
    summary = run_suite(parse_suite(text, "suite.yaml"), tmp_path, device="cpu", progress=False)
    (rec,) = summary.records
    assert rec["status"] == "ok", rec.get("error")
    return rec


def test_multiclass_kernel_model_predicts_argmax_of_one_hot_regression(tmp_path):
    rec = _run(tmp_path, "class_grid")
    task = make_task("class_grid")
    x = onehot(task.cells, task.n_values)
    K = theory.relu_ntk(x, x, depth=1, sigma_w2=2.0, sigma_b2=0.1)
    tr = task.train_mask
    f = theory.kernel_regression(K[np.ix_(tr, tr)], K[:, tr], np.eye(3)[task.y[tr]])
    np.testing.assert_allclose(np.array(rec["predictions"]), f, atol=1e-8)
    np.testing.assert_allclose(np.array(rec["theory_predictions"]), f, atol=1e-8)
    held = ~tr
    want = float(np.mean(np.argmax(f[held], axis=1) == task.y[held]))
    assert rec["heldout_acc"] == pytest.approx(want) and rec["theory_acc"] == pytest.approx(want)
    assert rec["train_acc"] == 1.0
    assert rec["theory_r2"] == pytest.approx(1.0)
    assert "theory_note" in rec and "one-hot" in rec["theory_note"]
    assert 0.0 <= rec["irrelevant_share"] <= 1.0


def test_function_valued_cells_aggregate_per_cell_and_score_samples(tmp_path):
    rec = _run(tmp_path, "fn_demo")
    task = make_task("fn_demo")
    s = task.samples
    # By hand: inputs are onehot(cell) ⊕ x, the ReLU NTK, min-norm regression on the 12 training samples.
    x_tr = np.concatenate([onehot(task.cells[s.train_cells], (2, 2)), s.x_train], axis=1)
    ev_cells = np.repeat(np.arange(4), len(X_EVAL))
    x_ev = np.concatenate([onehot(task.cells[ev_cells], (2, 2)), np.tile(X_EVAL, (4, 1))], axis=1)
    f = theory.kernel_regression(
        theory.relu_ntk(x_tr, x_tr, depth=1, sigma_w2=2.0, sigma_b2=0.1),
        theory.relu_ntk(x_ev, x_tr, depth=1, sigma_w2=2.0, sigma_b2=0.1), s.y_train,
    ).reshape(4, len(X_EVAL))
    np.testing.assert_allclose(rec["predictions"], f.mean(axis=1), atol=1e-8)  # per-cell aggregation
    held = f[3]
    y_held = s.y_eval[3]
    want_r2 = 1 - np.sum((held - y_held) ** 2) / np.sum((y_held - y_held.mean()) ** 2)
    assert rec["heldout_r2"] == pytest.approx(want_r2, abs=1e-9)
    assert rec["heldout_mse"] == pytest.approx(np.mean((held - y_held) ** 2), abs=1e-9)
    assert rec["train_mse"] == pytest.approx(np.mean((f[:3] - s.y_eval[:3]) ** 2), abs=1e-9)
    assert rec["n_train"] == 3 and rec["n_test"] == 1
    # a kernel model is conjunction-wise additive at every x: additivity R² of the per-x rows is 1
    assert rec["additivity"] == pytest.approx(1.0, abs=1e-6)


def test_function_valued_cells_need_training_and_evaluation_inputs_drawn_apart():
    with pytest.raises(SplitError, match="also occur among the training inputs"):
        make_task("fn_demo", overlap_x=True)
    enc = encode("onehot", make_task("fn_demo"))
    tr = {tuple(r) for r in enc.train.x[:, -1:]}
    ev = {tuple(r) for r in enc.evaluate.x[:, -1:]}
    assert tr.isdisjoint(ev) and len(enc.evaluate) == 4 * len(X_EVAL) and len(enc.train) == 3 * len(X_TRAIN)


def test_iid_split_is_accepted_only_where_declared(tmp_path):
    task = make_task("class_grid")
    everything = np.ones(len(task.cells), dtype=bool)
    with pytest.raises(SplitError, match="not declared an iid control"):
        validate_split(TaskData("x", task.cells, task.y, everything, task.n_values, "multiclass", n_classes=3, heldout=~task.train_mask))
    with pytest.raises(SplitError, match="must name its held-out cells"):
        validate_split(TaskData("x", task.cells, task.y, everything, task.n_values, "multiclass", n_classes=3, iid=True))
    iid = TaskData("x", task.cells, task.y, everything, task.n_values, "multiclass", n_classes=3, iid=True, heldout=~task.train_mask)
    validate_split(iid)
    # one fixed input per cell: scoring an iid control would score the training inputs
    with pytest.raises(ValueError, match="iid control"):
        encode("onehot", iid)
    # function-valued cells draw new inputs, so their iid control runs, scored on the declared cell
    rec = _run(tmp_path, "fn_demo", "{iid: true}")
    assert rec["n_train"] == 4 and rec["n_test"] == 1
    assert "additivity" not in rec  # nothing is held out to decompose


def test_multiclass_targets_are_validated():
    cells = np.array([(0, 0), (0, 1), (1, 0), (1, 1)])
    train = np.array([True, True, True, False])
    with pytest.raises(SplitError, match="integer classes 0..1"):
        validate_split(TaskData("x", cells, np.array([0, 1, 2, 0]), train, (2, 2), "multiclass", n_classes=2))
    with pytest.raises(SplitError, match="n_classes"):
        validate_split(TaskData("x", cells, np.array([0, 1, 1, 0]), train, (2, 2), "multiclass"))
    with pytest.raises(SplitError, match="relevant"):
        validate_split(TaskData("x", cells, np.ones(4), train, (2, 2), "regression", relevant=(2,)))


REPORT_SUITE = """\
name: shaped
seeds: 1
tasks:
  - {id: classes, family: class_grid, encoding: onehot}
  - {id: fn, family: fn_demo, encoding: onehot}
models:
  - {id: ntk, adapter: kernel, params: {kernel: relu_ntk, sigma_b2: 0.1}}
"""


def test_report_shows_classes_outputs_and_irrelevant_share(tmp_path):
    import pandas as pd

    from compbench.cli import main

    (tmp_path / "s.yaml").write_text(REPORT_SUITE)
    out = tmp_path / "out"
    assert main(["run", "--suite", str(tmp_path / "s.yaml"), "--out", str(out), "--quiet"]) == 0
    frame = pd.read_parquet(out / "predictions.parquet")
    classes = frame[frame.task == "classes"]
    assert len(classes) == 9 and classes.y.astype(int).tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert set(classes.split) == {"train", "held_out"} and (classes.prediction.astype(int) >= 0).all()
    theory_csv = pd.read_csv(out / "theory.csv")
    row = theory_csv[theory_csv.task == "classes"].iloc[0]
    assert 0.0 <= row.irrelevant_share_mean <= 1.0 and row.irrelevant_share_mean == pytest.approx(row.theory_irrelevant_share_mean)
    md = (out / "leaderboard.md").read_text()
    assert "irrelevant share" in md
    assert "0.333" in md  # chance of a 3-class accuracy is 1/3, not ½


def test_docs_outputs_example_runs_and_its_numbers_hold(tmp_path):
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "reference" / "task-shapes.md").read_text()
    (block,) = [b for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.S) if b.startswith("name: leak-demo")]
    summary = run_suite(parse_suite(block, "leak-demo.yaml"), tmp_path, device="cpu", progress=False)
    share = {(r["model"], r["task"]): r["irrelevant_share"] for r in summary.records}
    # the numbers the page quotes
    assert share[("ntk", "band2")] == pytest.approx(0.357, abs=5e-4)
    assert share[("ntk", "band5")] == pytest.approx(0.015, abs=5e-4)
    assert share[("additive", "band2")] <= 1e-12 and share[("additive", "band5")] <= 1e-12
    from compbench.outcome.expectations import evaluate_expectations

    loaded = parse_suite(block, "leak-demo.yaml")
    verdicts = evaluate_expectations(loaded.suite.expectations, summary.records, loaded.tags)
    assert len(verdicts) == 4 and all(v.passed for v in verdicts), [v for v in verdicts if not v.passed]


def test_function_valued_r2_is_against_each_cells_own_variance():
    from compbench.scoring.metrics import shaped_metrics

    target = np.array([0.0, 1.0, 2.0, 10.0, 11.0, 12.0])
    preds = np.array([0.0, 1.0, 3.0, 10.0, 11.0, 12.0])
    rows = np.array([0, 0, 0, 1, 1, 1])
    args = ("regression", np.array([0, 1]), np.array([2]), target, preds, None, rows)
    per_task, _ = shaped_metrics(*args, per_task_r2=True)
    pooled, _ = shaped_metrics(*args)
    assert per_task["heldout_r2"] == pytest.approx((0.5 + 1.0) / 2)  # cell 0: 1 − 1/2; cell 1: exact
    assert pooled["heldout_r2"] == pytest.approx(1 - 1 / 154)  # the between-cell spread inflates a pooled R²


def test_split_scores_plot_draws_networks_as_bars_and_the_ceiling_as_a_line():
    from matplotlib.collections import LineCollection

    from compbench.report.figures import split_scores

    def rec(model: str, task: str, seed: int, value: float) -> dict:
        return {"model": model, "group": model, "task": task, "seed": seed, "status": "ok", "heldout_r2": value}

    records = [rec("net", "a", 0, 0.8), rec("net", "a", 1, 0.9), rec("net", "b", 0, 0.5), rec("net", "b", 1, 0.7),
               rec("ceil", "a", 0, 0.85), rec("ceil", "b", 0, 0.6)]
    fig = split_scores(records, ["a", "b"], ["ceil"])
    ax = fig.axes[0]
    assert [round(p.get_height(), 6) for p in ax.patches] == [0.85, 0.6]  # the network's means per split
    (lines,) = [c for c in ax.collections if isinstance(c, LineCollection) and c.get_label() == "ceil (ceiling)"]
    ys = sorted(round(float(seg[0][1]), 6) for seg in lines.get_segments())
    assert ys == [0.85]  # first split's line carries the label; the second is its own collection
    all_ys = sorted(round(float(seg[0][1]), 6) for c in ax.collections if isinstance(c, LineCollection) for seg in c.get_segments())
    assert 0.6 in all_ys and 0.85 in all_ys
