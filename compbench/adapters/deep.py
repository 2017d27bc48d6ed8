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

Outputs. The network's last layer has `train.n_outputs` units: one for a scalar task (outputs and
f_0 of shape (n,), exactly as before), K for a K-output or K-class task ((n, K); for classes the K
logits). `loss: mse` on a multi-class task regresses the one-hot rows (`Batch.target_matrix()`);
`loss: cross_entropy` (multi-class only) trains softmax cross-entropy on the logits, and
`categorical_hinge` Keras' multi-class hinge (the loss of the BCDLSG paper's code); their theory is
still the min-norm regression on one-hot targets: the theory predicts the MSE-on-one-hot network
(there is no kernel-regression counterpart of these losses in the lazy limit at finite time). With K outputs the theory kernel is the output-averaged ("trace") empirical NTK, (n, n),
or with `ntk_outputs: full` the whole (n·K, n·K) eNTK, sample-major (dense solver only). The
matrix-free CG path handles one output: with K > 1 `ntk_solver: cg` is refused and `auto` takes
the dense Grams, or refuses with a clear error when they exceed `ntk_max_memory`.
"""

from __future__ import annotations

import contextlib
import inspect
import time
import warnings
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field, model_validator

from compbench.adapters.base import Adapter, AdapterParams, Batch, Fitted

from compbench.losses import CLASS_LOSSES
from compbench.theory.options import TheoryOptions

if TYPE_CHECKING:
    import torch

    from compbench.training.minibatch import TrainOptions


class NetworkParams(AdapterParams):
    """Training and theory settings shared by the deep image adapters."""

    optimizer: Literal["sgd", "adam"] = "adam"
    lr: float = Field(default=1e-3, gt=0)
    momentum: float = Field(default=0.0, ge=0, lt=1, description="sgd only")
    weight_decay: float = Field(default=0.0, ge=0)
    epochs: int = Field(default=100, ge=1)
    steps: int | None = Field(
        default=None, ge=1,
        description="optimizer steps in all; replaces epochs (epochs of shuffled batches until this many steps)",
    )
    batch_size: int = Field(default=128, ge=1)
    loss: Literal["mse", "logistic", "cross_entropy", "categorical_hinge"] = Field(
        default="mse",
        description="mse (one-hot targets on a multi-class task), logistic (±1 labels, one output), "
        "cross_entropy (softmax on K logits) or categorical_hinge (Keras' max(0, 1 + max(0, max_{j≠y} f_j) − f_y)); "
        "the last two on multi-class tasks only",
    )
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
    ntk_outputs: Literal["trace", "full"] = Field(
        default="trace",
        description="K-output networks: the output-averaged empirical NTK (n × n), or the full (n·K × n·K) "
        "one (dense solver only); ignored with one output",
    )

    ntk_time: Literal["converged", "trained"] = Field(
        default="converged",
        description="the theory: the linearised network trained to convergence (kernel regression from f_0), or "
        "after the steps this seed actually took (full-batch SGD on the MSE only; compbench.theory.linearised)",
    )

    @model_validator(mode="after")
    def _theory_settings(self) -> NetworkParams:
        if self.ntk_time == "trained":
            wrong = [f"{k}: {v}" for k, v, ok in (
                ("theory", self.theory, self.theory == "empirical"), ("optimizer", self.optimizer, self.optimizer == "sgd"),
                ("loss", self.loss, self.loss == "mse"), ("weight_decay", self.weight_decay, self.weight_decay == 0),
                ("ntk_solver", self.ntk_solver, self.ntk_solver != "cg")) if not ok]
            if wrong:
                raise ValueError("ntk_time: trained is the linearised network after full-batch SGD on the MSE (theory: "
                                 "empirical, optimizer: sgd, loss: mse, weight_decay: 0, dense Grams); not with "
                                 + ", ".join(wrong))
        if self.lr_ntk is not None and self.theory != "empirical":
            raise ValueError("lr_ntk needs theory: empirical (the learning rate comes from the empirical NTK at init)")
        if self.ntk_solver == "cg" and self.loss == "logistic":
            raise ValueError("ntk_solver: cg solves the least-squares (mse) theory; the logistic loss's SVM theory needs the Grams")
        if self.ntk_solver == "cg" and self.loss in CLASS_LOSSES:
            raise ValueError(f"ntk_solver: cg handles one output; {self.loss} trains K > 1 outputs: use ntk_solver: dense or auto")
        if self.ntk_solver == "cg" and self.ntk_outputs == "full":
            raise ValueError("ntk_outputs: full needs the dense solver (ntk_solver: dense or auto)")
        return self


def output_module(net: torch.nn.Module, center: bool = False, scale: float = 1.0, outputs: int = 0) -> torch.nn.Module:
    """Wrap a network so that it returns (n,) (`outputs` 0: one value per sample, from (n, 1) or
    (n,)) or (n, outputs), times `scale`.

    With `center` the output is scale·(net(x) − net_0(x)), net_0 a frozen copy of `net` as it is
    now (its BatchNorm running statistics frozen too, momentum 0, and it follows the wrapper's
    train/eval mode), so the wrapped network starts at exactly 0 in either mode.
    """
    import copy

    import torch

    if outputs < 0:
        raise ValueError(f"outputs must be ≥ 0 (0: one value per sample as (n,)), got {outputs}")

    def flat(out: torch.Tensor) -> torch.Tensor:
        if outputs == 0:
            if out.dim() > 1 and out[0].numel() != 1:
                raise ValueError(f"the network must output one value per sample, got shape {tuple(out.shape)}")
            return out.reshape(out.shape[0])
        if out.dim() != 2 or out.shape[1] != outputs:
            raise ValueError(f"the network must output {outputs} values per sample as (n, {outputs}), got shape {tuple(out.shape)}")
        return out

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


def scalar_module(net: torch.nn.Module, center: bool = False, scale: float = 1.0) -> torch.nn.Module:
    """`output_module` with one output per sample: the network's (n, 1) or (n,) output as (n,)."""
    return output_module(net, center, scale)


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
    targets: np.ndarray | None = None  # the training targets, kept for the finite-time theory (ntk_time: trained)
    kernel_diagonal: np.ndarray | None = None  # k(x, x) of the (output-averaged) eNTK on each evaluation sample

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


_INPUT_KINDS = {2: "vector", 4: "image"}  # a batch's number of axes → the input kind it is
_INPUT_SHAPES = {"vector": "(samples, features)", "image": "(samples, channels, H, W)"}


class NetworkAdapter(Adapter):
    """Base: minibatch training per seed, empirical NTK at init + f_0 for the theory."""

    Params = NetworkParams
    params: NetworkParams
    inputs = ("image",)
    tags = ("networks",)

    def build(self, in_shape: tuple[int, int, int], n_out: int = 1) -> torch.nn.Module:
        """The network for one sample of shape `in_shape` ((channels, H, W), or (d,) with `inputs = ("vector",)`);
        its output is `n_out` values per sample ((n, n_out))."""
        raise NotImplementedError

    def _build(self, in_shape: tuple[int, int, int], n_out: int) -> torch.nn.Module:
        """`build`, also for subclasses written before `n_out` existed (one output only)."""
        if n_out == 1:
            return self.build(in_shape)
        params = inspect.signature(self.build).parameters
        if "n_out" not in params and not any(q.kind is inspect.Parameter.VAR_KEYWORD for q in params.values()):
            raise TypeError(
                f"adapter {self.name!r}: its build(in_shape) has no n_out parameter, so it cannot build the "
                f"{n_out}-output network this task needs; give it `n_out: int = 1` (units of the last layer)"
            )
        return self.build(in_shape, n_out=n_out)

    def _init(self, seed: int, in_shape: tuple[int, int, int], outputs: int = 0) -> torch.nn.Module:
        """Seed's network wrapped by `output_module`: (n,) outputs (`outputs` 0) or (n, outputs)."""
        import torch

        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            net = self._build(in_shape, max(1, outputs))
        return output_module(net, self.params.center, self.params.output_scale, outputs).to(self.device)

    # Pieces of one seed's fit, shared with adapters that train several seeds at once (convnet).

    @staticmethod
    def _outputs(train: Batch) -> int:
        """`output_module`'s `outputs` for this task: 0 for a scalar task ((n,) outputs), else K."""
        return train.n_outputs if train.vector_output else 0

    def _targets(self, train: Batch) -> np.ndarray:
        """What the loss compares the outputs with: (n,) or (n, K) floats (one-hot rows for classes
        under mse), or the integer classes (n,) for cross_entropy and categorical_hinge."""
        loss = self.params.loss
        if loss in CLASS_LOSSES:
            if not train.n_classes:
                shape = "K-output regression" if train.vector_output else "scalar"
                raise ValueError(f"loss: {loss} needs a multi-class task; this task has {shape} targets: use loss: mse")
            return np.asarray(train.y, dtype=np.int64)
        if loss == "logistic" and train.vector_output:
            raise ValueError(
                f"loss: logistic trains one output on ±1 labels; this task has {train.n_outputs} outputs: "
                "use loss: mse (one-hot targets for classes) or cross_entropy"
            )
        return train.regression_targets()

    def _check_inputs(self, train: Batch, evaluate: Batch) -> None:
        """Refuse inputs of a kind the adapter does not declare (a subclass may accept any sample shape)."""
        # The inputs the adapter declares are the ones it gets (validate refuses other tasks): a subclass
        # for vectors (`inputs = ("vector",)`) builds on (d,), one for images on (channels, H, W).
        kind = _INPUT_KINDS.get(train.x.ndim)
        if kind not in self.inputs:
            wanted = " or ".join(f"{k} inputs {_INPUT_SHAPES[k]}" for k in self.inputs if k in _INPUT_SHAPES)
            hint = "use an image encoding such as `encoding: {name: digits}`" if "image" in self.inputs else \
                "use a vector encoding such as `encoding: onehot`"
            raise ValueError(f"adapter {self.name!r} needs {wanted}, got shape {train.x.shape}; {hint}")

    def _tensors(self, train: Batch, evaluate: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[int, ...]]:
        """Training inputs, evaluation inputs (float32), training targets (`_targets`; on the device) and the input shape."""
        import torch

        self._check_inputs(train, evaluate)
        x_tr = torch.as_tensor(np.ascontiguousarray(train.x), dtype=torch.float32, device=self.device)
        x_ev = torch.as_tensor(np.ascontiguousarray(evaluate.x), dtype=torch.float32, device=self.device)
        targets = self._targets(train)
        dtype = torch.long if targets.dtype.kind in "iu" else torch.float32
        y_tr = torch.as_tensor(targets, dtype=dtype, device=self.device)
        return x_tr, x_ev, y_tr, tuple(int(s) for s in train.x.shape[1:])

    def _solver(self, n_train: int, n_eval: int, outputs: int = 0) -> str:
        """dense or cg: `auto` takes cg when the two dense Grams would exceed ntk_max_memory.

        CG handles one output: with `outputs` ≥ 1 (K-output networks) explicit cg is refused and
        auto is dense, or an error when the Grams ((n·K)² with ntk_outputs: full) exceed the bound.
        """
        p = self.params
        per_sample = outputs if outputs and p.ntk_outputs == "full" else 1
        gram_bytes = 8 * per_sample**2 * n_train * (n_train + n_eval)
        if not outputs:
            if p.ntk_solver != "auto":
                return p.ntk_solver
            return "cg" if gram_bytes > p.ntk_max_memory else "dense"
        if p.ntk_solver == "cg":
            raise ValueError(
                f"ntk_solver: cg handles one output; this task's network has {outputs}: "
                "use ntk_solver: dense or auto (the trace empirical NTK), or theory: none"
            )
        if p.ntk_solver == "auto" and gram_bytes > p.ntk_max_memory:
            raise ValueError(
                f"the empirical NTK Grams of this {outputs}-output network need {gram_bytes / 2**20:.0f} MiB, more than "
                f"ntk_max_memory ({p.ntk_max_memory / 2**20:.0f} MiB), and matrix-free CG handles one output only: "
                "raise ntk_max_memory, use ntk_solver: dense, or theory: none"
            )
        return "dense"

    def _at_init(self, net: torch.nn.Module, x_tr: torch.Tensor, x_ev: torch.Tensor, y_tr: torch.Tensor, outputs: int = 0) -> AtInit:
        """f_0 on the training and evaluation inputs and the seed's theory: the empirical NTK at init
        (dense Grams; trace or full with `outputs` ≥ 1), or, when they do not fit (`ntk_solver`), the
        matrix-free CG prediction."""
        from compbench.theory import empirical_ntk
        from compbench.theory.similarity import kernel_diagonal
        from compbench.training.minibatch import predict

        p = self.params
        state = AtInit(predict(net, x_tr).double().cpu().numpy(), predict(net, x_ev).double().cpu().numpy())
        if p.ntk_time == "trained":
            state.targets = y_tr.double().cpu().numpy()
        t0 = time.perf_counter()
        if p.theory == "empirical":
            state.info["ntk_solver"] = solver = self._solver(len(x_tr), len(x_ev), outputs)
            # One output: exactly the scalar call; K outputs: the trace or full eNTK of the (n, K) module.
            kw: dict[str, Any] = {"max_memory": p.ntk_max_memory}
            if outputs:
                kw["outputs"] = state.info["ntk_outputs"] = p.ntk_outputs
            with _ntk_friendly(net):
                if solver == "dense":
                    state.kernels = (
                        empirical_ntk(net, x_tr, **kw).cpu().numpy(),
                        empirical_ntk(net, x_ev, x_tr, **kw).cpu().numpy(),
                    )
                    # the similarity's normaliser, block by block (compbench.theory.similarity): the trace kernel's
                    # diagonal, which is also the full one's averaged over outputs
                    state.kernel_diagonal = kernel_diagonal(
                        lambda a, b: empirical_ntk(net, x_ev[a:b], max_memory=p.ntk_max_memory).cpu().numpy(), len(x_ev))
                else:
                    self._cg_theory(net, x_tr, x_ev, y_tr, state)
        state.seconds = time.perf_counter() - t0
        return state

    def _cg_theory(self, net: torch.nn.Module, x_tr: torch.Tensor, x_ev: torch.Tensor, y_tr: torch.Tensor, state: AtInit) -> None:
        """The lazy-limit prediction f_0 + K_eval,train α, (K_train) α = y − f_0, by matrix-free CG (one output)."""
        from compbench.theory import ntk_cg_regression

        p = self.params
        if self.theory_options().objective != "min_norm":
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

    def _train_options(self, at_init: AtInit | None = None) -> TrainOptions:
        """The training recipe from the params (all but the seed).

        With `lr_ntk`, the learning rate comes from the seed's NTK at init (`at_init` from `_at_init`):
        lr_ntk · n / λ_max, so that gradient descent on the linearised model under the MSE (summed
        over outputs) is stable below lr_ntk = 1 (exactly for one output or the full eNTK; for the
        trace kernel of K outputs where the full eNTK is close to trace ⊗ identity).
        """
        from compbench.training.minibatch import TrainOptions

        p = self.params
        lr = p.lr
        if p.lr_ntk is not None:
            lam = None if at_init is None else at_init.lambda_max()
            if lam is None:
                raise ValueError("lr_ntk needs the seed's empirical NTK at init")
            lr = p.lr_ntk * len(at_init.f0_train) / lam
        return TrainOptions(
            optimizer=p.optimizer, lr=lr, momentum=p.momentum, weight_decay=p.weight_decay,
            epochs=p.epochs, steps=p.steps, batch_size=p.batch_size, loss=p.loss, loss_tol=p.loss_tol, amp=p.amp,
        )

    def features(self, net: torch.nn.Module, x: torch.Tensor) -> np.ndarray | None:
        """The network's penultimate features on `x` (n × d): the input of its last Linear layer (the read-out),
        in eval mode; None for a network without a Linear layer (no read-out to probe below)."""
        import torch

        inner = getattr(net, "net", net)  # output_module's wrapper: the trained network, not centre's frozen copy
        readout = None
        for m in inner.modules():
            if isinstance(m, torch.nn.Linear):
                readout = m
        if readout is None:
            return None
        captured: list[torch.Tensor] = []
        handle = readout.register_forward_pre_hook(lambda _m, args: captured.append(args[0].detach().reshape(len(args[0]), -1)))
        was = net.training
        net.eval()
        try:
            with torch.no_grad():
                for i in range(0, x.shape[0], 1024):
                    net(x[i : i + 1024])
        finally:
            handle.remove()
            net.train(was)
        return torch.cat(captured).double().cpu().numpy() if captured else None

    def _fitted(self, net: torch.nn.Module, result: Any, x_ev: torch.Tensor, at_init: AtInit, lr: float,
                x_tr: torch.Tensor | None = None) -> Fitted:
        """One trained seed's Fitted: eval predictions, f_0, theory, info, the divergence error, and with `x_tr` the
        penultimate features (`features`) on the training and evaluation inputs."""
        from compbench.training.minibatch import predict

        preds = predict(net, x_ev).double().cpu().numpy()
        if self.params.ntk_time == "trained":  # every training path (one by one, stacked) ends here
            self._trained_theory(at_init, lr, result.steps)
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
        feats = None
        if x_tr is not None and error is None:
            phi_tr, phi_ev = self.features(net, x_tr), self.features(net, x_ev)
            feats = None if phi_tr is None or phi_ev is None else (phi_tr, phi_ev)
        return Fitted(preds, at_init.f0_train, at_init.f0_eval, info, error, at_init.kernels, at_init.theory,
                      features=feats, kernel_diagonal=at_init.kernel_diagonal)

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Train one network per seed; predictions, f_0 and the empirical NTK at init per seed."""
        x_tr, x_ev, y_tr, in_shape = self._tensors(train, evaluate)
        outputs = self._outputs(train)
        fitted = []
        for seed in seeds:
            net = self._init(seed, in_shape, outputs)
            at_init = self._at_init(net, x_tr, x_ev, y_tr, outputs)
            options = self._train_options(at_init)
            with seeded_rng(seed, self.device):
                result = self._train_one(net, train, x_tr, y_tr, seed, options)
            fitted.append(self._seed_fitted(net, train, result, x_ev, at_init, options.lr, x_tr))
        return fitted

    def _train_one(self, net: torch.nn.Module, train: Batch, x_tr: torch.Tensor, y_tr: torch.Tensor, seed: int,
                   options: TrainOptions) -> Any:
        """Train one seed's network (the per-seed loop's one step a subclass may replace, e.g. on a stream)."""
        from compbench.training.minibatch import train_minibatch

        return train_minibatch(net, x_tr, y_tr, options, seed=seed)

    def _seed_fitted(self, net: torch.nn.Module, train: Batch, result: Any, x_ev: torch.Tensor, at_init: AtInit,
                     lr: float, x_tr: torch.Tensor) -> Fitted:
        """One trained seed's Fitted (`_fitted`); a subclass adds what its training records."""
        return self._fitted(net, result, x_ev, at_init, lr, x_tr)

    def _trained_theory(self, at_init: AtInit, lr: float, steps: int) -> None:
        """The seed's theory at the steps it trained: the linearised network after `steps` full-batch SGD steps."""
        from compbench.theory.linearised import linearised_gd

        n = len(at_init.f0_train)
        if self.params.batch_size < n or at_init.kernels is None or at_init.targets is None:
            raise ValueError(f"ntk_time: trained needs full-batch training (batch_size ≥ {n} training samples, got "
                             f"{self.params.batch_size}) and the dense eNTK Grams")
        K_tt, K_et = at_init.kernels
        y = at_init.targets
        flat = K_tt.shape[0] != n  # the full (n·K × n·K) eNTK: sample-major rows, y flattened
        theory = linearised_gd(
            K_tt, K_et, y.reshape(-1) if flat else y, lr=lr, steps=steps, momentum=self.params.momentum,
            n_samples=n, f0_train=at_init.f0_train.reshape(-1) if flat else at_init.f0_train,
            f0_eval=at_init.f0_eval.reshape(-1) if flat else at_init.f0_eval,
        )
        at_init.theory = theory.reshape(at_init.f0_eval.shape)
        at_init.info["ntk_time"] = f"trained ({steps} steps)"

    def theory_options(self) -> TheoryOptions:
        """MSE → min-norm regression from f_0; logistic → max-margin SVM; cross_entropy and
        categorical_hinge → min-norm regression of the one-hot targets (the theory predicts the
        MSE-on-one-hot network)."""
        if self.params.ntk_time == "trained":
            return TheoryOptions("linearised_gd")
        return TheoryOptions("svm" if self.params.loss == "logistic" else "min_norm")

    def theory_kernel_name(self) -> str:
        """The kernel behind the theory prediction."""
        return "empirical_ntk_at_init" if self.params.theory == "empirical" else "none"
