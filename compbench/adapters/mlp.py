"""The `mlp` adapter: a fully connected ReLU network whose init scale spans lazy → rich.

Lazy limit (what the theory engine predicts): kernel regression with this network's NTK *plus its
initial function* f_0 (THEORY.md §2): f = f_0 + K (K_train)^+ (y_train − f_0(train)), f_0 recorded
per seed. With `center: true` the model is f(x; θ) − f(x; θ_0) instead, which starts at exactly 0,
so its lazy limit is the pure kernel predictor K (K_train)^+ y_train — conjunction-wise additive
by the theorem. (The random f_0 of an uncentred network is not additive over the training set.)

K outputs (a K-output regression task, or K classes): the network has K output units. `loss: mse`
regresses the targets, one-hot rows for classes (`Batch.target_matrix()`), with the squared error
summed over outputs (see `compbench.training.batched_mlp`); `loss: cross_entropy` (multi-class
tasks only) trains the K logits on the classes. The theory is kernel regression of the one-hot
(or K-column) targets from f_0 on the NTK: the analytic NTK is shared by the outputs (NTK ⊗ I, so
`kernel()` returns the scalar one); the empirical one is the output-averaged kernel
(`ntk_outputs: trace`, (1/K) Σ_k J_k J_kᵀ) or the full (n·K × n·K) kernel (`ntk_outputs: full`,
sample-major). For cross_entropy that theory predicts the MSE-on-one-hot network, not the
cross-entropy one (which has no kernel-regression limit); the gap is what the comparison shows.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from compbench.adapters.base import Adapter, AdapterParams, Batch, Fitted
from compbench.adapters.registry import register_adapter
from compbench.losses import CLASS_LOSSES, loss_problem
from compbench.theory.options import TheoryOptions


class MLPParams(AdapterParams):
    """Hyperparameters of the ReLU MLP (paper's DenseNet: standard parameterisation)."""

    width: int = Field(default=1000, ge=1)
    depth: int = Field(default=1, ge=1, description="number of hidden layers")
    init_scale: float = Field(default=1.0, gt=0, description="σ: 1 ≈ lazy, ≤ 1e-3 ≈ rich")
    bias: bool = True
    loss: Literal["mse", "logistic", "cross_entropy"] = Field(
        default="mse", description="mse (one-hot targets on multi-class tasks), logistic (±1 tasks), cross_entropy (multi-class)"
    )
    optimizer: Literal["gd", "adam"] = "gd"
    lr: float = Field(default=0.01, gt=0)
    max_steps: int = Field(default=20_000, ge=1)
    batch_size: int | None = Field(
        default=None, ge=1,
        description="minibatches of this size, reshuffled every epoch in an order shared by the seeds (None: full batch)",
    )
    loss_tol: float = Field(default=1e-4, gt=0, description="early stop when the train loss is below")
    theory: Literal["analytic", "empirical"] = Field(
        default="analytic", description="NTK for the theory: analytic large-width or empirical at init"
    )
    ntk_outputs: Literal["trace", "full"] = Field(
        default="trace",
        description="theory: empirical with K outputs: the output-averaged NTK (trace) or the full (n·K)² kernel",
    )
    dtype: Literal["float32", "float64"] = "float32"
    center: bool = Field(default=False, description="subtract the initial function: f(x;θ) − f(x;θ_0)")

    @model_validator(mode="after")
    def _full_needs_empirical(self) -> MLPParams:
        if self.ntk_outputs == "full" and self.theory != "empirical":
            raise ValueError("ntk_outputs: full needs theory: empirical (the analytic NTK is shared by the outputs)")
        return self


def _batch_problem(loss: str, batch: Batch) -> str | None:
    """`loss_problem` for the targets a batch actually carries."""
    if batch.n_classes:
        return loss_problem(loss, "multiclass")
    targets = f"{batch.n_outputs}-output" if batch.vector_output else "scalar"
    if loss in CLASS_LOSSES:
        return f"loss: {loss} needs a multi-class task (integer classes), this one has {targets} targets; use loss: mse"
    if loss == "logistic" and batch.vector_output:
        return f"loss: logistic needs a ±1 classification task (one output), this one has {targets} targets; use loss: mse"
    return None  # logistic on a scalar task: ±1 targets are the suite validation's and the theory's check


@register_adapter("mlp")
class MLPAdapter(Adapter):
    """ReLU MLP trained full batch (or on minibatches); all seeds of a cell train together as one stacked model."""

    Params = MLPParams
    params: MLPParams
    tags = ("networks",)

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Train len(seeds) networks at once; per-seed init, early stopping and divergence."""
        import torch

        from compbench.training.batched_mlp import (
            init_stacked_mlp,
            member_module,
            stacked_features,
            stacked_forward,
            train_stacked,
        )

        p = self.params
        problem = _batch_problem(p.loss, train)
        if problem:
            raise ValueError(problem)
        dtype = torch.float64 if p.dtype == "float64" else torch.float32
        n_out = train.n_outputs
        x_tr = torch.as_tensor(train.x.reshape(len(train), -1), dtype=dtype, device=self.device)
        x_ev = torch.as_tensor(evaluate.x.reshape(len(evaluate), -1), dtype=dtype, device=self.device)
        if p.loss == "cross_entropy":
            y_tr = torch.as_tensor(np.asarray(train.y), dtype=torch.int64, device=self.device)
        elif train.vector_output:
            # one-hot rows for classes; a single output unit trains on (n,) targets
            y_mat = train.target_matrix()
            y_tr = torch.as_tensor(y_mat[:, 0] if n_out == 1 else y_mat, dtype=dtype, device=self.device)
        else:
            y_tr = torch.as_tensor(train.y, dtype=dtype, device=self.device)
        layers = init_stacked_mlp(
            seeds, x_tr.shape[1], p.width, p.depth, p.init_scale, p.bias, dtype, self.device, d_out=n_out
        )
        with torch.no_grad():
            f0_tr_t = stacked_forward(layers, x_tr)
            f0_ev = stacked_forward(layers, x_ev).double().cpu().numpy()
        f0_tr = f0_tr_t.double().cpu().numpy()
        kernels: list[tuple[np.ndarray, np.ndarray] | None] = [None] * len(seeds)
        diagonals: list[np.ndarray | None] = [None] * len(seeds)
        if p.theory == "empirical":
            from compbench.theory import empirical_ntk
            from compbench.theory.similarity import kernel_diagonal

            for i in range(len(seeds)):
                module = member_module(layers, i)
                kernels[i] = (
                    empirical_ntk(module, x_tr, outputs=p.ntk_outputs).cpu().numpy(),
                    empirical_ntk(module, x_ev, x_tr, outputs=p.ntk_outputs).cpu().numpy(),
                )
                # k(x, x) for the nearest-training similarity (the trace kernel's: the full one's averaged over outputs)
                diagonals[i] = kernel_diagonal(lambda a, b, m=module: empirical_ntk(m, x_ev[a:b]).cpu().numpy(), len(x_ev))
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
            batch_size=p.batch_size,
        )
        with torch.no_grad():
            preds = stacked_forward(layers, x_ev).double().cpu().numpy()
            # the trained members' representation, for the linear probe on factor tasks
            phi_tr = stacked_features(layers, x_tr).double().cpu().numpy()
            phi_ev = stacked_features(layers, x_ev).double().cpu().numpy()
        if p.center:
            preds = preds - f0_ev
            f0_tr, f0_ev = np.zeros_like(f0_tr), np.zeros_like(f0_ev)
        # (k, n) or (k, n, K) → each member's (n,) or (n, K), as the task's predictions are shaped
        k, tail = len(seeds), ((n_out,) if train.vector_output else ())
        preds = preds.reshape(k, len(evaluate), *tail)
        f0_tr = f0_tr.reshape(k, len(train), *tail)
        f0_ev = f0_ev.reshape(k, len(evaluate), *tail)
        fitted = []
        for i in range(len(seeds)):
            info = {"steps": result.steps[i], "train_loss": result.final_loss[i], "converged": result.converged[i]}
            if train.vector_output:
                info["ntk_outputs"] = p.ntk_outputs if p.theory == "empirical" else "shared"
            error = None
            if result.diverged[i] or not np.all(np.isfinite(preds[i])):
                error = f"training diverged (non-finite loss) at step {result.steps[i]}"
            fitted.append(Fitted(preds[i], f0_tr[i], f0_ev[i], info, error, kernels[i], features=(phi_tr[i], phi_ev[i]),
                                 kernel_diagonal=diagonals[i]))
        return fitted

    def kernel(self, a: Batch, b: Batch) -> np.ndarray | None:
        """The analytic large-width NTK of this very network (None when theory is 'empirical').

        With K outputs it is every output's kernel: the network's is this one ⊗ I_K.
        """
        if self.params.theory == "empirical":
            return None
        from compbench.theory import standard_mlp_ntk

        p = self.params
        ntk, _ = standard_mlp_ntk(
            a.x.reshape(len(a), -1), b.x.reshape(len(b), -1),
            width=p.width, depth=p.depth, init_scale=p.init_scale, bias=p.bias,
        )
        return ntk

    def init_kernel(self, a: Batch, b: Batch) -> np.ndarray | None:
        """The large-width NNGP of f₀ (every output's; None when centred: f₀ is subtracted, or theory is empirical)."""
        p = self.params
        if p.center or p.theory == "empirical":
            return None
        from compbench.theory import standard_mlp_ntk

        _, nngp = standard_mlp_ntk(
            a.x.reshape(len(a), -1), b.x.reshape(len(b), -1),
            width=p.width, depth=p.depth, init_scale=p.init_scale, bias=p.bias,
        )
        return nngp

    def theory_options(self) -> TheoryOptions:
        """MSE → min-norm regression from f_0; logistic → max-margin SVM; cross-entropy → min-norm
        regression of the one-hot targets (the prediction for the MSE-on-one-hot network)."""
        return TheoryOptions("svm" if self.params.loss == "logistic" else "min_norm")

    def theory_kernel_name(self) -> str:
        """Which NTK the theory prediction uses."""
        full = "_full" if self.params.theory == "empirical" and self.params.ntk_outputs == "full" else ""
        return f"{self.params.theory}_ntk{full}"
