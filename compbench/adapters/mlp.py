"""The `mlp` adapter: a fully connected ReLU network whose init scale spans lazy → rich.

Lazy limit (what the theory engine predicts): kernel regression with this network's NTK *plus its
initial function* f_0 (THEORY.md §2): f = f_0 + K (K_train)^+ (y_train − f_0(train)), f_0 recorded
per seed. With `center: true` the model is f(x; θ) − f(x; θ_0) instead, which starts at exactly 0,
so its lazy limit is the pure kernel predictor K (K_train)^+ y_train — conjunction-wise additive
by the theorem. (The random f_0 of an uncentred network is not additive over the training set.)
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from compbench.adapters.base import Adapter, AdapterParams, Batch, Fitted
from compbench.adapters.registry import register_adapter


class MLPParams(AdapterParams):
    """Hyperparameters of the ReLU MLP (paper's DenseNet: standard parameterisation)."""

    width: int = Field(default=1000, ge=1)
    depth: int = Field(default=1, ge=1, description="number of hidden layers")
    init_scale: float = Field(default=1.0, gt=0, description="σ: 1 ≈ lazy, ≤ 1e-3 ≈ rich")
    bias: bool = True
    loss: Literal["mse", "logistic"] = "mse"
    optimizer: Literal["gd", "adam"] = "gd"
    lr: float = Field(default=0.01, gt=0)
    max_steps: int = Field(default=20_000, ge=1)
    loss_tol: float = Field(default=1e-4, gt=0, description="early stop when the train loss is below")
    theory: Literal["analytic", "empirical"] = Field(
        default="analytic", description="NTK for the theory: analytic large-width or empirical at init"
    )
    dtype: Literal["float32", "float64"] = "float32"
    center: bool = Field(default=False, description="subtract the initial function: f(x;θ) − f(x;θ_0)")


@register_adapter("mlp")
class MLPAdapter(Adapter):
    """ReLU MLP trained full batch; all seeds of a cell train together as one stacked model."""

    Params = MLPParams
    params: MLPParams
    tags = ("networks",)

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Train len(seeds) networks at once; per-seed init, early stopping and divergence."""
        import torch

        from compbench.training.batched_mlp import (
            init_stacked_mlp,
            member_module,
            stacked_forward,
            train_stacked,
        )

        p = self.params
        dtype = torch.float64 if p.dtype == "float64" else torch.float32
        x_tr = torch.as_tensor(train.x.reshape(len(train), -1), dtype=dtype, device=self.device)
        x_ev = torch.as_tensor(evaluate.x.reshape(len(evaluate), -1), dtype=dtype, device=self.device)
        y_tr = torch.as_tensor(train.y, dtype=dtype, device=self.device)
        layers = init_stacked_mlp(seeds, x_tr.shape[1], p.width, p.depth, p.init_scale, p.bias, dtype, self.device)
        with torch.no_grad():
            f0_tr_t = stacked_forward(layers, x_tr)
            f0_ev = stacked_forward(layers, x_ev).double().cpu().numpy()
        f0_tr = f0_tr_t.double().cpu().numpy()
        kernels: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(seeds)
        if p.theory == "empirical":
            from compbench.theory import empirical_ntk

            for i in range(len(seeds)):
                module = member_module(layers, i)
                kernels[i] = (
                    empirical_ntk(module, x_tr).cpu().numpy(),
                    empirical_ntk(module, x_ev, x_tr).cpu().numpy(),
                )
        result = train_stacked(
            layers,
            x_tr,
            y_tr,
            loss=p.loss,
            optimizer=p.optimizer,
            lr=p.lr,
            max_steps=p.max_steps,
            loss_tol=p.loss_tol,
            offset=f0_tr_t if p.center else None,
        )
        with torch.no_grad():
            preds = stacked_forward(layers, x_ev).double().cpu().numpy()
        if p.center:
            preds = preds - f0_ev
            f0_tr, f0_ev = np.zeros_like(f0_tr), np.zeros_like(f0_ev)
        fitted = []
        for i in range(len(seeds)):
            info = {"steps": result.steps[i], "train_loss": result.final_loss[i], "converged": result.converged[i]}
            error = None
            if result.diverged[i] or not np.all(np.isfinite(preds[i])):
                error = f"training diverged (non-finite loss) at step {result.steps[i]}"
            fitted.append(Fitted(preds[i], f0_tr[i], f0_ev[i], info, error, kernels[i]))
        return fitted

    def kernel(self, a: Batch, b: Batch) -> np.ndarray | None:
        """The analytic large-width NTK of this very network (None when theory is 'empirical')."""
        if self.params.theory == "empirical":
            return None
        from compbench.theory import standard_mlp_ntk

        p = self.params
        ntk, _ = standard_mlp_ntk(
            a.x.reshape(len(a), -1), b.x.reshape(len(b), -1),
            width=p.width, depth=p.depth, init_scale=p.init_scale, bias=p.bias,
        )
        return ntk

    def theory_options(self) -> dict[str, Any]:
        """MSE → min-norm regression from f_0; logistic → max-margin SVM."""
        return {"objective": "min_norm" if self.params.loss == "mse" else "svm"}

    def theory_kernel_name(self) -> str:
        """Which NTK the theory prediction uses."""
        return f"{self.params.theory}_ntk"
