"""The adapter protocol: how a model is trained on training cells and predicts every cell."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from compbench.encodings.batch import Batch
from compbench.errors import CompbenchError
from compbench.params import StrictParams
from compbench.theory.options import TheoryOptions, TheoryOptionsError


class AdapterParams(StrictParams):
    """Base class of adapter hyperparameters (unknown keys are errors; a boolean is not a number)."""


class InvalidModelError(CompbenchError, ValueError):
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
    # The trained model's representation, (Φ_train, Φ_eval): its penultimate features on the training and
    # evaluation samples (n × d each), for the linear probe (compbench.theory.probe); None: it has none (a kernel).
    features: tuple[np.ndarray, np.ndarray] | None = None
    # k(x, x) of the theory kernel on each evaluation sample (averaged over outputs), for the nearest-training-sample
    # similarity (compbench.theory.similarity); None: the runner asks `Adapter.kernel`, if the model has one.
    kernel_diagonal: np.ndarray | None = None


@dataclass(frozen=True)
class ContractBreak:
    """One way an adapter's output breaks the adapter contract: a stable name and a message."""

    name: str  # e.g. "predictions-length"; the conformance kit reports these
    message: str

    def __str__(self) -> str:
        return self.message


def _array_problems(value: Any, what: str, code: str, shape: tuple[int, ...]) -> list[ContractBreak]:
    """Problems of one array output: real numeric dtype, the expected shape, finite values."""
    try:
        arr = np.asarray(value)
    except Exception as exc:  # noqa: BLE001 — e.g. a CUDA tensor or a ragged list
        return [ContractBreak(f"{code}-dtype", f"{what} is not an array ({type(value).__name__}: {exc})")]
    if arr.dtype.kind not in "iuf":
        return [ContractBreak(f"{code}-dtype", f"{what} must be a real float array, got dtype {arr.dtype}")]
    if arr.ndim != len(shape):
        return [ContractBreak(f"{code}-shape", f"{what} must have shape {shape}, got shape {arr.shape}")]
    if arr.shape != shape:
        name = f"{code}-length" if len(shape) == 1 else f"{code}-shape"
        return [ContractBreak(name, f"{what} must have shape {shape}, got shape {arr.shape}")]
    bad = int(arr.size - np.count_nonzero(np.isfinite(arr)))
    if bad:
        unit = "samples" if len(shape) == 1 else "entries"
        return [ContractBreak(f"{code}-finite", f"non-finite {what} for {bad} of {arr.size} {unit}")]
    return []


def plain_info(info: Any) -> dict[str, Any]:
    """`Fitted.info` as plain JSON data (numpy scalars and arrays become Python values).

    Raises ValueError naming the offending key for anything else (bytes, arbitrary objects,
    non-str keys), so a record never holds what the store cannot write back.
    """
    if not isinstance(info, dict):
        raise ValueError(f"info must be a dict, got {type(info).__name__}")

    def plain(value: Any, where: str) -> Any:
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, (np.bool_, np.integer, np.floating)):
            return value.item()
        if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            return value.tolist()
        if isinstance(value, (list, tuple)):
            return [plain(v, f"{where}[{i}]") for i, v in enumerate(value)]
        if isinstance(value, dict):
            for k in value:
                if not isinstance(k, str):
                    raise ValueError(f"info[{where!r}] has a key that is not a str: {k!r}")
            return {k: plain(v, f"{where}.{k}") for k, v in value.items()}
        raise ValueError(f"info[{where!r}] is not JSON data (a str, number, bool, None, list or dict): got {type(value).__name__}")

    for key in info:
        if not isinstance(key, str):
            raise ValueError(f"info has a key that is not a str: {key!r}")
    return {k: plain(v, k) for k, v in info.items()}


def check_fitted(fitted: Any, n_train: int, n_eval: int, n_outputs: int | None = None) -> list[ContractBreak]:
    """Every way one seed's `Fitted` breaks the contract for a task of n_train / n_eval samples.

    `n_outputs` None: a scalar task (predictions (n,)); else predictions are (n, n_outputs).
    """
    if not isinstance(fitted, Fitted):
        return [ContractBreak("fitted-type", f"fit_seeds must return Fitted objects, got {type(fitted).__name__}")]
    problems: list[ContractBreak] = []
    if fitted.error is not None and not isinstance(fitted.error, str):
        problems.append(ContractBreak("error-type", f"error must be a str or None, got {type(fitted.error).__name__}"))
    try:
        plain_info(fitted.info)
    except ValueError as exc:
        problems.append(ContractBreak("info-serialisable", str(exc)))
    if fitted.error is not None:  # a failed seed's predictions may be anything (e.g. NaN after divergence)
        return problems
    tail = () if n_outputs is None else (n_outputs,)
    problems += _array_problems(fitted.predictions, "predictions", "predictions", (n_eval, *tail))
    if (fitted.initial_train is None) != (fitted.initial_eval is None):
        problems.append(ContractBreak("f0-pair", "initial_train and initial_eval (f0) must be given together"))
    if fitted.initial_train is not None:
        problems += _array_problems(fitted.initial_train, "initial_train (f0)", "f0", (n_train, *tail))
    if fitted.initial_eval is not None:
        problems += _array_problems(fitted.initial_eval, "initial_eval (f0)", "f0", (n_eval, *tail))
    if fitted.kernels is not None:
        problems += check_kernels(fitted.kernels, n_train, n_eval, n_outputs)
    if fitted.theory_predictions is not None:
        problems += _array_problems(fitted.theory_predictions, "theory_predictions", "theory", (n_eval, *tail))
    if fitted.features is not None:
        problems += _feature_problems(fitted.features, n_train, n_eval)
    if fitted.kernel_diagonal is not None:
        problems += _array_problems(fitted.kernel_diagonal, "kernel_diagonal", "kernel-diagonal", (n_eval,))
    return problems


def _feature_problems(features: Any, n_train: int, n_eval: int) -> list[ContractBreak]:
    """Problems of a (Φ_train, Φ_eval) pair: finite float arrays of n_train and n_eval rows of the same width."""
    if not isinstance(features, (tuple, list)) or len(features) != 2:
        return [ContractBreak("features-shape", f"features must be a pair (Φ_train, Φ_eval), got {type(features).__name__}")]
    width = int(np.shape(features[0])[1]) if np.ndim(features[0]) == 2 else 0
    return _array_problems(features[0], "features Φ_train", "features", (n_train, max(1, width))) + _array_problems(
        features[1], "features Φ_eval", "features", (n_eval, max(1, width)))


def check_kernels(kernels: Any, n_train: int, n_eval: int, n_outputs: int | None = None) -> list[ContractBreak]:
    """Problems of a (K_train,train, K_eval,train) pair: finite float arrays of the right shapes.

    With K outputs the pair is either shared by the outputs ((n_tr, n_tr), (n_ev, n_tr)) or the
    full kernel ((n_tr·K, n_tr·K), (n_ev·K, n_tr·K)), sample-major.
    """
    if not isinstance(kernels, (tuple, list)) or len(kernels) != 2:
        return [ContractBreak("kernel-shape", f"kernels must be a pair (K_train,train, K_eval,train), got {type(kernels).__name__}")]
    k = 1
    if n_outputs and n_outputs > 1 and np.shape(kernels[0]) == (n_train * n_outputs, n_train * n_outputs):
        k = n_outputs
    return _array_problems(kernels[0], "K_train,train", "kernel", (n_train * k, n_train * k)) + _array_problems(
        kernels[1], "K_eval,train", "kernel", (n_eval * k, n_train * k)
    )


def kernel_outputs(kernels: tuple[np.ndarray, np.ndarray], n_train: int) -> int:
    """1 for an output-shared kernel pair, K for a full (n·K × n·K) one."""
    return int(np.shape(kernels[0])[0]) // max(1, n_train)


def theory_options_of(adapter: Adapter, name: str) -> TheoryOptions:
    """The adapter's `theory_options()` typed: the one place a plain dict (a file model's, a third party's) is converted.

    Raises TheoryOptionsError, one line naming the adapter and every bad key or value.
    """
    try:
        return TheoryOptions.of(adapter.theory_options())
    except TheoryOptionsError as exc:
        raise TheoryOptionsError(exc.problems, adapter=name) from None


class Adapter:
    """Trains a model family on a task; subclasses set `Params` and implement `fit_seeds`."""

    name: ClassVar[str] = ""
    Params: ClassVar[type[AdapterParams]] = AdapterParams
    deterministic: ClassVar[bool] = False
    # What the adapter can train on: "vector" (flat features, e.g. one-hot), "image" (channels, H, W),
    # "sequence" ((length, features) with a mask, possibly streamed: Batch.mask, Batch.stream); the
    # default leaves sequences out.
    inputs: ClassVar[tuple[str, ...]] = ("vector", "image")
    # Labels an expectation can select models by (`models: ["@networks"]`), with the suite's own tags.
    tags: ClassVar[tuple[str, ...]] = ()

    def __init__(self, params: AdapterParams, device: str = "cpu") -> None:
        self.params = params
        self.device = device

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Train one model per seed on `train` (x, y) and predict every sample of `evaluate`."""
        raise NotImplementedError

    def kernel(self, a: Batch, b: Batch) -> np.ndarray | None:
        """The model's kernel between two batches (len(a) × len(b)) for the theory engine, or None."""
        return None

    def init_kernel(self, a: Batch, b: Batch) -> np.ndarray | None:
        """The covariance over seeds of the untrained model's output between two batches (its NNGP), or None.

        With `kernel()` it gives the seed-to-seed spread a lazy model's theory predicts
        (compbench.theory.seed_variance); None where the model has no closed form (or no random f₀).
        """
        return None

    def theory_options(self) -> TheoryOptions | Mapping[str, Any]:
        """The kernel machine the model's training corresponds to (a plain dict of the same keys is read as one)."""
        return TheoryOptions()

    def theory_kernel_name(self) -> str:
        """A short description of the kernel used for theory (shown in records)."""
        return "none"
