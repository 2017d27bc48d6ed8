"""The adapter protocol: how a model is trained on training cells and predicts every cell."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict


class AdapterParams(BaseModel):
    """Base class of adapter hyperparameters (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")


class InvalidModelError(ValueError):
    """A model's parameters are invalid for this task (e.g. a non-PSD kernel); sweeps may skip it."""


@dataclass(frozen=True)
class Batch:
    """Inputs of a set of cells: encoded `x` plus the integer conjunctions they encode."""

    x: np.ndarray
    cells: np.ndarray
    n_values: tuple[int, ...]

    def subset(self, mask: np.ndarray) -> Batch:
        """The cells selected by a boolean mask."""
        return Batch(self.x[mask], self.cells[mask], self.n_values)


@dataclass
class Fitted:
    """One trained model (one seed): predictions on every cell plus what theory needs."""

    predictions: np.ndarray
    initial_predictions: np.ndarray | None = None
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    kernel: np.ndarray | None = None  # a seed-specific kernel (e.g. empirical NTK at this init)


class Adapter:
    """Trains a model family on a task; subclasses set `Params` and implement `fit_seeds`."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[AdapterParams]] = AdapterParams
    deterministic: ClassVar[bool] = False

    def __init__(self, params: AdapterParams, device: str = "cpu") -> None:
        self.params = params
        self.device = device

    def fit_seeds(
        self, inputs: Batch, y: np.ndarray, train_mask: np.ndarray, seeds: list[int]
    ) -> list[Fitted]:
        """Train one model per seed on the training cells and predict every cell."""
        raise NotImplementedError

    def kernel(self, inputs: Batch) -> np.ndarray | None:
        """The model's kernel on all cells (n × n) for the theory engine, or None."""
        return None

    def theory_options(self) -> dict[str, Any]:
        """The kernel machine the model's training corresponds to: objective, ridge, C, ..."""
        return {"objective": "min_norm"}

    def theory_kernel_name(self) -> str:
        """A short description of the kernel used for theory (shown in records)."""
        return "none"
