"""The `sprites` encoding: each cell of a `sprites` task rendered as one grey image (compbench/tasks/sprites.py).

One sample per cell (the image is a function of the cell): training samples are the training
cells' images, evaluation samples every cell's. `Batch.x` is float32 (samples, 1, size, size),
pixels in [0, 1] (the fraction of each pixel's supersample² points inside the sprite), optionally
centred and scaled by the training images' mean and standard deviation (`normalize`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from compbench.encodings.batch import Batch
from compbench.encodings.registry import Encoded, register_encoding
from compbench.params import StrictParams
from compbench.tasks import TaskData


class SpriteEncodingParams(StrictParams):
    """Image size and supersampling of the `sprites` encoding."""

    size: int = Field(default=32, ge=4, le=256, description="images are size × size pixels (dSprites: 64)")
    supersample: int = Field(default=4, ge=1, le=16, description="subsamples per pixel side (anti-aliasing)")
    normalize: bool = Field(default=False, description="centre and scale pixels by the training images' mean and sd")

    def input_images(self, task: TaskData) -> tuple[int, tuple[int, ...]]:
        """(images, shape of one) this encoding renders for `task`: every cell's, and the training cells' copy."""
        return len(task.cells) + int(task.train_mask.sum()), (1, self.size, self.size)


@register_encoding("sprites", SpriteEncodingParams, produces="image")
def encode_sprites(task: TaskData, **params: Any) -> Encoded:
    """Each cell of a `sprites` task as one rendered image (size × size, supersampled)."""
    from compbench.tasks.sprites import cell_images

    p = SpriteEncodingParams.model_validate(params)
    if task.family != "sprites":
        raise ValueError(f"encoding 'sprites' renders the cells of a 'sprites' task; {task.family!r} has no sprite factors")
    x = cell_images(task, p.size, p.supersample)[:, None]
    if p.normalize:
        tr = x[task.train_mask]
        x = ((x - tr.mean()) / max(float(tr.std()), 1e-12)).astype(np.float32)
    ids = np.arange(len(task.cells))
    tr_mask = task.train_mask
    train = Batch(x[tr_mask], task.cells[tr_mask], ids[tr_mask], task.n_values, task.y[tr_mask], task.n_classes)
    evaluate = Batch(x, task.cells, ids, task.n_values, task.y, task.n_classes)
    return Encoded("sprites", train, evaluate)
