"""Slot rendering ("Compositional generalization from first principles", Wiedemer et al. 2023).

Two slots, each with the factors (x, y, brightness) on a grid of `grid` values per factor; a
slot's value is an index into its grid³ latents (x slowest, brightness fastest). The target is a
`size` × `size` image with one Gaussian blob per slot, composed additively:

    image(s1, s2)[r, c] = blob(s1)[r, c] + blob(s2)[r, c],
    blob(x, y, b)[r, c] = b · exp(−((u_c − x)² + (v_r − y)²) / (2σ²)),  u_c = (c + ½)/size, v_r = (r + ½)/size,

flattened row-major (pixel r · size + c; rows run along y). The authors' code (github.com/
brendel-group/compositional-ood-generalization at 4f96ac0) renders Spriteworld sprites composed
with a soft occlusion; additive composition is the clean case (LITERATURE.md §3). The position
ranges are theirs (src/models.py SPRITEWORLD_DEFAULT_RANGES: x in [0.1, 0.9], y in [0.2, 0.8]);
brightness stands in for their hue, in [0.5, 1] so that every slot stays visible.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from compbench.tasks.base import TaskData, TaskParamError, grid
from compbench.tasks.registry import TaskParams, register_family

_SPLIT_ATTEMPTS = 100
FACTORS = ("x", "y", "brightness")


class SlotRenderParams(TaskParams):
    """Two slots of (x, y, brightness) on a grid; a blob image per cell; orthogonal, diagonal or random support."""

    grid: int = Field(default=3, ge=2, description="values per factor (grid³ values per slot, grid⁶ cells)")
    size: int = Field(default=16, ge=2, description="the image is size × size pixels")
    sigma: float = Field(default=0.15, gt=0, description="blob width in unit image coordinates")
    x_range: tuple[float, float] = Field(default=(0.1, 0.9), description="x positions, unit image coordinates")
    y_range: tuple[float, float] = Field(default=(0.2, 0.8), description="y positions, unit image coordinates")
    brightness_range: tuple[float, float] = Field(default=(0.5, 1.0), description="blob amplitudes")
    split: Literal["orthogonal", "diagonal", "random"] = Field(
        default="orthogonal",
        description="orthogonal: train cells with a slot at the reference value; diagonal: slots within delta of each "
        "other in every factor; random: a seeded fraction of cells",
    )
    reference: int = Field(default=0, ge=0, description="orthogonal: the reference slot value (index 0..grid³−1)")
    delta: int = Field(default=1, ge=0, description="diagonal: largest difference of the two slots' grid indices, per factor (grid units)")
    train_fraction: float = Field(default=0.25, gt=0, lt=1, description="random: fraction of cells trained")
    seed: int = Field(default=0, ge=0, description="random: seeds the split")

    @model_validator(mode="after")
    def _ranges(self) -> SlotRenderParams:
        for name in ("x_range", "y_range", "brightness_range"):
            lo, hi = getattr(self, name)
            if not lo < hi:
                raise ValueError(f"{name} must be (low, high) with low < high, got ({lo}, {hi})")
        return self


def slot_latents(p: SlotRenderParams) -> np.ndarray:
    """(grid³ × 3) factor values (x, y, brightness) of a slot's values, x slowest."""
    idx = grid((p.grid,) * 3)
    t = idx / (p.grid - 1)
    ranges = np.array([p.x_range, p.y_range, p.brightness_range], dtype=np.float64)
    return ranges[:, 0] + t * (ranges[:, 1] - ranges[:, 0])


def render_blobs(latents: np.ndarray, size: int, sigma: float) -> np.ndarray:
    """One blob image per latent row (x, y, brightness): (n × size²), row-major with rows along y."""
    centres = (np.arange(size) + 0.5) / size
    lat = np.asarray(latents, dtype=np.float64)
    gx = np.exp(-((centres[None, :] - lat[:, 0:1]) ** 2) / (2 * sigma**2))  # (n, size) along columns
    gy = np.exp(-((centres[None, :] - lat[:, 1:2]) ** 2) / (2 * sigma**2))  # (n, size) along rows
    return (lat[:, 2, None, None] * gy[:, :, None] * gx[:, None, :]).reshape(len(lat), size * size)


def _support(p: SlotRenderParams, cells: np.ndarray, n: int) -> np.ndarray:
    """The training mask of the chosen support."""
    if p.split == "orthogonal":
        if p.reference >= n:
            raise TaskParamError(("reference",), f"is {p.reference}, but a slot has values 0..{n - 1} (grid³)")
        return (cells[:, 0] == p.reference) | (cells[:, 1] == p.reference)
    if p.split == "diagonal":
        if p.delta >= p.grid - 1:
            raise TaskParamError(("delta",), f"is {p.delta}, which trains every cell of a grid of {p.grid}; use 0..{p.grid - 2}")
        f1 = np.stack(np.unravel_index(cells[:, 0], (p.grid,) * 3), axis=1)
        f2 = np.stack(np.unravel_index(cells[:, 1], (p.grid,) * 3), axis=1)
        return np.all(np.abs(f1 - f2) <= p.delta, axis=1)
    rng = np.random.default_rng(p.seed)
    n_train = round(p.train_fraction * len(cells))
    if not 0 < n_train < len(cells):
        raise TaskParamError(("train_fraction",), f"is {p.train_fraction}, which trains {n_train} of {len(cells)} cells")
    # Redraw until every slot value is trained in both slots: a held-out value never seen cannot be scored.
    for _ in range(_SPLIT_ATTEMPTS):
        train = np.zeros(len(cells), dtype=bool)
        train[rng.permutation(len(cells))[:n_train]] = True
        if all(len(np.unique(cells[train, c])) == n for c in range(2)):
            return train
    raise TaskParamError(
        ("train_fraction",), f"is {p.train_fraction}: no draw in {_SPLIT_ATTEMPTS} trains every slot value; train more cells"
    )


@register_family("slot_render", SlotRenderParams)
def build_slot_render(p: SlotRenderParams) -> TaskData:
    """Two-slot Gaussian-blob images (additive composition), K = size² outputs per cell."""
    from compbench.limits import check_task_bytes

    lat = slot_latents(p)
    n = len(lat)
    cells = grid((n, n))
    check_task_bytes("the task's target images", len(cells), (p.size, p.size), itemsize=8)
    blobs = render_blobs(lat, p.size, p.sigma)
    y = blobs[cells[:, 0]] + blobs[cells[:, 1]]
    train = _support(p, cells, n)
    labels = tuple(f"({x:.2f}, {yy:.2f}, {b:.2f})" for x, yy, b in lat)
    return TaskData(
        "slot_render", cells, y, train, (n, n), "regression", p.model_dump(), ("slot 1", "slot 2"),
        value_labels=(labels, labels), value_features=(lat.copy(), lat.copy()),
    )
