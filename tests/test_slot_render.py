"""The `slot_render` family: slot latents, a pixel by hand, additive images, the three supports, the latents encoding."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from compbench.encodings.registry import encode
from compbench.suite import parse_suite
from compbench.tasks import TaskParamError, make_task
from compbench.testing import check_task_family

TINY = {"grid": 2, "size": 4}


def cell(task, a: int, b: int) -> int:
    n = task.n_values[1]
    assert task.cells[a * n + b].tolist() == [a, b]
    return a * n + b


def test_slot_latents_are_the_grid_of_factors_x_slowest():
    t = make_task("slot_render", **TINY)
    lat = t.value_features[0]
    assert t.n_values == (8, 8) and t.cells.shape == (64, 2) and t.component_names == ("slot 1", "slot 2")
    assert lat.tolist() == [[x, y, b] for x in (0.1, 0.9) for y in (0.2, 0.8) for b in (0.5, 1.0)]
    np.testing.assert_array_equal(t.value_features[1], lat)
    assert t.label(0, 5) == "(0.90, 0.20, 1.00)" and t.kind == "regression" and t.y.shape == (64, 16)
    three = make_task("slot_render", size=4)
    assert three.n_values == (27, 27) and len(three.cells) == 729
    np.testing.assert_allclose(three.value_features[0][13], [0.5, 0.5, 0.75])  # the centre of the grid
    custom = make_task("slot_render", x_range=(0.0, 1.0), brightness_range=(1.0, 2.0), **TINY)
    assert custom.value_features[0][5].tolist() == [1.0, 0.2, 2.0]


def test_a_pixel_by_hand():
    t = make_task("slot_render", **TINY)
    s = 0.15
    # Slot 1 = value 1 (x 0.1, y 0.2, b 1.0), slot 2 = value 6 (x 0.9, y 0.8, b 0.5); pixel row 1, column 2.
    u, v = 2.5 / 4, 1.5 / 4
    want = 1.0 * math.exp(-((u - 0.1) ** 2 + (v - 0.2) ** 2) / (2 * s * s)) + 0.5 * math.exp(-((u - 0.9) ** 2 + (v - 0.8) ** 2) / (2 * s * s))
    assert t.y[cell(t, 1, 6), 1 * 4 + 2] == pytest.approx(want, rel=1e-12)
    wide = make_task("slot_render", sigma=0.5, **TINY)
    assert wide.y[cell(wide, 0, 0), 0] == pytest.approx(2 * 0.5 * math.exp(-((0.125 - 0.1) ** 2 + (0.125 - 0.2) ** 2) / 0.5), rel=1e-12)


def test_images_are_additive_in_the_slots_and_symmetric():
    t = make_task("slot_render", size=6)
    n = t.n_values[0]
    img = t.y.reshape(n, n, 36)
    # image(a, b) − image(a, r) − image(r, b) + image(r, r) = 0 for every a, b and a reference r.
    for r in (0, 13):
        resid = img - img[:, r:r + 1] - img[r:r + 1, :] + img[r, r]
        assert np.abs(resid).max() < 1e-12
    np.testing.assert_allclose(img, img.transpose(1, 0, 2), rtol=0, atol=0)
    # A slot's blob is half the image with both slots on it.
    blob = np.diagonal(img, axis1=0, axis2=1).T / 2
    np.testing.assert_allclose(img, blob[:, None, :] + blob[None, :, :], atol=1e-15)
    assert blob.max() <= 1.0 and blob.min() > 0


def test_rendering_is_deterministic():
    a, b = make_task("slot_render"), make_task("slot_render")
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.train_mask, b.train_mask)


def test_orthogonal_support():
    t = make_task("slot_render", **TINY)
    trained = {tuple(c) for c in t.cells[t.train_mask].tolist()}
    assert trained == {(0, v) for v in range(8)} | {(v, 0) for v in range(8)} and t.n_train == 15 and t.n_test == 49
    five = make_task("slot_render", reference=5, **TINY)
    assert {tuple(c) for c in five.cells[five.train_mask].tolist()} == {(5, v) for v in range(8)} | {(v, 5) for v in range(8)}
    d = make_task("slot_render")
    assert (d.n_train, d.n_test) == (53, 676)
    with pytest.raises(TaskParamError, match=r"slot has values 0..7") as err:
        make_task("slot_render", reference=8, **TINY)
    assert err.value.loc == ("reference",)


def test_diagonal_support():
    t = make_task("slot_render", split="diagonal")
    f = t.value_features[0]
    step = np.array([0.4, 0.3, 0.25])  # one grid step of x, y, brightness at grid 3
    diff = np.abs(f[t.cells[:, 0]] - f[t.cells[:, 1]]) / step
    np.testing.assert_array_equal(t.train_mask, np.all(diff < 1.5, axis=1))
    assert t.n_train == 7**3  # per factor, 7 of the 9 index pairs differ by at most 1
    exact = make_task("slot_render", split="diagonal", delta=0)
    assert {tuple(c) for c in exact.cells[exact.train_mask].tolist()} == {(v, v) for v in range(27)}
    four = make_task("slot_render", split="diagonal", grid=4, size=4)
    assert four.n_train == 10**3 and len(four.cells) == 4096
    with pytest.raises(TaskParamError, match="trains every cell of a grid of 3; use 0..1"):
        make_task("slot_render", split="diagonal", delta=2)


def test_random_support():
    t = make_task("slot_render", split="random")
    assert t.n_train == round(0.25 * 729) and t.n_test == 729 - t.n_train
    for c in range(2):
        assert set(t.cells[t.train_mask, c].tolist()) == set(range(27))
    again = make_task("slot_render", split="random")
    np.testing.assert_array_equal(again.train_mask, t.train_mask)
    other = make_task("slot_render", split="random", seed=1)
    assert not np.array_equal(other.train_mask, t.train_mask)
    np.testing.assert_array_equal(other.y, t.y)  # the seed moves the split only
    assert make_task("slot_render", split="random", train_fraction=0.5).n_train == round(0.5 * 729)


def test_bad_parameters():
    with pytest.raises(ValidationError, match=r"x_range must be \(low, high\) with low < high"):
        make_task("slot_render", x_range=(0.5, 0.5))
    with pytest.raises(TaskParamError, match="no draw in 100 trains every slot value"):
        make_task("slot_render", split="random", train_fraction=0.05, **TINY)


@pytest.mark.parametrize("split", ["orthogonal", "diagonal", "random"])
def test_conformance_and_validation(split):
    assert check_task_family("slot_render", {"split": split}).ok


def test_latents_encoding():
    t = make_task("slot_render", **TINY)
    enc = encode("latents", t)
    f = t.value_features[0]
    assert enc.train.x.shape == (15, 6) and enc.evaluate.x.shape == (64, 6)
    np.testing.assert_array_equal(enc.evaluate.x, np.concatenate([f[t.cells[:, 0]], f[t.cells[:, 1]]], axis=1))
    assert enc.train.y.shape == (15, 16) and enc.evaluate.y.shape == (64, 16) and enc.train.n_outputs == 16
    np.testing.assert_array_equal(enc.train.y, t.y[t.train_mask])
    assert encode("onehot", t).evaluate.x.shape == (64, 16)


def test_docs_example_loads_and_builds():
    docs = (Path(__file__).resolve().parent.parent / "docs" / "how-to" / "tasks.md").read_text(encoding="utf-8")
    section = docs.split("## The slot_render family\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    text = "name: docs\nseeds: 1\ntasks:\n" + "".join("  " + line + "\n" for line in block.splitlines()) + (
        "models:\n  - {id: k, adapter: kernel, params: {kernel: relu_ntk}}\n"
    )
    loaded = parse_suite(text, "docs.yaml")
    ortho, diag = (make_task(e.family, **e.params) for e in loaded.suite.tasks)
    assert (ortho.n_train, ortho.n_test, diag.n_train, diag.n_test) == (53, 676, 343, 386)
    assert [e.encoding_name for e in loaded.suite.tasks] == ["latents", "latents"]
