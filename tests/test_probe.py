"""What a representation knows vs what it reads out (#39 item 4): the linear probe from penultimate features and each
held-out cell's similarity to its nearest training sample under the model's own kernel, against hand-built
representations and kernels with known answers, and through `compbench.evaluate` on a tiny sprite grid."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from tiny_suites import SPRITES

from compbench.adapters.base import Fitted, check_fitted
from compbench.records.metric_facts import NA_RULES, NA_UNJUDGEABLE, probe_not_applicable, similarity_not_applicable
from compbench.scoring.metrics import representation_metrics
from compbench.theory.probe import linear_probe
from compbench.theory.similarity import nearest_similarity, output_trace


def grid() -> tuple[np.ndarray, np.ndarray]:
    """A 4 × 5 × 5 grid of (scale, x, y) scaled to [0, 1], and the corner scale ≥ 2 and x ≥ 3 held out (Schott et al.'s
    composition split, as factor-grid's)."""
    idx = np.stack(np.meshgrid(np.arange(4), np.arange(5), np.arange(5), indexing="ij"), axis=-1).reshape(-1, 3)
    factors = idx / np.array([3.0, 4.0, 4.0])
    test = (idx[:, 0] >= 2) & (idx[:, 1] >= 3)
    return factors, test


NAMES = ("scale", "x", "y")


def probe_scores(features: np.ndarray, factors: np.ndarray, test: np.ndarray, names: tuple[str, ...] = NAMES) -> dict[str, float]:
    """The probe fitted on the training cells, scored on the held-out ones as a record's metrics are."""
    preds = linear_probe(features[~test], factors[~test], features)
    return representation_metrics(names, factors, test, preds, None)[0]


def test_an_exact_linear_map_of_the_factors_is_recovered_on_held_out_cells():
    factors, test = grid()
    A = np.random.default_rng(0).normal(size=(3, 12))
    scores = probe_scores(factors @ A + 0.5, factors, test)  # features = A·factors (+ an offset), no noise
    for name in NAMES:
        assert scores[f"probe_r2.{name}"] == pytest.approx(1.0, abs=1e-5)
    assert scores["probe_r2"] == pytest.approx(1.0, abs=1e-5)


def test_a_factor_the_features_do_not_hold_is_not_recovered():
    factors, test = grid()
    A = np.random.default_rng(1).normal(size=(2, 12))
    scores = probe_scores(factors[:, [0, 2]] @ A, factors, test)  # scale and y only: x is independent of the features
    assert scores["probe_r2.scale"] == pytest.approx(1.0, abs=1e-5)
    assert scores["probe_r2.y"] == pytest.approx(1.0, abs=1e-5)
    # with x ≥ 3 held out at large scales, the probe can only guess x from what correlates with it on the training
    # cells (scale, y): the least-squares fit of x on them, by hand, and no better than chance (R² ≤ 0)
    x, design = factors[:, 1], np.column_stack([factors[:, 0], factors[:, 2], np.ones(len(factors))])
    coef, *_ = np.linalg.lstsq(design[~test], x[~test], rcond=None)
    assert scores["probe_r2.x"] == pytest.approx(1 - np.mean((x[test] - design[test] @ coef) ** 2) / np.var(x), abs=1e-3)  # the ridge: 2e-4
    assert scores["probe_r2.x"] <= 0.0


def test_a_categorical_factor_is_scored_as_a_class():
    factors, test = grid()
    shape = (np.arange(len(factors)) % 3)
    onehot = np.eye(3)[shape]
    names = ("scale", "shape=a", "shape=b", "shape=c")
    targets = np.concatenate([factors[:, :1], onehot], axis=1)
    features = np.concatenate([factors[:, :1], onehot], axis=1) @ np.random.default_rng(2).normal(size=(4, 9))
    scores = probe_scores(features, targets, test, names)
    assert scores["probe_acc.shape"] == 1.0  # the largest output of the one-hot block, not an R² of a category
    assert "probe_r2.shape" not in scores and "probe_r2.shape=a" not in scores
    assert scores["probe_r2"] == pytest.approx(scores["probe_r2.scale"])  # the mean is over the ordinal factors


def test_nearest_training_similarity_under_a_hand_built_kernel():
    train = np.eye(4)[:3]  # e1, e2, e3
    evals = np.array([[3.0, 0, 0, 0], [0.6, 0.8, 0, 0], [0, 0, 0, 2.0], [0.0, 0, 0, 0]])
    K_et = evals @ train.T  # the linear kernel
    sims = nearest_similarity(K_et, np.sum(train**2, axis=1), np.sum(evals**2, axis=1))
    assert sims[:3].tolist() == pytest.approx([1.0, 0.8, 0.0])  # a scaled copy of e1 is a duplicate under the cosine
    assert math.isnan(sims[3])  # k(x, x) = 0: no direction to compare
    # a full kernel of K outputs (K ⊗ I, sample-major) is the same after averaging over its outputs
    full_et, full_tt = np.kron(K_et, np.eye(2)), np.kron(train @ train.T, np.eye(2))
    assert np.allclose(output_trace(full_et, 4, 3), K_et)
    assert np.allclose(np.diagonal(output_trace(full_tt, 3, 3)), 1.0)


def test_the_diagnostics_are_not_applicable_by_the_metric_facts_rules():
    factors, test = grid()
    metrics, na = representation_metrics(NAMES, factors, test, None, None)
    assert math.isnan(metrics["probe_r2"]) and math.isnan(metrics["nearest_train_similarity"])
    assert na == {"probe_r2": probe_not_applicable(False), "nearest_train_similarity": similarity_not_applicable(False)}
    assert NA_RULES["probe_r2"] is probe_not_applicable and "probe_r2" in NA_UNJUDGEABLE
    nearest = [0.5 if t else None for t in test]
    nearest[int(np.flatnonzero(test)[0])] = 0.9
    metrics, na = representation_metrics(NAMES, factors, test, None, nearest)
    assert metrics["nearest_train_similarity"] == pytest.approx((0.9 + 0.5 * (test.sum() - 1)) / test.sum())
    assert "nearest_train_similarity" not in na


def test_features_of_the_wrong_shape_break_the_adapter_contract():
    ok = Fitted(np.zeros(5), features=(np.zeros((3, 2)), np.zeros((5, 2))), kernel_diagonal=np.ones(5))
    assert check_fitted(ok, 3, 5) == []
    bad = Fitted(np.zeros(5), features=(np.zeros((3, 2)), np.zeros((4, 2))), kernel_diagonal=np.ones(4))
    assert {p.name for p in check_fitted(bad, 3, 5)} == {"features-shape", "kernel-diagonal-length"}


@pytest.fixture(scope="module")
def sprites(tmp_path_factory):
    """The tiny sprite suite run once through the public API: its records and its prepared task."""
    import compbench
    from compbench.runner.cells import prepare_tasks

    path = tmp_path_factory.mktemp("sprites") / "tiny-sprites.yaml"
    path.write_text(SPRITES)
    results = compbench.evaluate(str(path), threads=1)
    loaded = compbench.load_suite(str(path))
    task = prepare_tasks(loaded)["composition"]
    return {r.model: r for r in results.records}, task, loaded


def test_records_carry_the_probe_and_the_similarity_and_a_kernel_has_no_probe(sprites):
    from compbench.adapters.frozen_probe import FrozenProbeParams, _features
    from compbench.theory import relu_ntk

    records, task, _ = sprites
    data, enc = task.data, task.encoded
    test = np.asarray(data.test_mask)
    assert all(r.ok for r in records.values()), [r.message for r in records.values()]
    # the pixel NTK: no features (n/a by the metric facts), its similarity under its own kernel, by hand
    ntk = records["relu-ntk"]
    assert math.isnan(ntk.metrics["probe_r2"]) and ntk.not_applicable["probe_r2"] == probe_not_applicable(False)
    xt, xe = enc.train.x.reshape(len(enc.train), -1), enc.evaluate.x.reshape(len(enc.evaluate), -1)
    K_et, d_tr = relu_ntk(xe, xt), np.diagonal(relu_ntk(xt, xt))
    d_ev = np.array([relu_ntk(xe[i : i + 1], xe[i : i + 1])[0, 0] for i in range(len(xe))])
    by_hand = (K_et / np.sqrt(np.outer(d_ev, d_tr))).max(axis=1)
    cells = np.bincount(enc.evaluate.cell_ids, weights=by_hand) / np.bincount(enc.evaluate.cell_ids)
    assert [v is not None for v in ntk.nearest_train] == test.tolist()
    assert [v for v in ntk.nearest_train if v is not None] == pytest.approx(cells[test].tolist(), abs=1e-9)
    assert ntk.metrics["nearest_train_similarity"] == pytest.approx(cells[test].mean(), abs=1e-9)
    # the frozen-feature probe: its features are the representation, probed by hand
    fp = records["probe"]
    params = FrozenProbeParams(channels=[4], width=64)
    phi_tr, phi_ev = _features(params, enc.train.x, fp.seed), _features(params, enc.evaluate.x, fp.seed)
    preds = linear_probe(phi_tr, enc.train.regression_targets(), phi_ev)
    expected = representation_metrics(data.output_names, np.asarray(data.y), test, preds, None)[0]
    for name in ("probe_r2.scale", "probe_r2.x", "probe_r2.y", "probe_r2", "probe_acc.shape"):
        assert fp.metrics[name] == pytest.approx(expected[name], abs=1e-8)
    # the CNN and the MLP: a probe of their trained penultimate layer and a similarity under their eNTK at init
    for net in ("cnn", "mlp"):
        rec = records[net]
        assert math.isfinite(rec.metrics["probe_r2"]) and not rec.not_applicable, net
        assert -1.0 <= rec.metrics["nearest_train_similarity"] <= 1.0, net
        assert [v is not None for v in rec.nearest_train] == test.tolist(), net


def test_rescoring_keeps_the_representation_diagnostics(sprites):
    from compbench.scoring.score import rescore

    records, task, _ = sprites
    cnn = records["cnn"]
    again = rescore(task, replace(cnn, metrics={}, scoring="another"))
    for name in ("probe_r2", "probe_r2.scale", "probe_acc.shape", "nearest_train_similarity"):
        assert again.metrics[name] == pytest.approx(cnn.metrics[name], abs=1e-9)


def test_the_similarity_plot_draws_each_held_out_cell_error_against_its_similarity(sprites):
    from compbench.report.figures import cell_errors, similarity_scatter
    from compbench.report.plot_style import model_colors
    from compbench.report.plots import _figures

    records, task, loaded = sprites
    data, recs = task.data, list(records.values())
    fig = similarity_scatter("composition", recs, data, model_colors(list(records)))
    panels = {ax.get_title().split(" (")[0]: ax for ax in fig.axes if ax.get_visible()}
    assert set(panels) == {"relu-ntk", "probe", "cnn", "mlp"}
    ntk = records["relu-ntk"]
    y = np.asarray(data.y)[:, :3]  # scale, x, y (the shape's one-hot block is not an ordinal error)
    err = np.mean((np.asarray(ntk.predictions)[:, :3] - y) ** 2, axis=1)
    assert np.allclose(cell_errors(ntk, data), err)
    test = np.asarray(data.test_mask)
    drawn = panels["relu-ntk"].collections[0].get_offsets()
    assert np.allclose(drawn, np.column_stack([[v for v in ntk.nearest_train if v is not None], err[test]]))
    names = [name for name, _, _ in _figures(loaded, recs)]
    assert "similarity-composition" in names
    # records without the diagnostic (another kind of task, or stored before it) draw no such plot
    bare = [replace(r, nearest_train=None) for r in recs]
    assert "similarity-composition" not in [name for name, _, _ in _figures(loaded, bare)]


def test_the_leaderboard_shows_the_probe_and_the_similarity_beside_the_held_out_score():
    from compbench.records import CellRecord, Status
    from compbench.report.tables import factor_columns, factor_tables

    metrics = {"factor_r2": 0.3, "factor_r2.x": 0.2, "class_acc.shape": 0.9, "probe_r2": 0.6, "probe_r2.x": 0.5,
               "probe_acc.shape": 1.0, "nearest_train_similarity": 0.97, "factor_slope.x": 1.0}
    rec = CellRecord(key="k", task="composition", model="cnn", seed=0, status=Status.OK, kind="regression", metrics=metrics)
    assert factor_columns([rec]) == (["factor_r2", "probe_r2", "nearest_train_similarity", "factor_r2.x", "class_acc.shape",
                                      "probe_r2.x", "probe_acc.shape"], ["factor_slope.x"])
    table = factor_tables([rec], ["composition"])[0]
    assert table.rows[0][:5] == ["cnn", "composition", "0.300", "0.600", "0.970"]
    assert "probe mean R²" in " ".join(table.headers) and "nearest-train similarity" in " ".join(table.headers)


def test_the_stacked_mlps_features_are_its_read_outs_input():
    import torch

    from compbench.training.batched_mlp import init_stacked_mlp, stacked_features, stacked_forward

    x = torch.as_tensor(np.random.default_rng(3).normal(size=(7, 5)))
    for depth, d_out in ((1, 1), (2, 3)):
        layers = init_stacked_mlp([0, 1], 5, 16, depth, 1.0, True, torch.float64, "cpu", d_out=d_out)
        phi = stacked_features(layers, x)
        assert phi.shape == (2, 7, 16)
        w, b = layers[-1]
        out = (torch.bmm(phi, w) + b).reshape(stacked_forward(layers, x).shape)  # the read-out applied by hand
        assert torch.allclose(out, stacked_forward(layers, x))
