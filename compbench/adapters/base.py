"""The adapter protocol: how a model is trained on training cells and predicts every cell."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel, ConfigDict

from compbench.encodings.batch import Batch


class AdapterParams(BaseModel):
    """Base class of adapter hyperparameters (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")


class InvalidModelError(ValueError):
    """A model's parameters are invalid for this task (e.g. a non-PSD kernel); sweeps may skip it."""


@dataclass
class Fitted:
    """One trained model (one seed): predictions on the evaluation samples plus what theory needs."""

    predictions: np.ndarray
    initial_train: np.ndarray | None = None  # f_0 on the training samples (lazy-limit theory)
    initial_eval: np.ndarray | None = None  # f_0 on the evaluation samples
    info: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    # Seed-specific theory kernels (e.g. the empirical NTK at this init): (K_train,train, K_eval,train).
    kernels: tuple[np.ndarray, np.ndarray] | None = None
    # Set only when the adapter's own fit *is* the theory engine's solver (kernel SVM/SVR), so the
    # runner need not solve the same problem twice.
    theory_predictions: np.ndarray | None = None


class Adapter:
    """Trains a model family on a task; subclasses set `Params` and implement `fit_seeds`."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[AdapterParams]] = AdapterParams
    deterministic: ClassVar[bool] = False

    def __init__(self, params: AdapterParams, device: str = "cpu") -> None:
        self.params = params
        self.device = device

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Train one model per seed on `train` (x, y) and predict every sample of `evaluate`."""
        raise NotImplementedError

    def kernel(self, a: Batch, b: Batch) -> np.ndarray | None:
        """The model's kernel between two batches (len(a) × len(b)) for the theory engine, or None."""
        return None

    def theory_options(self) -> dict[str, Any]:
        """The kernel machine the model's training corresponds to: objective, ridge, C, ..."""
        return {"objective": "min_norm"}

    def theory_kernel_name(self) -> str:
        """A short description of the kernel used for theory (shown in records)."""
        return "none"
