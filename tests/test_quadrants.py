"""The `quadrants` family (the 2-D toy of Li et al.) and its tasks in the redundant-input suite."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

import compbench
from compbench.cli import main
from compbench.encodings.registry import encode
from compbench.tasks import make_task

# The suite's toy-ntk model: the infinite-width NTK of a 3-hidden-layer ReLU network.
DEPTH, SW2, SB2 = 3, 2.0, 0.1


def hand_ntk(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The arc-cosine NTK recursion of THEORY.md §4, written out: Σ⁰ = σ_w² x·x'/d + σ_b², then per layer."""
    d = a.shape[1]
    s_ab = SW2 * a @ b.T / d + SB2
    s_aa = SW2 * np.sum(a * a, axis=1) / d + SB2
    s_bb = SW2 * np.sum(b * b, axis=1) / d + SB2
    theta_k = s_ab.copy()
    for _ in range(DEPTH):
        norm = np.sqrt(np.outer(s_aa, s_bb))
        t = np.arccos(np.clip(s_ab / norm, -1.0, 1.0))
        dot = SW2 / (2 * np.pi) * (np.pi - t)
        s_ab = SW2 / (2 * np.pi) * norm * (np.sin(t) + (np.pi - t) * np.cos(t)) + SB2
        s_aa = SW2 / 2 * s_aa + SB2  # θ = 0 on the diagonal
        s_bb = SW2 / 2 * s_bb + SB2
        theta_k = theta_k * dot + s_ab
    return theta_k


def test_every_sample_of_a_quadrant_lies_in_its_unit_square():
    t = make_task("quadrants")
    assert t.cells.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert t.train_mask.tolist() == [True, True, True, False] and t.n_test == 1
    assert t.kind == "classification" and t.y.tolist() == [-1.0, -1.0, 1.0, 1.0] and t.relevant == (0,)
    enc = encode("coordinates", t, samples="add")
    for batch, per_cell in ((enc.train, 64), (enc.evaluate, 256)):
        ids = np.asarray(batch.cell_ids)
        for c, (y1, y2) in enumerate(t.cells):
            x = batch.x[ids == c]
            if c == 3 and batch is enc.train:
                assert len(x) == 0  # the held-out quadrant has no training point
                continue
            assert len(x) == per_cell
            assert np.all((x[:, 0] > y1 - 1) & (x[:, 0] < y1)) and np.all((x[:, 1] > y2 - 1) & (x[:, 1] < y2))
        # the label is the sign of X1 alone, in every quadrant
        assert np.array_equal(np.asarray(batch.y), np.where(batch.x[:, 0] > 0, 1.0, -1.0))
    # The points come from the data seed alone; another seed draws other points.
    again = make_task("quadrants")
    assert np.array_equal(again.samples.x_train, t.samples.x_train) and np.array_equal(again.samples.x_eval, t.samples.x_eval)
    assert not np.array_equal(make_task("quadrants", seed=1).samples.x_train, t.samples.x_train)


def test_adding_samples_of_another_width_is_refused():
    t = make_task("modular_teacher", modules=6, inputs=3, samples_per_cell=4, eval_samples=4)
    with pytest.raises(ValueError, match="samples: add .* same width"):
        encode("coordinates", t, samples="add")


def test_the_toys_ntk_prediction_is_a_kernel_regression_computed_by_hand():
    res = compbench.evaluate("redundant-input", models=["toy-ntk"], tasks=["toy-quadrants"])
    (rec,) = res.records
    t = make_task("quadrants", samples_per_cell=64, eval_samples=256, seed=0)
    enc = encode("coordinates", t, samples="add")
    x_tr, y_tr, x_ev = enc.train.x, np.asarray(enc.train.y), enc.evaluate.x
    f = hand_ntk(x_ev, x_tr) @ np.linalg.lstsq(hand_ntk(x_tr, x_tr), y_tr, rcond=None)[0]
    stored = np.asarray(rec.samples["predictions"], dtype=np.float64)[:, 0]
    np.testing.assert_allclose(stored, f, atol=1e-4)
    held = np.asarray(enc.evaluate.cell_ids) == 3
    assert rec.metrics["heldout_acc"] == pytest.approx(np.mean(f[held] > 0), abs=1e-12)
    assert rec.metrics["heldout_margin"] == pytest.approx(np.mean(f[held]), abs=1e-4)
    # The kernel reading: the held-out quadrant is cut along its diagonal (sign of X1 − X2), not labelled by X1.
    xh = x_ev[held]
    assert np.mean(np.sign(f[held]) == np.sign(xh[:, 0] - xh[:, 1])) > 0.9
    # With one held-out cell the irrelevant share (a variance across held-out cells) is declared n/a, not 0.
    assert "irrelevant_share" in rec.not_applicable


@pytest.mark.slow
def test_the_toy_tasks_of_the_suite_pass_their_claims(tmp_path: Path, capsys):
    out = tmp_path / "res"
    assert main(["run", "--suite", "redundant-input", "--task", "toy-*", "--results", str(out), "-q"]) == 0
    rows = {r["expectation"]: r for r in csv.DictReader(open(out / "expectations.csv"))}
    toy = {k: v for k, v in rows.items() if k.startswith("toy-")}
    assert set(toy) == {"toy-network-misses-the-held-out-quadrant", "toy-ntk-splits-the-held-out-quadrant"}
    assert all(r["verdict"] == "PASS" for r in toy.values()), toy
    assert abs(float(toy["toy-ntk-splits-the-held-out-quadrant"]["measured"]) - 0.5) <= 0.1
    recs = list(csv.DictReader(open(out / "records.csv")))
    mlp = [r for r in recs if r["model"] == "toy-mlp"]
    assert len(mlp) == 3 and all(r["status"] == "ok" for r in mlp)
    # The network fits its three quadrants (new points) and still misses part of the fourth.
    assert min(float(r["train_acc"]) for r in mlp) > 0.95
    assert np.mean([float(r["heldout_acc"]) for r in mlp]) < 0.9
    assert all(r["info.steps"] == "1024" or float(r["info.steps"]) == 1024 for r in mlp)
