"""Shared base of the deep image adapters (convnet, resnet, vit, timm:<name>).

A subclass only says how to build its network for an input shape (`build`). This base trains one
network per seed with minibatches (compbench.training.minibatch) on `self.device`, and gives the
theory engine what it needs for the lazy limit of *that seed's own network*:

- `Fitted.kernels = (K_train,train, K_eval,train)`: the empirical NTK at initialisation, eval mode,
  float64 (compbench.theory.empirical_ntk; structured path for Linear/Conv/norm layers);
- `Fitted.initial_train`, `Fitted.initial_eval`: the outputs f_0 at initialisation (eval mode),

so the runner predicts f_0 + K (K_tt)^+ (y − f_0(train)) per sample and averages each cell's samples.
Initialisation is seeded through a forked CPU RNG and done on the CPU, so a seed gives the same
initial network on every device; AMP is used on CUDA only.
"""

from __future__ import annotations

import contextlib
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, model_validator

from compbench.adapters.base import Adapter, AdapterParams, Batch, Fitted

if TYPE_CHECKING:
    import torch


class NetworkParams(AdapterParams):
    """Training and theory settings shared by the deep image adapters."""

    optimizer: Literal["sgd", "adam"] = "adam"
    lr: float = Field(default=1e-3, gt=0)
    momentum: float = Field(default=0.0, ge=0, lt=1, description="sgd only")
    weight_decay: float = Field(default=0.0, ge=0)
    epochs: int = Field(default=100, ge=1)
    batch_size: int = Field(default=128, ge=1)
    loss: Literal["mse", "logistic"] = "mse"
    loss_tol: float = Field(default=0.0, ge=0, description="stop when an epoch's mean train loss is below (0: never)")
    amp: bool = Field(default=True, description="mixed precision on CUDA (ignored on the CPU)")
    theory: Literal["empirical", "none"] = Field(
        default="empirical", description="empirical NTK of each seed's network at init, or no theory prediction"
    )
    ntk_max_memory: int = Field(default=1 << 30, ge=1 << 20, description="bytes the NTK computation may hold at once")
    center: bool = Field(
        default=False, description="train f = α·(g(x; θ) − g(x; θ_0)) (a frozen copy of the initial network): f_0 = 0"
    )
    output_scale: float = Field(
        default=1.0, gt=0, description="α multiplying the output; large α with lr ∝ 1/α² → lazy (Chizat et al. 2019)"
    )
    lr_ntk: float | None = Field(
        default=None, gt=0,
        description="per seed, lr = lr_ntk · n_train / λ_max(K_train) of its empirical NTK at init (replaces lr; "
        "for lazy training: gradient descent on the linearised model is stable below lr_ntk = 1)",
    )

    ntk_solver: Literal["auto", "dense", "cg"] = Field(
        default="auto",
        description="theory by dense NTK Grams, or matrix-free conjugate gradients (no N×N Gram); "
        "auto: cg when the Grams would exceed ntk_max_memory",
    )
    ntk_cg_tol: float | None = Field(default=None, gt=0, description="CG relative residual (default: 1e-3 float32, 1e-8 float64)")
    ntk_cg_max_iter: int = Field(default=1000, ge=1)

    @model_validator(mode="after")
    def _theory_settings(self) -> NetworkParams:
        if self.lr_ntk is not None and self.theory != "empirical":
            raise ValueError("lr_ntk needs theory: empirical (the learning rate comes from the empirical NTK at init)")
        if self.ntk_solver == "cg" and self.loss == "logistic":
            raise ValueError("ntk_solver: cg solves the least-squares (mse) theory; the logistic loss's SVM theory needs the Grams")
        return self


def scalar_module(net: torch.nn.Module, center: bool = False, scale: float = 1.0) -> torch.nn.Module:
    """Wrap a network whose output is (n, 1) (or (n,)) so that it returns (n,), times `scale`.

    With `center` the output is scale·(net(x) − net_0(x)), net_0 a frozen copy of `net` as it is
    now (its BatchNorm running statistics frozen too, momentum 0, and it follows the wrapper's
    train/eval mode), so the wrapped network starts at exactly 0 in either mode.
    """
    import copy

    import torch

    def flat(out: torch.Tensor) -> torch.Tensor:
        if out.dim() > 1 and out[0].numel() != 1:
            raise ValueError(f"the network must output one value per sample, got shape {tuple(out.shape)}")
        return out.reshape(out.shape[0])

    class Scalar(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.net = inner
            self.net0 = None
            if center:
                self.net0 = copy.deepcopy(inner)
                for p in self.net0.parameters():
                    p.requires_grad_(False)
                for m in self.net0.modules():
                    if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                        m.momentum = 0.0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            out = flat(self.net(x))
            if self.net0 is not None:
                with torch.no_grad():
                    ref = flat(self.net0(x))
                out = out - ref  # outside no_grad: the difference keeps the gradient of `out`
            return out * scale if scale != 1.0 else out

    return Scalar(net)


@contextlib.contextmanager
def _ntk_friendly(module: torch.nn.Module):
    """Unfused attention (timm's `fused_attn`) while the NTK's torch.func path runs: vmap has no
    batching rule for the fused CPU kernel. Same function; restored afterwards."""
    flagged = [(m, m.fused_attn) for m in module.modules() if isinstance(getattr(m, "fused_attn", None), bool)]
    for m, _ in flagged:
        m.fused_attn = False
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*batching rule.*")
            yield
    finally:
        for m, value in flagged:
            m.fused_attn = value


@contextlib.contextmanager
def seeded_rng(seed: int, device: str):
    """The global torch RNG seeded from `seed` (dropout, stochastic depth draw from it), restored afterwards.

    Training must not depend on whatever ran before in the process: without this, a ViT with
    dropout gives different predictions for the same seed on a second run.
    """
    import torch

    dev = torch.device(device)
    devices = [dev.index if dev.index is not None else torch.cuda.current_device()] if dev.type == "cuda" else []
    # A stream of its own, apart from the initialisation's torch.manual_seed(seed).
    state = int(np.random.SeedSequence([int(seed), 1]).generate_state(1, dtype=np.uint64)[0] >> 1)
    with torch.random.fork_rng(devices=devices):
        torch.manual_seed(state)
        yield


@dataclass
class AtInit:
    """One seed's network at initialisation: f_0 and what the theory needs, before training."""

    f0_train: np.ndarray
    f0_eval: np.ndarray
    kernels: tuple[np.ndarray, np.ndarray] | None = None  # dense (K_train,train, K_eval,train)
    theory: np.ndarray | None = None  # per evaluation sample, when solved matrix-free (no Grams kept)
    lambda_max_estimate: float | None = None  # λ_max of K_train from Lanczos, when there is no dense Gram
    seconds: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)

    def lambda_max(self) -> float | None:
        """The largest eigenvalue of K_train (what lr_ntk scales by), or None without a theory kernel."""
        if self.kernels is not None:
            return float(np.linalg.eigvalsh(self.kernels[0])[-1])
        return self.lambda_max_estimate


def _largest_eigenvalue(net: torch.nn.Module, x: torch.Tensor, chunk: int) -> float:
    """λ_max of the empirical NTK on x without the Gram: Lanczos (scipy eigsh) on K·v products."""
    from scipy.sparse.linalg import LinearOperator, eigsh

    import torch

    from compbench.theory import ntk_matvec

    matvec = ntk_matvec(net, x, chunk=chunk)
    n = len(x)
    op = LinearOperator((n, n), matvec=lambda v: matvec(torch.as_tensor(v, dtype=torch.float64)).cpu().numpy(), dtype=np.float64)
    return float(eigsh(op, k=1, which="LA", tol=1e-3, return_eigenvectors=False)[0])


class NetworkAdapter(Adapter):
    """Base: minibatch training per seed, empirical NTK at init + f_0 for the theory."""

    Params = NetworkParams
    params: NetworkParams
    inputs = ("image",)
    tags = ("networks",)

    def build(self, in_shape: tuple[int, int, int]) -> torch.nn.Module:
        """The network for inputs (channels, H, W); its output is one value per sample."""
        raise NotImplementedError

    def _init(self, seed: int, in_shape: tuple[int, int, int]) -> torch.nn.Module:
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            net = self.build(in_shape)
        return scalar_module(net, self.params.center, self.params.output_scale).to(self.device)

    # Pieces of one seed's fit, shared with adapters that train several seeds at once (convnet).

    def _tensors(self, train: Batch, evaluate: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[int, ...]]:
        """Training inputs, evaluation inputs, training targets (float32, on the device) and the input shape."""
        import torch

        if train.x.ndim != 4:
            raise ValueError(
                f"adapter {self.name!r} needs image inputs (samples, channels, H, W), got shape {train.x.shape}; "
                "use an image encoding such as `encoding: {name: digits}`"
            )
        x_tr = torch.as_tensor(np.ascontiguousarray(train.x), dtype=torch.float32, device=self.device)
        x_ev = torch.as_tensor(np.ascontiguousarray(evaluate.x), dtype=torch.float32, device=self.device)
        y_tr = torch.as_tensor(train.y, dtype=torch.float32, device=self.device)
        return x_tr, x_ev, y_tr, tuple(int(s) for s in train.x.shape[1:])

    def _solver(self, n_train: int, n_eval: int) -> str:
        """dense or cg: `auto` takes cg when the two dense Grams would exceed ntk_max_memory."""
        p = self.params
        if p.ntk_solver != "auto":
            return p.ntk_solver
        return "cg" if 8 * n_train * (n_train + n_eval) > p.ntk_max_memory else "dense"

    def _at_init(self, net: torch.nn.Module, x_tr: torch.Tensor, x_ev: torch.Tensor, y_tr: torch.Tensor) -> AtInit:
        """f_0 on the training and evaluation inputs and the seed's theory: the empirical NTK at init
        (dense Grams), or, when they do not fit (`ntk_solver`), the matrix-free CG prediction."""
        from compbench.theory import empirical_ntk
        from compbench.training.minibatch import predict

        p = self.params
        state = AtInit(predict(net, x_tr).double().cpu().numpy(), predict(net, x_ev).double().cpu().numpy())
        t0 = time.perf_counter()
        if p.theory == "empirical":
            state.info["ntk_solver"] = solver = self._solver(len(x_tr), len(x_ev))
            with _ntk_friendly(net):
                if solver == "dense":
                    state.kernels = (
                        empirical_ntk(net, x_tr, max_memory=p.ntk_max_memory).cpu().numpy(),
                        empirical_ntk(net, x_ev, x_tr, max_memory=p.ntk_max_memory).cpu().numpy(),
                    )
                else:
                    self._cg_theory(net, x_tr, x_ev, y_tr, state)
        state.seconds = time.perf_counter() - t0
        return state

    def _cg_theory(self, net: torch.nn.Module, x_tr: torch.Tensor, x_ev: torch.Tensor, y_tr: torch.Tensor, state: AtInit) -> None:
        """The lazy-limit prediction f_0 + K_eval,train α, (K_train) α = y − f_0, by matrix-free CG."""
        from compbench.theory import ntk_cg_regression

        p = self.params
        if self.theory_options()["objective"] != "min_norm":
            raise ValueError(
                "the NTK Grams exceed ntk_max_memory and the max-margin (logistic) theory needs them: "
                "raise ntk_max_memory or use loss: mse"
            )
        preds, cg = ntk_cg_regression(
            net, x_tr, y_tr.double(), x_ev, f0_train=state.f0_train, f0_eval=state.f0_eval,
            tol=p.ntk_cg_tol, max_iter=p.ntk_cg_max_iter, chunk=p.batch_size,
        )
        state.theory = np.asarray(preds, dtype=np.float64)
        state.info.update(cg.summary())
        if not cg.converged:
            state.info["theory_warning"] = cg.message
        if p.lr_ntk is not None:
            state.lambda_max_estimate = _largest_eigenvalue(net, x_tr, p.batch_size)

    def _train_options(self, at_init: AtInit | None = None) -> dict[str, Any]:
        """`train_minibatch`'s keyword arguments from the params, all but the seed.

        With `lr_ntk`, the learning rate comes from the seed's NTK at init (`at_init` from `_at_init`).
        """
        p = self.params
        lr = p.lr
        if p.lr_ntk is not None:
            lam = None if at_init is None else at_init.lambda_max()
            if lam is None:
                raise ValueError("lr_ntk needs the seed's empirical NTK at init")
            lr = p.lr_ntk * len(at_init.f0_train) / lam
        return dict(
            optimizer=p.optimizer, lr=lr, momentum=p.momentum, weight_decay=p.weight_decay,
            epochs=p.epochs, batch_size=p.batch_size, loss=p.loss, loss_tol=p.loss_tol, amp=p.amp,
        )

    def _fitted(self, net: torch.nn.Module, result: Any, x_ev: torch.Tensor, at_init: AtInit, lr: float) -> Fitted:
        """One trained seed's Fitted: eval predictions, f_0, theory, info and the divergence error."""
        from compbench.training.minibatch import predict

        preds = predict(net, x_ev).double().cpu().numpy()
        info: dict[str, Any] = {
            "epochs": result.epochs,
            "steps": result.steps,
            "train_loss": result.final_loss,
            "converged": result.converged,
            "n_params": sum(q.numel() for q in net.parameters() if q.requires_grad),  # not center's frozen copy
            "train_seconds": round(result.seconds, 3),
            "ntk_seconds": round(at_init.seconds, 3),
            "lr": lr,
            **at_init.info,
        }
        error = None
        if result.diverged or not np.all(np.isfinite(preds)):
            error = f"training diverged (non-finite loss) in epoch {result.epochs}"
        return Fitted(preds, at_init.f0_train, at_init.f0_eval, info, error, at_init.kernels, at_init.theory)

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Train one network per seed; predictions, f_0 and the empirical NTK at init per seed."""
        from compbench.training.minibatch import train_minibatch

        x_tr, x_ev, y_tr, in_shape = self._tensors(train, evaluate)
        fitted = []
        for seed in seeds:
            net = self._init(seed, in_shape)
            at_init = self._at_init(net, x_tr, x_ev, y_tr)
            options = self._train_options(at_init)
            with seeded_rng(seed, self.device):
                result = train_minibatch(net, x_tr, y_tr, seed=seed, **options)
            fitted.append(self._fitted(net, result, x_ev, at_init, options["lr"]))
        return fitted

    def theory_options(self) -> dict[str, Any]:
        """MSE → min-norm regression from f_0; logistic → max-margin SVM."""
        return {"objective": "min_norm" if self.params.loss == "mse" else "svm"}

    def theory_kernel_name(self) -> str:
        """The kernel behind the theory prediction."""
        return "empirical_ntk_at_init" if self.params.theory == "empirical" else "none"
