"""Encoding registry (`compbench.encodings` entry points): name -> how a task's cells become model inputs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import BaseModel

from compbench.encodings.batch import Batch
from compbench.encodings.onehot import onehot
from compbench.registry import PluginError, Registry, UnknownNameError
from compbench.tasks import TaskData

ENTRY_POINT_GROUP = "compbench.encodings"
INPUT_KINDS = ("vector", "image")


class UnknownEncodingError(UnknownNameError):
    """Raised for an encoding name that is not registered."""


@dataclass(frozen=True)
class Encoded:
    """A task rendered for models: what they train on and what they are evaluated on."""

    name: str
    train: Batch
    evaluate: Batch


Encoder = Callable[..., Encoded]


@dataclass(frozen=True)
class EncodingSpec:
    """An encoding: its function, its parameter model (None: no parameters) and the input kind it produces."""

    name: str
    encode: Encoder
    params_model: type[BaseModel] | None
    produces: str
    doc: str


def encoding(params_model: type[BaseModel] | None = None, produces: str = "vector") -> Callable[[Encoder], Encoder]:
    """Decorator marking `encode(task, **params) -> Encoded` as an encoding (for entry points)."""
    if produces not in INPUT_KINDS:
        raise PluginError(f"an encoding produces one of {INPUT_KINDS}, got {produces!r}")

    def decorate(fn: Encoder) -> Encoder:
        fn.Params = params_model  # type: ignore[attr-defined]
        fn.produces = produces  # type: ignore[attr-defined]
        return fn

    return decorate


def _as_encoding(name: str, obj: object) -> EncodingSpec:
    if isinstance(obj, EncodingSpec):
        return EncodingSpec(name, obj.encode, obj.params_model, obj.produces, obj.doc)
    if not callable(obj):
        raise PluginError(f"encoding {name!r} is {obj!r}, not a function encode(task, **params) -> Encoded")
    params = getattr(obj, "Params", None)
    if params is not None and not (isinstance(params, type) and issubclass(params, BaseModel)):
        raise PluginError(f"encoding {name!r}: Params must be a pydantic model or None")
    produces = getattr(obj, "produces", "vector")
    if produces not in INPUT_KINDS:
        raise PluginError(f"encoding {name!r}: produces must be one of {INPUT_KINDS}, got {produces!r}")
    return EncodingSpec(name, obj, params, produces, (obj.__doc__ or "").strip())  # type: ignore[arg-type]


ENCODINGS: Registry[EncodingSpec] = Registry("encoding", ENTRY_POINT_GROUP, _as_encoding, UnknownEncodingError)


def register_encoding(
    name: str, params_model: type[BaseModel] | None = None, produces: str = "vector"
) -> Callable[[Encoder], Encoder]:
    """Decorator registering `encoder(task, **params) -> Encoded` under `name`."""

    def decorate(fn: Encoder) -> Encoder:
        ENCODINGS.add(name, encoding(params_model, produces)(fn))
        return fn

    return decorate


def get_encoding(name: str) -> EncodingSpec:
    """The encoding registered as `name`."""
    return ENCODINGS.get(name)


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
    """Render a task with the named encoding (its parameters validated by the encoding's model)."""
    spec = get_encoding(name)
    if spec.params_model is None and params:
        raise ValueError(f"encoding {name!r} takes no parameters, got {sorted(params)}")
    out = spec.encode(task, **params)
    if not isinstance(out, Encoded):
        raise PluginError(f"encoding {name!r} ({ENCODINGS.entry(name).source}) returned {type(out).__name__}, not Encoded")
    return out
