"""Encoding registry: name -> function rendering a task's cells as training and evaluation batches."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from compbench.encodings.batch import Batch
from compbench.encodings.onehot import onehot
from compbench.tasks import TaskData


class UnknownEncodingError(ValueError):
    """Raised for an encoding name that is not registered."""


@dataclass(frozen=True)
class Encoded:
    """A task rendered for models: what they train on and what they are evaluated on."""

    name: str
    train: Batch
    evaluate: Batch


Encoder = Callable[..., Encoded]
ENCODINGS: dict[str, Encoder] = {}


def register_encoding(name: str) -> Callable[[Encoder], Encoder]:
    """Decorator registering `encoder(task, **params) -> Encoded` under `name`."""

    def decorate(fn: Encoder) -> Encoder:
        ENCODINGS[name] = fn
        return fn

    return decorate


@register_encoding("onehot")
def encode_onehot(task: TaskData) -> Encoded:
    """Disentangled one-hot: one sample per cell; train on training cells, evaluate on all."""
    x = onehot(task.cells, task.n_values)
    ids = np.arange(len(task.cells))
    tr = task.train_mask
    train = Batch(x[tr], task.cells[tr], ids[tr], task.n_values, task.y[tr])
    evaluate = Batch(x, task.cells, ids, task.n_values, task.y)
    return Encoded("onehot", train, evaluate)


def encode(name: str, task: TaskData, **params: Any) -> Encoded:
    """Render a task with the named encoding."""
    if name not in ENCODINGS:
        close = difflib.get_close_matches(name, ENCODINGS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownEncodingError(f"unknown encoding {name!r}{hint} known: {', '.join(sorted(ENCODINGS))}")
    return ENCODINGS[name](task, **params)
