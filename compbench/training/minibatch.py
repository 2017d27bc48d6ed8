"""Minibatch training of one torch network (the deep image adapters' loop).

The network outputs one value per sample ((n,), targets (n,)) or K values ((n, K)): targets (n, K)
for vector MSE, or integer classes (n,) for cross-entropy or the categorical hinge on K scores.
Seeded data order (a
`torch.Generator` per run, so a seed gives the same batches on any device), SGD (with momentum) or
Adam, MSE (with K outputs the squared error summed over outputs, averaged over samples, as the
stacked MLP: each output then trains as a scalar network would), logistic loss (labels ±1: mean log(1 + exp(−f·y)), the
reference's "crossentropy"), softmax cross-entropy or Keras' categorical hinge, a budget of epochs
or of optimizer steps,
early stopping when an epoch's mean training loss falls below `loss_tol`, and a stop on a
non-finite loss (reported as diverged). Mixed precision (bfloat16 autocast, or float16 with a
gradient scaler where bfloat16 is unsupported) is used on CUDA only.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Literal

import torch

from compbench.losses import CLASS_LOSSES

__all__ = ["CLASS_LOSSES", "LOSSES", "MinibatchResult", "batches", "check_targets", "epoch_budget", "loss_fn", "make_optimizer", "predict", "shaped_output",
           "TrainOptions", "train_minibatch"]

LOSSES = ("mse", "logistic", "cross_entropy", "categorical_hinge")


@dataclass
class MinibatchResult:
    """What one training run did."""

    epochs: int
    steps: int
    final_loss: float
    converged: bool
    diverged: bool
    seconds: float
    loss_history: list[float] = field(default_factory=list)


def loss_fn(kind: str, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """MSE (1/B) Σ_i ‖out_i − y_i‖² (summed over outputs for (B, K) targets), mean logistic loss
    log(1 + exp(−out·y)) for ±1 labels, or, for
    scores `out` (B, K) against integer classes `y` (B,), the mean softmax cross-entropy or Keras'
    categorical hinge max(0, 1 + max(0, max_{j≠y} out_j) − out_y)."""
    if out.dtype in (torch.float16, torch.bfloat16):  # autocast outputs: the loss in float32
        out = out.float()
    if kind == "cross_entropy":
        # F.cross_entropy's own computation (log-softmax, then the target's entry), written with
        # gather so that torch.vmap batches it over the members of a stack.
        logp = torch.log_softmax(out, dim=-1)
        return -torch.mean(logp.gather(-1, y.long().unsqueeze(-1)))
    if kind == "categorical_hinge":
        # tf.keras.losses.categorical_hinge on one-hot rows t: neg = max_j (1 − t_j)·out_j (the true
        # class enters as 0, hence the floor at 0), pos = out_y; loss max(0, neg − pos + 1).
        onehot = torch.nn.functional.one_hot(y.long(), out.shape[-1]).to(out.dtype)
        pos = (onehot * out).sum(-1)
        neg = ((1 - onehot) * out).amax(-1)
        return torch.mean(torch.clamp_min(neg - pos + 1, 0))
    y = y.to(out.dtype)
    if kind == "mse":
        if y.dim() == 2:  # K outputs: summed over outputs, averaged over samples
            return torch.mean(torch.sum((out - y) ** 2, dim=-1))
        return torch.mean((out - y) ** 2)
    if kind == "logistic":
        return torch.mean(torch.nn.functional.softplus(-out * y))
    raise ValueError(f"unknown loss {kind!r} (one of {', '.join(LOSSES)})")


def check_targets(kind: str, y: torch.Tensor) -> torch.Tensor:
    """Targets as the trainers use them: integer classes (n,) for cross_entropy and categorical_hinge,
    else float32 (n,) or (n, K)."""
    if kind not in LOSSES:
        raise ValueError(f"unknown loss {kind!r} (one of {', '.join(LOSSES)})")
    if kind in CLASS_LOSSES:
        if y.dim() != 1:
            raise ValueError(f"{kind} needs integer class targets of shape (n,), got shape {tuple(y.shape)}")
        classes = y.long()
        if y.is_floating_point() and not torch.equal(classes.to(y.dtype), y):
            raise ValueError(f"{kind} needs integer class targets, got non-integer values")
        if classes.numel() and int(classes.min()) < 0:
            raise ValueError(f"{kind} needs class targets ≥ 0")
        return classes
    if y.dim() not in (1, 2):
        raise ValueError(f"{kind} needs targets of shape (n,) or (n, K), got shape {tuple(y.shape)}")
    if kind == "logistic" and y.dim() != 1:
        raise ValueError(f"the logistic loss needs ±1 labels of shape (n,), got shape {tuple(y.shape)}")
    return y.float()


def shaped_output(kind: str, out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The network's outputs on a batch laid out as the loss compares them with targets `y`:
    (…, B, K) scores for the class losses, else the shape of `y` (leading dimensions: a stack's members)."""
    if kind in CLASS_LOSSES:
        if out.dim() != y.dim() + 1 or out.shape[:-1] != y.shape:
            raise ValueError(f"{kind} needs K scores per sample, got outputs {tuple(out.shape)} for targets {tuple(y.shape)}")
        return out
    if out.numel() != y.numel():
        raise ValueError(f"the network's outputs {tuple(out.shape)} do not match the targets {tuple(y.shape)}")
    return out.reshape(y.shape)


def epoch_budget(n: int, batch_size: int, epochs: int, steps: int | None) -> int:
    """Epochs to run: `epochs`, or with a step budget enough epochs for `steps` optimizer steps."""
    if steps is None:
        return epochs
    if steps < 1:
        raise ValueError(f"steps must be ≥ 1, got {steps}")
    return math.ceil(steps / max(1, math.ceil(n / batch_size)))


def batches(n: int, batch_size: int, generator: torch.Generator) -> list[torch.Tensor]:
    """One epoch's shuffled index batches: ⌈n / batch_size⌉ batches of near-equal size (never 1 unless n is)."""
    perm = torch.randperm(n, generator=generator)
    k = max(1, math.ceil(n / batch_size))
    return list(torch.tensor_split(perm, k))


def _autocast(device: torch.device, amp: bool):
    if not (amp and device.type == "cuda"):
        return contextlib.nullcontext(), None
    if torch.cuda.is_bf16_supported():
        return torch.autocast("cuda", dtype=torch.bfloat16), None
    return torch.autocast("cuda", dtype=torch.float16), torch.amp.GradScaler("cuda")


def make_optimizer(params: list[torch.Tensor], optimizer: str, lr: float, momentum: float, weight_decay: float) -> torch.optim.Optimizer:
    """SGD (with momentum) or Adam over `params`."""
    if optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=weight_decay)
    if optimizer == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=weight_decay)
    raise ValueError(f"unknown optimizer {optimizer!r} (sgd or adam)")


@dataclass(frozen=True)
class TrainOptions:
    """A minibatch training recipe, all but the seed: the same for one network (`train_minibatch`) and for the
    seeds trained together (`train_stacked_convnet`, `train_stacked`), so a stack trains each seed as alone."""

    optimizer: Literal["sgd", "adam"] = "sgd"
    lr: float = 1e-3
    momentum: float = 0.0
    weight_decay: float = 0.0
    epochs: int = 100
    batch_size: int = 128
    loss: Literal["mse", "logistic", "cross_entropy", "categorical_hinge"] = "mse"
    loss_tol: float = 0.0
    amp: bool = True
    steps: int | None = None  # a budget of optimizer steps in all, replacing `epochs`


def train_minibatch(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    options: TrainOptions = TrainOptions(),
    *,
    seed: int = 0,
) -> MinibatchResult:
    """Train `model` in place on (x, y); x and y on the model's device.

    Targets: (n,) for one output per sample, (n, K) for K outputs (MSE), integer classes (n,) for
    `cross_entropy` / `categorical_hinge` on K scores. `steps` (optimizer steps in all) replaces `epochs`: epochs of
    shuffled batches until that many steps, the last epoch cut short (its loss is the mean over the
    samples it saw).
    """
    start = time.perf_counter()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(params, options.optimizer, options.lr, options.momentum, options.weight_decay)
    gen = torch.Generator().manual_seed(int(seed))
    autocast, scaler = _autocast(x.device, options.amp)
    y = check_targets(options.loss, y)
    n = x.shape[0]
    history: list[float] = []
    n_steps, converged, diverged = 0, False, False
    model.train()
    for _ in range(epoch_budget(n, options.batch_size, options.epochs, options.steps)):
        total, seen = 0.0, 0
        for idx in batches(n, options.batch_size, gen):
            if options.steps is not None and n_steps >= options.steps:
                break
            idx = idx.to(x.device)
            with autocast:
                out = model(x[idx])
            batch_loss = loss_fn(options.loss, shaped_output(options.loss, out, y[idx]), y[idx])
            if not torch.isfinite(batch_loss):
                diverged = True
                break
            opt.zero_grad(set_to_none=True)
            if scaler is not None:
                scaler.scale(batch_loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                batch_loss.backward()
                opt.step()
            n_steps += 1
            total += float(batch_loss.detach()) * len(idx)
            seen += len(idx)
        if diverged:
            history.append(float("nan"))
            break
        history.append(total / seen)
        if history[-1] < options.loss_tol:
            converged = True
            break
    model.eval()
    final = history[-1] if history else float("nan")
    return MinibatchResult(len(history), n_steps, final, converged, diverged, time.perf_counter() - start, history)


@torch.no_grad()
def predict(model: torch.nn.Module, x: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """Eval-mode outputs, (n,) or (n, K) as the model returns them, in full precision, in chunks."""
    was = model.training
    model.eval()
    try:
        outs = [model(x[i : i + batch_size]) for i in range(0, x.shape[0], batch_size)]
    finally:
        model.train(was)
    return torch.cat(outs).float()
