"""Image encodings: every component value is an image class; a cell is rendered from sampled images.

As in the reference code (REFERENCE.md §2.2): component c maps value v to class perm_c[v], a
random permutation of the source's classes per component (seeded by `seed`; `permutation: false`
maps v to the v-th class). Per class the images are shuffled once and split into a **training
pool** (the first `train_images_per_class`) and a disjoint **held-out pool** (the rest).
TRAIN samples exist for training cells only and draw their images from the training pool;
EVALUATE samples exist for every cell and draw from the held-out pool, so every evaluated image
is new. Each sample draws one image per component uniformly with replacement from its pool.

Layouts (canvas width W + (C − 1)·distance, image c at column offset c·distance, empty space
holding the background value of a raw 0 pixel):
- `side_by_side` (default distance W): one image plane; overlapping pixels (distance < W) merge
  by the pixelwise maximum, as the reference's `separate_channels: false`.
- `channels` (default distance 0): each component in its own channel group, as the reference's
  `separate_channels: true` (which pads with edge values instead of the background).
- `paper` (default distance W): the reference's own composition (its `image_categories.py`): image c
  is padded left by c·distance and right by (C − 1 − c)·distance with its edge values, and the
  padded images are stacked as channels (component c in channel group c; `separate_channels: true`,
  every image config of the paper) or merged by the pixelwise maximum (`separate_channels: false`).

Everything is fixed by `seed`: an integer gives every model seed the same draw and value → class
map; `seed: model` gives each model seed its own, drawn with the model's seed, as the reference does
(its `seed` drives the permutation, the image draw and the initialisation alike). The runner
substitutes the model seed (`follows_model_seed`), so such a task is encoded once per seed.
`Batch.x` is float32 (samples, channels, H, width).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, ValidationError, ValidationInfo, field_validator

from compbench.encodings.batch import Batch
from compbench.encodings.image_sources import SHAPES, SOURCES, DataSourceError, ImageSet, download_dir, load_source
from compbench.encodings.registry import MODEL_SEED, Encoded, register_encoding
from compbench.params import StrictParams
from compbench.tasks import TaskData

__all__ = ["ImageEncodingParams", "encode_images", "render"]


class ImageEncodingParams(StrictParams):
    """Parameters of the image encodings (`digits`, `images`); unknown keys are errors, a boolean is not a number."""

    source: Literal["digits", "mnist-5k", "mnist", "cifar10"] = "digits"
    root: str | None = Field(default=None, description="mnist/cifar10: directory holding torchvision's files")
    download: bool = Field(default=False, description="mnist/cifar10: let torchvision download into root, which must then "
                           "lie in the data cache ($COMPBENCH_DATA, else ~/.cache/compbench/data; a relative root is taken from there)")
    samples_per_cell: int = Field(default=4, ge=1, description="training samples per training cell")
    eval_samples_per_cell: int | None = Field(default=None, ge=1, description="evaluation samples per cell (default: samples_per_cell)")
    layout: Literal["side_by_side", "channels", "paper"] = "side_by_side"
    distance: int | None = Field(default=None, ge=0, description="column offset between components (default: W side by side "
                                 "and paper, 0 as channels)")
    separate_channels: bool = Field(default=True, description="layout paper: components in separate channels (else merged "
                                    "by the pixelwise maximum), the reference's separate_channels")
    train_images_per_class: int | None = Field(default=None, ge=1, description="training pool size per class (default: min(200, half the smallest class))")
    permutation: bool = Field(default=True, description="random value → class map per component (else value v → v-th class)")
    seed: int | Literal["model"] = Field(default=0, description="the draw's seed: an integer (every model seed shares "
                                         "one draw) or `model` (each model seed draws its own, as the paper)")

    @field_validator("separate_channels")
    @classmethod
    def _separate_only_in_paper_layout(cls, separate: bool, info: ValidationInfo) -> bool:
        if not separate and info.data.get("layout") != "paper":
            raise ValueError("separate_channels: false is the paper layout's option (layout: paper); "
                             "layout side_by_side already merges the components into one image")
        return separate

    @field_validator("download")
    @classmethod
    def _downloads_only_into_the_cache(cls, download: bool, info: ValidationInfo) -> bool:
        # Checked when the suite is validated, so a root outside the cache is refused before anything runs.
        if download and info.data.get("source") in ("mnist", "cifar10") and info.data.get("root") is not None:
            try:
                download_dir(info.data["root"])
            except DataSourceError as exc:
                raise ValueError(str(exc)) from None
        return download


    def input_images(self, task: TaskData) -> tuple[int, tuple[int, ...]]:
        """(images, shape of one) this encoding renders for `task` (training and evaluation samples), as `render` lays them out."""
        ch, h, w = SHAPES[self.source]
        n_comp = len(task.n_values)
        d = _distance(self.layout, w, self.distance)
        channels = ch * n_comp if _separate(self.layout, self.separate_channels) else ch
        n_train = int(task.train_mask.sum()) * self.samples_per_cell
        n_eval = len(task.cells) * (self.eval_samples_per_cell or self.samples_per_cell)
        return n_train + n_eval, (channels, h, w + (n_comp - 1) * d)


def _parse(encoding: str, params: dict[str, Any]) -> ImageEncodingParams:
    unknown = sorted(set(params) - set(ImageEncodingParams.model_fields))
    if unknown:
        known = ", ".join(ImageEncodingParams.model_fields)
        raise ValueError(f"unknown parameter(s) {', '.join(map(repr, unknown))} for encoding {encoding!r}; known: {known}")
    try:
        return ImageEncodingParams.model_validate(params)
    except ValidationError as exc:
        msgs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"invalid parameters for encoding {encoding!r}: {msgs}") from None


def _pools(data: ImageSet, classes: np.ndarray, per_class: int | None, seed: int) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
    counts = {int(k): int(np.sum(data.labels == k)) for k in classes}
    smallest = min(counts.values())
    n_train = per_class if per_class is not None else min(200, smallest // 2)
    if smallest < 2:  # both pools need an image of every class
        small = min(counts, key=counts.get)
        raise ValueError(
            f"image class {small} of {data.name!r} has {smallest} image(s): the training and held-out pools need ≥ 1 each"
        )
    if n_train >= smallest:
        raise ValueError(
            f"train_images_per_class={n_train} leaves no held-out images: the smallest class of {data.name!r} has {smallest}"
        )
    rng = np.random.default_rng([seed, 1])
    train, held = {}, {}
    for k in classes:
        idx = rng.permutation(np.flatnonzero(data.labels == k))
        train[int(k)], held[int(k)] = idx[:n_train], idx[n_train:]
    return train, held


def _draw(cells: np.ndarray, maps: list[np.ndarray], pools: dict[int, np.ndarray], rng: np.random.Generator) -> np.ndarray:
    """Image indices (rows, C): one per component, uniform with replacement from its class's pool."""
    out = np.empty(cells.shape, dtype=np.int64)
    for c in range(cells.shape[1]):
        cls = maps[c][cells[:, c]]
        for k in np.unique(cls):
            rows = np.flatnonzero(cls == k)
            pool = pools[int(k)]
            out[rows, c] = pool[rng.integers(0, len(pool), size=len(rows))]
    return out


def _distance(layout: str, w: int, distance: int | None) -> int:
    return (0 if layout == "channels" else w) if distance is None else distance


def _separate(layout: str, separate_channels: bool) -> bool:
    return layout == "channels" or (layout == "paper" and separate_channels)


def render(data: ImageSet, index: np.ndarray, layout: str, distance: int | None, separate_channels: bool = True) -> np.ndarray:
    """Compose the images `index` (rows, C) into (rows, channels, H, width) float32."""
    rows, n_comp = index.shape
    ch, h, w = data.shape
    d = _distance(layout, w, distance)
    width = w + (n_comp - 1) * d
    imgs = data.images(index)  # (rows, C, ch, h, w)
    if layout == "paper":
        # The reference pads each image with its own edge values (torchvision Pad, padding_mode='edge').
        padded = [np.pad(imgs[:, c], ((0, 0), (0, 0), (0, 0), (c * d, (n_comp - 1 - c) * d)), mode="edge")
                  for c in range(n_comp)]
        if separate_channels:
            return np.ascontiguousarray(np.concatenate(padded, axis=1), dtype=np.float32)
        return np.maximum.reduce(padded).astype(np.float32, copy=False)
    bg = data.background().reshape(1, ch, 1, 1)
    if layout == "side_by_side":
        canvas = np.broadcast_to(bg, (rows, ch, h, width)).copy()
        for c in range(n_comp):  # the background is the smallest value, so max() places non-overlapping images exactly
            sl = canvas[..., c * d : c * d + w]
            np.maximum(sl, imgs[:, c], out=sl)
        return canvas
    canvas = np.broadcast_to(np.tile(bg, (1, n_comp, 1, 1)), (rows, n_comp * ch, h, width)).copy()
    for c in range(n_comp):
        canvas[:, c * ch : (c + 1) * ch, :, c * d : c * d + w] = imgs[:, c]
    return canvas


def encode_images(task: TaskData, *, encoding: str = "images", **params: Any) -> Encoded:
    """Render a task's cells as images (see the module docstring)."""
    p = _parse(encoding, params)
    if p.seed == MODEL_SEED:
        raise ValueError(f"encoding {encoding!r}: seed: model draws with each model's seed, which only a run knows; "
                         "give an integer seed to encode outside a run")
    if task.samples is not None:
        raise ValueError(f"encoding {encoding!r} renders cells with one target each; function-valued cells need a vector encoding (onehot, khot, coordinates)")
    if p.source not in SOURCES:  # pragma: no cover - guarded by the Literal
        raise DataSourceError(f"unknown image source {p.source!r}")
    data = load_source(p.source, p.root, p.download)
    classes = data.classes
    too_many = [(c, n) for c, n in enumerate(task.n_values) if n > len(classes)]
    if too_many:
        c, n = too_many[0]
        raise ValueError(
            f"encoding {encoding!r}: component {c} has {n} values but source {p.source!r} has only {len(classes)} image classes"
        )
    perm_rng = np.random.default_rng([p.seed, 0])
    maps = [perm_rng.permutation(classes) if p.permutation else classes.copy() for _ in task.n_values]
    train_pool, held_pool = _pools(data, classes, p.train_images_per_class, p.seed)

    ids = np.arange(len(task.cells))
    tr_ids = np.repeat(ids[task.train_mask], p.samples_per_cell)
    ev_ids = np.repeat(ids, p.eval_samples_per_cell or p.samples_per_cell)
    tr_index = _draw(task.cells[tr_ids], maps, train_pool, np.random.default_rng([p.seed, 2]))
    ev_index = _draw(task.cells[ev_ids], maps, held_pool, np.random.default_rng([p.seed, 3]))
    train = Batch(render(data, tr_index, p.layout, p.distance, p.separate_channels), task.cells[tr_ids], tr_ids, task.n_values, task.y[tr_ids], task.n_classes)
    evaluate = Batch(render(data, ev_index, p.layout, p.distance, p.separate_channels), task.cells[ev_ids], ev_ids, task.n_values, task.y[ev_ids], task.n_classes)
    return Encoded(encoding, train, evaluate)


@register_encoding("images", ImageEncodingParams, produces="image")
def encode_images_any(task: TaskData, **params: Any) -> Encoded:
    """Images from any source (`source: digits|mnist-5k|mnist|cifar10`, default digits)."""
    return encode_images(task, encoding="images", **params)


@register_encoding("digits", ImageEncodingParams, produces="image")
def encode_digits(task: TaskData, **params: Any) -> Encoded:
    """Digit images (default source: scikit-learn's bundled 8×8 digits); same parameters as `images`."""
    return encode_images(task, encoding="digits", **params)

