"""The sprite renderer, the `sprites` task family and encoding, and the factor-value split rules."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compbench.encodings import encode
from compbench.tasks import SplitError, TaskParamError, grid, make_task
from compbench.tasks.factor_splits import FactorSplit, split_mask
from compbench.tasks.sprites import render_sprites


def mask(rows: str) -> np.ndarray:
    """A hand-drawn mask: '#' inside, '.' outside."""
    return np.array([[ch == "#" for ch in row] for row in rows.split()], dtype=np.float32)


def one(shape: int, theta: float = 0.0, x: float = 0.5, y: float = 0.5, size: int = 8, ss: int = 1, half: float = 0.25) -> np.ndarray:
    # margin 0: the centre is at (x, y) of the unit image
    return render_sprites([shape], [1.0], [theta], [x], [y], size=size, supersample=ss, half_size=half, margin=0.0)[0]


SQUARE = """
........
........
..####..
..####..
..####..
..####..
........
........
"""

ELLIPSE = """
........
........
........
.######.
.######.
........
........
........
"""

HEART = """
............
..###..###..
.##########.
.##########.
.##########.
.##########.
..########..
..########..
...######...
....####....
............
............
"""


def test_square_matches_hand_drawn_mask():
    assert np.array_equal(one(0), mask(SQUARE))
    # supersampled, the square's edges lie on pixel edges: still exactly 0 or 1
    assert np.array_equal(one(0, ss=4), mask(SQUARE))


def test_square_half_covered_edge_pixels():
    # shifted by half a pixel to the right: the edge columns are half covered (2 of 4 subsample columns)
    img = one(0, x=0.5 + 1 / 16, ss=4)
    expected = np.zeros((8, 8), np.float32)
    expected[2:6, 3:6] = 1.0
    expected[2:6, 2] = expected[2:6, 6] = 0.5
    assert np.array_equal(img, expected)


def test_ellipse_and_rotation_match_hand_drawn_masks():
    assert np.array_equal(one(1, half=0.375), mask(ELLIPSE))
    # a quarter turn stands it upright
    assert np.array_equal(one(1, theta=math.pi / 2, half=0.375), mask(ELLIPSE).T)


def test_heart_matches_hand_drawn_mask():
    # lobes at the top (row 0 is the top), point at the bottom
    assert np.array_equal(one(2, size=12, half=0.45), mask(HEART))


def test_position_y_runs_up():
    low, high = one(0, y=0.3, ss=4, half=0.1), one(0, y=0.7, ss=4, half=0.1)
    rows = np.arange(8)
    centre = lambda im: float((im.sum(axis=1) * rows).sum() / im.sum())
    assert centre(high) < centre(low)  # higher y: nearer the top rows


@pytest.mark.parametrize(("shape", "period"), [(0, math.pi / 2), (1, math.pi)])
def test_symmetric_shapes_under_rotation(shape, period):
    thetas = np.array([0.3, 0.3 + period, 1.1, 1.1 + period])
    n = len(thetas)
    imgs = render_sprites([shape] * n, [0.8] * n, thetas, [0.4] * n, [0.6] * n, size=32, supersample=4)
    assert np.abs(imgs[0] - imgs[1]).max() <= 1 / 16 + 1e-7  # at most one boundary subsample differs per pixel
    assert np.mean(imgs[0] != imgs[1]) < 0.01 and np.mean(imgs[2] != imgs[3]) < 0.01
    # and not for a turn the shape lacks: a quarter turn changes an ellipse
    if shape == 1:
        other = render_sprites([1], [0.8], [0.3 + math.pi / 2], [0.4], [0.6], size=32, supersample=4)[0]
        assert np.abs(other - imgs[0]).sum() > 10


def test_renderer_is_deterministic_and_anti_aliased():
    t = make_task("sprites", scales=2, orientations=3, positions_x=2, positions_y=2)
    a = encode("sprites", t).evaluate.x
    b = encode("sprites", t).evaluate.x
    assert a.shape == (len(t.cells), 1, 32, 32) and a.dtype == np.float32
    assert a.tobytes() == b.tobytes()
    values = np.unique(a)
    assert values.min() == 0.0 and values.max() == 1.0 and len(values) > 2  # grey edge pixels
    big = encode("sprites", t, size=64).evaluate.x
    assert big.shape[-2:] == (64, 64)


def test_sprites_task_targets():
    t = make_task("sprites", scales=3, orientations=4, positions_x=2, positions_y=2)
    assert t.n_values == (3, 3, 4, 2, 2) and t.kind == "regression"
    assert t.output_names == ("shape", "scale", "orientation", "x", "y", "shape=square", "shape=ellipse", "shape=heart")
    # authors' normalisation: index / (n − 1)
    assert np.array_equal(t.y[:, 1], t.cells[:, 1] / 2) and np.array_equal(t.y[:, 2], t.cells[:, 2] / 3)
    assert np.array_equal(t.y[:, 5:].argmax(axis=1), t.cells[:, 0])
    only = make_task("sprites", scales=2, orientations=2, positions_x=2, positions_y=2, targets=["x"], shape_classes=False)
    assert only.y.shape == (len(only.cells), 1) and only.output_names == ("x",)


def test_encoding_refuses_other_families():
    t = make_task("additive")
    with pytest.raises(ValueError, match="'sprites' task"):
        encode("sprites", t)


# Split rules, on a small grid: a 3 values, b 4, c 2 (24 cells).
NAMES = ("a", "b", "c")
NV = (3, 4, 2)
CELLS = grid(NV)


def held(rule: str, allow: bool = False, **kw) -> np.ndarray:
    return ~split_mask(FactorSplit(rule=rule, **kw), CELLS, NV, NAMES, allow)


def test_corner_holds_out_the_block_only():
    h = held("corner", values={"a": 2, "b": [2, 3]})
    assert h.sum() == 4  # a = 2 (1 value) × b ∈ {2, 3} (2) × c (2)
    assert set(map(tuple, CELLS[h, :2])) == {(2, 2), (2, 3)}
    # every value alone is still trained
    train = ~h
    assert all(set(CELLS[train, c]) == set(range(n)) for c, n in enumerate(NV))


def test_interior_holds_out_any_listed_value():
    # the held-out values are never trained (interpolation), so the task must declare it
    with pytest.raises(TaskParamError, match="interpolation: every cell with b = 1 is held out"):
        held("interior", values={"b": [1, 2]})
    assert held("interior", allow=True, values={"b": [1, 2]}).sum() == 12  # 3 × 2 × 2
    assert held("interior", allow=True, values={"a": [1], "b": [2]}).sum() == 12  # a = 1: 8, b = 2: 6, both: 2


def test_beyond_is_refused_without_the_opt_in():
    with pytest.raises(TaskParamError, match="allow_unseen_values: true") as exc:
        held("beyond", values={"b": 3})
    assert "extrapolation" in str(exc.value) and "b value 3" in str(exc.value)
    h = held("beyond", allow=True, values={"b": 3, "a": 2})
    assert h.sum() == 6 + 8 - 2  # b = 3: 6 cells, a = 2: 8, both: 2


def test_random_trains_every_value():
    h = held("random", fraction=0.25, seed=3)
    assert h.sum() == 6
    assert np.array_equal(h, held("random", fraction=0.25, seed=3))


@pytest.mark.parametrize(
    ("rule", "kw", "message"),
    [
        ("corner", {"values": {"a": 2}}, "two or more factors"),
        ("interior", {"values": {"b": [0, 1]}, "allow": True}, "not interior"),
        ("corner", {"values": {"z": 1, "a": 1}}, "unknown factor 'z'"),
        ("beyond", {"values": {"b": [2, 3]}}, "one threshold"),
        ("interior", {"values": {"b": 0}, "allow": True}, "threshold must be 1..3"),
        ("corner", {}, "needs values"),
    ],
)
def test_split_rule_errors(rule, kw, message):
    with pytest.raises(TaskParamError, match=message):
        held(rule, **kw)


def test_sprites_extrapolation_needs_the_declared_opt_in():
    small = {"scales": 3, "orientations": 2, "positions_x": 3, "positions_y": 2}
    split = {"rule": "beyond", "values": {"scale": 2}}
    with pytest.raises(TaskParamError, match="allow_unseen_values"):
        make_task("sprites", split=split, **small)
    t = make_task("sprites", split=split, allow_unseen_values=True, **small)
    assert t.allow_unseen_values and t.n_test == 3 * 1 * 2 * 3 * 2
    # and the split validator itself still refuses unseen values when a task does not declare them
    from dataclasses import replace

    from compbench.tasks import validate_split

    with pytest.raises(SplitError, match="in no training cell"):
        validate_split(replace(t, allow_unseen_values=False))
