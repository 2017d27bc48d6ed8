"""Encoding registry (`compbench.encodings` entry points): name -> how a task's cells become model inputs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, Field

from compbench.encodings.batch import Batch
from compbench.encodings.onehot import onehot
from compbench.params import StrictParams
from compbench.registry import PluginError, Registry, UnknownNameError
from compbench.tasks import TaskData

ENTRY_POINT_GROUP = "compbench.encodings"
INPUT_KINDS = ("vector", "image", "sequence")


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


def encode_cells(name: str, task: TaskData, x_cells: np.ndarray, samples: str = "concat") -> Encoded:
    """Batches from one input row per cell (`x_cells`, n_cells × d).

    Cells with one target: one sample per cell; train on training cells, evaluate on all.
    Function-valued cells (`task.samples`): each sample's input is its cell's row followed by its
    own x (`samples="concat"`), or its cell's row plus its x (`"add"`: x is an offset inside the
    cell, so the model sees a point of a continuous input space and never the cell itself);
    training samples as the task drew them, and every cell evaluated at the shared x_eval.
    """
    ids = np.arange(len(task.cells))
    x_cells = np.asarray(x_cells, dtype=np.float64)
    s = task.samples
    if s is None:
        if task.iid:
            raise ValueError(
                f"encoding {name!r} renders each cell as one fixed input, so an iid control (trained on every cell, "
                "scored on new samples of them) would be scored on its training inputs; use an encoding that draws "
                "new samples (e.g. digits or images)"
            )
        tr = task.train_mask
        train = Batch(x_cells[tr], task.cells[tr], ids[tr], task.n_values, task.y[tr], task.n_classes)
        evaluate = Batch(x_cells, task.cells, ids, task.n_values, task.y, task.n_classes)
        return Encoded(name, train, evaluate)
    m = s.n_eval
    tr_ids = np.asarray(s.train_cells, dtype=np.int64)
    ev_ids = np.repeat(ids, m)
    own_tr = np.asarray(s.x_train, dtype=np.float64)
    own_ev = np.tile(np.asarray(s.x_eval, dtype=np.float64), (len(ids), 1))
    if samples == "add":
        if own_tr.shape[1] != x_cells.shape[1]:
            raise ValueError(
                f"encoding {name!r} with samples: add adds each sample's x ({own_tr.shape[1]} inputs) to its cell's "
                f"{x_cells.shape[1]} inputs, so the two must have the same width; use samples: concat"
            )
        x_tr, x_ev = x_cells[tr_ids] + own_tr, x_cells[ev_ids] + own_ev
    else:
        x_tr = np.concatenate([x_cells[tr_ids], own_tr], axis=1)
        x_ev = np.concatenate([x_cells[ev_ids], own_ev], axis=1)
    y_ev = np.asarray(s.y_eval).reshape(len(ids) * m, *np.shape(s.y_eval)[2:])
    train = Batch(x_tr, task.cells[tr_ids], tr_ids, task.n_values, np.asarray(s.y_train), task.n_classes)
    evaluate = Batch(x_ev, task.cells[ev_ids], ev_ids, task.n_values, y_ev, task.n_classes)
    return Encoded(name, train, evaluate)


@register_encoding("onehot")
def encode_onehot(task: TaskData) -> Encoded:
    """Disentangled one-hot: one block per component (followed by x for function-valued cells)."""
    return encode_cells("onehot", task, onehot(task.cells, task.n_values))


@register_encoding("khot")
def encode_khot(task: TaskData) -> Encoded:
    """k-hot: one 0/1 unit per component (a module on or off), for cells that are sets of components."""
    wide = [c for c, n in enumerate(task.n_values) if n != 2]
    if wide:
        raise ValueError(f"encoding 'khot' needs components with exactly 2 values (off/on); component {wide[0]} has {task.n_values[wide[0]]}")
    return encode_cells("khot", task, task.cells.astype(np.float64))


@register_encoding("latents")
def encode_latents(task: TaskData) -> Encoded:
    """Each component's value as its continuous features (`TaskData.value_features`), concatenated."""
    if task.value_features is None:
        raise ValueError(f"encoding 'latents' needs a task that gives its values continuous features (value_features); {task.family!r} does not")
    x = np.concatenate([np.asarray(f, dtype=np.float64)[task.cells[:, c]] for c, f in enumerate(task.value_features)], axis=1)
    return encode_cells("latents", task, x)


class CoordinateParams(StrictParams):
    """Parameters of the `coordinates` encoding."""

    normalize: bool = True  # value v of n as v/(n−1) in [0, 1] (else the raw index)
    samples: Literal["concat", "add"] = Field(
        default="concat",
        description="function-valued cells: each sample's x after the coordinates (concat), or added to them "
        "(add: x is an offset inside the cell, e.g. the quadrants toy's X = Y − U)",
    )


@register_encoding("coordinates", CoordinateParams)
def encode_coordinates(task: TaskData, **params: Any) -> Encoded:
    """Scalar coordinates: each component's value as one number (v/(n−1) when normalized)."""
    p = CoordinateParams.model_validate(params)
    x = task.cells.astype(np.float64)
    if p.normalize:
        x = x / np.maximum(np.asarray(task.n_values, dtype=np.float64) - 1, 1)
    return encode_cells("coordinates", task, x, samples=p.samples)


MODEL_SEED = "model"  # an encoding's `seed: model`: drawn with each model seed, not once for all seeds


def follows_model_seed(params: dict[str, Any]) -> bool:
    """Whether encoding parameters ask for a draw per model seed (`seed: model`): the runner then encodes per seed."""
    return params.get("seed") == MODEL_SEED


def encode_for_seed(name: str, task: TaskData, model_seed: int, params: dict[str, Any]) -> Encoded:
    """Render a task for one model seed: `seed: model` becomes that seed; other parameters as `encode` takes them."""
    return encode(name, task, **({**params, "seed": model_seed} if follows_model_seed(params) else params))


def encode(name: str, task: TaskData, **params: Any) -> Encoded:
    """Render a task with the named encoding (its parameters validated by the encoding's model)."""
    spec = get_encoding(name)
    if spec.params_model is None and params:
        raise ValueError(f"encoding {name!r} takes no parameters, got {sorted(params)}")
    out = spec.encode(task, **params)
    if not isinstance(out, Encoded):
        raise PluginError(f"encoding {name!r} ({ENCODINGS.entry(name).source}) returned {type(out).__name__}, not Encoded")
    return out
