"""Sprites: dSprites' factors rendered in numpy, every factor a regression target (docs/explanation/suites/factor-grid.md).

The factors are dSprites' (github.com/deepmind/dsprites-dataset, README): shape (square, ellipse,
heart), scale (values in [0.5, 1]), orientation (values in [0, 2π)), x and y position (values in
[0, 1]). A cell is one combination of factor values; the `sprites` encoding renders it as one
grey image (compbench/encodings/sprites.py). Targets follow Schott et al. 2022
(github.com/bethgelab/InDomainGeneralizationBenchmark, load_dataset.py `normalized_targets`):
each factor's value index divided by (its number of values − 1), in [0, 1], shape included as an
ordinal number; `shape_classes` adds shape as one-hot outputs (`shape=square`, …), scored as a
class (accuracy of the largest of the three), because an ordinal shape is arbitrary.

The split is a factor-value rule (compbench/tasks/factor_splits.py).

Where this differs from dSprites (the README and its generation notes): the grid is smaller by
default (dSprites has 3 × 6 × 40 × 32 × 32 at 64 × 64); orientations are n values evenly spaced in
[0, 2π) — dSprites' 40 values include both 0 and 2π, whose images coincide; a sprite's size and the
position range are ours (a scale-1 square's half side is `half_size` = 0.14 of the image, centres
run over [margin, 1 − margin] with margin 0.2, so a rotated sprite stays in the frame); our ellipse
has axes 2 : 1 and our heart is the curve (u² + v² − 1)³ ≤ u² v³, scaled into the unit disc.
"""

from __future__ import annotations

import math
from typing import Literal

import numpy as np
from pydantic import Field

from compbench.tasks.base import TaskData, TaskParamError, grid
from compbench.tasks.factor_splits import FactorSplit, split_mask
from compbench.tasks.registry import TaskParams, register_family

SHAPES = ("square", "ellipse", "heart")
FACTORS = ("shape", "scale", "orientation", "x", "y")
HALF_SIZE = 0.14  # half side of a scale-1 square, in image widths
MARGIN = 0.2  # sprite centres run over [MARGIN, 1 − MARGIN]
_HEART_SCALE = 1.25  # the heart curve spans v ∈ [−1, 1.236]: divide by this to fit the unit disc
_CHUNK = 1 << 22  # subsample points per rendering step (bounds memory)


class SpritesParams(TaskParams):
    """dSprites' factors on a grid (values per factor), all regressed; a factor-value split rule."""

    shapes: list[Literal["square", "ellipse", "heart"]] = Field(default=list(SHAPES), min_length=1, description="the shapes, in value order")
    scales: int = Field(default=6, ge=1, description="scale values, evenly spaced in [0.5, 1]")
    orientations: int = Field(default=8, ge=1, description="orientation values, evenly spaced in [0, orientation_range)")
    orientation_range: float = Field(
        default=2 * math.pi, gt=0, le=2 * math.pi,
        description="radians; 2π as dSprites (a square repeats every π/2 and an ellipse every π, so their orientation "
        "is ambiguous there); π/2 gives every shape distinct images",
    )
    positions_x: int = Field(default=8, ge=1, description="x values, evenly spaced in [0, 1]")
    positions_y: int = Field(default=8, ge=1, description="y values, evenly spaced in [0, 1]")
    split: FactorSplit = Field(default_factory=lambda: FactorSplit(rule="random"), description="the split rule over factor values")
    targets: list[Literal["shape", "scale", "orientation", "x", "y"]] = Field(
        default=list(FACTORS), min_length=1, description="factors regressed (each index / (n − 1), in [0, 1])"
    )
    shape_classes: bool = Field(default=True, description="also predict shape as one-hot outputs, scored as a class")
    allow_unseen_values: bool = Field(
        default=False, description="declare that the split holds out values no training cell has (extrapolation)"
    )
    additivity: bool = Field(
        default=False, description="fit the conjunction-wise additivity score (over 5 factors: its features and fit take about 2 s per 1,728-cell task on one thread)"
    )


def factor_values(p: SpritesParams) -> dict[str, np.ndarray]:
    """The value of every factor level: shape index, scale, orientation (radians), x and y in [0, 1]."""
    def even(n: int, lo: float, hi: float) -> np.ndarray:
        return np.linspace(lo, hi, n) if n > 1 else np.array([(lo + hi) / 2])

    return {
        "shape": np.array([SHAPES.index(s) for s in p.shapes], dtype=np.float64),
        "scale": even(p.scales, 0.5, 1.0),
        "orientation": p.orientation_range * np.arange(p.orientations) / p.orientations,
        "x": even(p.positions_x, 0.0, 1.0),
        "y": even(p.positions_y, 0.0, 1.0),
    }


def _inside(shape: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Whether sprite-frame points (u right, v up; the sprite's radius is 1) are inside the shape."""
    if shape == 0:  # square
        return np.maximum(np.abs(u), np.abs(v)) <= 1.0
    if shape == 1:  # ellipse, axes 2 : 1 along u
        return u * u + 4.0 * v * v <= 1.0
    u, v = u * _HEART_SCALE, v * _HEART_SCALE + 0.12  # centre the heart's extent on the origin
    r = u * u + v * v - 1.0
    return r * r * r <= u * u * v * v * v


def render_sprites(shape: np.ndarray, scale: np.ndarray, orientation: np.ndarray, x: np.ndarray, y: np.ndarray,
                   size: int = 32, supersample: int = 4, half_size: float = HALF_SIZE, margin: float = MARGIN) -> np.ndarray:
    """Grey images (n, size, size) float32 in [0, 1]: the fraction of each pixel's supersample² points inside the sprite.

    `shape` indexes SHAPES; `scale` multiplies the sprite's radius `half_size` (image widths);
    `orientation` rotates it counter-clockwise (radians); `x`, `y` in [0, 1] place its centre at
    margin + t·(1 − 2·margin) across (columns, left to right) and up (rows, bottom to top).
    Row 0 is the top of the image. Pure float64 numpy arithmetic: the same inputs give the same bits.
    """
    shape = np.asarray(shape, dtype=np.int64)
    params = [np.asarray(a, dtype=np.float64).reshape(-1) for a in (scale, orientation, x, y)]
    n = len(shape)
    if any(len(a) != n for a in params):
        raise ValueError("render_sprites: shape, scale, orientation, x and y need one entry per sprite")
    s = size * supersample
    pts = (np.arange(s, dtype=np.float64) + 0.5) / s  # subsample centres, unit image coordinates
    col = pts[None, :]  # across
    up = 1.0 - pts[:, None]  # row 0 is the top
    out = np.empty((n, size, size), dtype=np.float32)
    per = max(1, _CHUNK // (s * s))
    for k in np.unique(shape):
        if not 0 <= k < len(SHAPES):
            raise ValueError(f"render_sprites: shape index {int(k)} is not one of 0..{len(SHAPES) - 1}")
        ids = np.flatnonzero(shape == k)
        for start in range(0, len(ids), per):
            sel = ids[start : start + per]
            sc, th, cx, cy = (a[sel][:, None, None] for a in params)
            du = col[None] - (margin + cx * (1 - 2 * margin))
            dv = up[None] - (margin + cy * (1 - 2 * margin))
            c, sn, r = np.cos(th), np.sin(th), half_size * sc
            u = (c * du + sn * dv) / r  # rotate the point by −θ: the sprite turns by +θ
            v = (-sn * du + c * dv) / r
            hit = _inside(int(k), u, v)
            counts = hit.reshape(len(sel), size, supersample, size, supersample).sum(axis=(2, 4))
            out[sel] = (counts / float(supersample * supersample)).astype(np.float32)
    return out


def cell_images(task: TaskData, size: int = 32, supersample: int = 4) -> np.ndarray:
    """The rendered image (n_cells, size, size) of every cell of a `sprites` task."""
    p = SpritesParams.model_validate(task.params)
    vals = factor_values(p)
    z = task.cells
    return render_sprites(vals["shape"][z[:, 0]].astype(np.int64), vals["scale"][z[:, 1]], vals["orientation"][z[:, 2]],
                          vals["x"][z[:, 3]], vals["y"][z[:, 4]], size=size, supersample=supersample)


@register_family("sprites", SpritesParams)
def build_sprites(p: SpritesParams) -> TaskData:
    """dSprites' factors (shape × scale × orientation × x × y) as cells; all factors regressed; a factor-value split."""
    if len(set(p.shapes)) != len(p.shapes):
        raise TaskParamError(("shapes",), f"lists a shape twice: {p.shapes}")
    if len(set(p.targets)) != len(p.targets):
        raise TaskParamError(("targets",), f"lists a factor twice: {p.targets}")
    n_values = (len(p.shapes), p.scales, p.orientations, p.positions_x, p.positions_y)
    cells = grid(n_values)
    train = split_mask(p.split, cells, n_values, FACTORS, p.allow_unseen_values)
    cols, names = [], []
    for f in p.targets:
        c = FACTORS.index(f)
        cols.append(cells[:, c] / max(1, n_values[c] - 1))
        names.append(f)
    if p.shape_classes:
        if len(p.shapes) < 2:
            raise TaskParamError(("shape_classes",), "needs at least two shapes")
        for k, s in enumerate(p.shapes):
            cols.append((cells[:, 0] == k).astype(np.float64))
            names.append(f"shape={s}")
    y = np.stack(cols, axis=1).astype(np.float64)
    vals = factor_values(p)
    labels = (
        tuple(p.shapes),
        tuple(f"{v:.2f}" for v in vals["scale"]),
        tuple(f"{math.degrees(v):.0f}°" for v in vals["orientation"]),
        tuple(f"{v:.2f}" for v in vals["x"]),
        tuple(f"{v:.2f}" for v in vals["y"]),
    )
    return TaskData(
        "sprites", cells, y, train, n_values, "regression", p.model_dump(), FACTORS,
        allow_unseen_values=p.allow_unseen_values, value_labels=labels, output_names=tuple(names), additivity=p.additivity,
    )
