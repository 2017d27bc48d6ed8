"""Shared fit of the adapters whose seeds train as one `ModuleStack` (hypernet, slot_decoder)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import Field

from compbench.adapters.base import Adapter, AdapterParams, Batch, Fitted
from compbench.theory.options import TheoryOptions

if TYPE_CHECKING:
    import torch


# The training and theory settings `fit_module_stack` reads, each with its bounds and meaning said once:
# an adapter's Params declares them again with its own defaults (`lr: LearningRate = 3e-3`).
InitScale = Annotated[float, Field(gt=0, description="σ multiplying every layer's init (each drawn as one `mlp` layer)")]
LearningRate = Annotated[float, Field(gt=0, description="Adam learning rate")]
Steps = Annotated[int, Field(ge=1, description="optimizer steps")]
BatchSize = Annotated[int | None, Field(ge=1, description="minibatch size (None: full batch)")]
Theory = Annotated[Literal["empirical", "none"], Field(description="each seed's empirical NTK at init with f_0, or no theory prediction")]


class StackedModuleParams(AdapterParams):
    """Settings every stacked-module adapter has; the training ones have no default here: each adapter gives its own."""

    ntk_max_memory: int = Field(default=1 << 30, ge=1 << 20, description="bytes the NTK computation may hold at once")
    dtype: Literal["float32", "float64"] = "float32"
    init_scale: InitScale
    lr: LearningRate
    steps: Steps
    batch_size: BatchSize
    theory: Theory


class StackedModuleAdapter(Adapter):
    """Base: one module per seed (built by `member_builder`, initialised by its `init_(seed, σ)`),
    trained together and scored against each seed's empirical NTK at init by `fit_module_stack`.

    Params: a StackedModuleParams with a default for each of its training settings.
    """

    params: StackedModuleParams
    inputs = ("vector",)
    tags = ("networks",)

    def member_builder(self, train: Batch, evaluate: Batch) -> tuple[Callable[[], torch.nn.Module], dict[str, Any]]:
        """A function building one seed's module for these inputs (before its init), and info for every seed's record."""
        raise NotImplementedError

    def ntk_outputs(self) -> str:
        """Which eNTK a K-output module's theory takes: 'trace' or 'full'."""
        return "trace"

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Train one module per seed (stacked) and predict `evaluate`; eNTK and f_0 per seed."""
        import torch

        p = self.params
        dtype = torch.float64 if p.dtype == "float64" else torch.float32
        x_tr, x_ev, y_tr = stack_inputs(train, evaluate, dtype, self.device)  # first: the builders may take the inputs' shapes as checked
        build, info = self.member_builder(train, evaluate)
        members = []
        for s in seeds:
            m = build().to(dtype=dtype)
            m.init_(s, p.init_scale)  # drawn in float64, rounded once to the network's dtype
            members.append(m.to(device=self.device))
        return fit_module_stack(members, x_tr, x_ev, y_tr, list(seeds), p, ntk_outputs=self.ntk_outputs(),
                                vector_output=train.vector_output, info=info)

    def theory_kernel_name(self) -> str:
        """'empirical_ntk' (output-averaged with K outputs), 'empirical_ntk_full' (the full K-output kernel), or 'none'."""
        if self.params.theory == "none":
            return "none"
        return "empirical_ntk_full" if self.ntk_outputs() == "full" else "empirical_ntk"

    def theory_options(self) -> TheoryOptions:
        """MSE training from f_0: min-norm kernel regression on the eNTK."""
        return TheoryOptions("min_norm")


def stack_inputs(train: Batch, evaluate: Batch, dtype: torch.dtype, device: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flat training inputs, evaluation inputs and regression targets (one-hot rows for classes) as tensors."""
    import torch

    if evaluate.x.shape[1:] != train.x.shape[1:]:
        raise ValueError(f"evaluation inputs {evaluate.x.shape[1:]} differ from training inputs {train.x.shape[1:]}")
    x_tr = torch.as_tensor(train.x.reshape(len(train), -1), dtype=dtype, device=device)
    x_ev = torch.as_tensor(evaluate.x.reshape(len(evaluate), -1), dtype=dtype, device=device)
    y_tr = torch.as_tensor(train.regression_targets(), dtype=dtype, device=device)
    return x_tr, x_ev, y_tr


def fit_module_stack(
    members: list[torch.nn.Module],
    x_tr: torch.Tensor,
    x_ev: torch.Tensor,
    y_tr: torch.Tensor,
    seeds: list[int],
    p: StackedModuleParams,
    *,
    ntk_outputs: str,
    vector_output: bool,
    info: dict[str, Any] | None = None,
) -> list[Fitted]:
    """f_0, each seed's empirical NTK at init (`p.theory`), stacked Adam training and one Fitted per seed.

    `p` carries theory, ntk_max_memory, lr, steps and batch_size; `info` is added to every seed's info.
    """
    from compbench.training.stacked_modules import ModuleStack, train_module_stack

    stack = ModuleStack(members)
    f0_tr = stack.predict(x_tr).double().cpu().numpy()
    f0_ev = stack.predict(x_ev).double().cpu().numpy()
    kernels: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(seeds)
    ntk_seconds = [0.0] * len(seeds)
    if p.theory == "empirical":
        from compbench.theory import empirical_ntk

        for i, m in enumerate(members):  # the members are the networks at init (the stack holds copies)
            t0 = time.perf_counter()
            kw: dict[str, Any] = {"outputs": ntk_outputs, "max_memory": p.ntk_max_memory}
            kernels[i] = (
                empirical_ntk(m, x_tr, **kw).cpu().numpy(),
                empirical_ntk(m, x_ev, x_tr, **kw).cpu().numpy(),
            )
            ntk_seconds[i] = time.perf_counter() - t0
    result = train_module_stack(stack, x_tr, y_tr, seeds=list(seeds), lr=p.lr, steps=p.steps, batch_size=p.batch_size)
    preds = stack.predict(x_ev).double().cpu().numpy()
    fitted = []
    for i in range(len(seeds)):
        seed_info: dict[str, Any] = {
            "steps": result.steps, "train_loss": result.final_loss[i], **(info or {}),
            "train_seconds": round(result.seconds, 3), "ntk_seconds": round(ntk_seconds[i], 3),
        }
        if vector_output:
            seed_info["ntk_outputs"] = ntk_outputs if p.theory == "empirical" else "none"
        error = None
        if result.diverged[i] or not np.all(np.isfinite(preds[i])):
            error = f"training diverged (non-finite loss {result.final_loss[i]}) within {result.steps} steps"
        fitted.append(Fitted(preds[i], f0_tr[i], f0_ev[i], seed_info, error, kernels[i]))
    return fitted
