"""Minibatch training of one torch network with a scalar output (the deep image adapters' loop).

Seeded data order (a `torch.Generator` per run, so a seed gives the same batches on any device),
SGD (with momentum) or Adam, MSE or logistic loss (labels ±1: mean log(1 + exp(−f·y)), the
reference's "crossentropy"), early stopping when an epoch's mean training loss falls below
`loss_tol`, and a stop on a non-finite loss (reported as diverged). Mixed precision (bfloat16
autocast, or float16 with a gradient scaler where bfloat16 is unsupported) is used on CUDA only.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Literal

import torch

__all__ = ["MinibatchResult", "batches", "loss_fn", "make_optimizer", "predict", "train_minibatch"]


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
    """Mean MSE, or mean logistic loss log(1 + exp(−out·y)) for ±1 labels."""
    if out.dtype in (torch.float16, torch.bfloat16):  # autocast outputs: the loss in float32
        out = out.float()
    y = y.to(out.dtype)
    if kind == "mse":
        return torch.mean((out - y) ** 2)
    if kind == "logistic":
        return torch.mean(torch.nn.functional.softplus(-out * y))
    raise ValueError(f"unknown loss {kind!r} (mse or logistic)")


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


def train_minibatch(
    model: torch.nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    optimizer: Literal["sgd", "adam"] = "sgd",
    lr: float = 1e-3,
    momentum: float = 0.0,
    weight_decay: float = 0.0,
    epochs: int = 100,
    batch_size: int = 128,
    loss: Literal["mse", "logistic"] = "mse",
    loss_tol: float = 0.0,
    seed: int = 0,
    amp: bool = True,
) -> MinibatchResult:
    """Train `model` (outputs one scalar per sample) in place on (x, y); x and y on the model's device."""
    start = time.perf_counter()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = make_optimizer(params, optimizer, lr, momentum, weight_decay)
    gen = torch.Generator().manual_seed(int(seed))
    autocast, scaler = _autocast(x.device, amp)
    y = y.float()
    n = x.shape[0]
    history: list[float] = []
    steps, converged, diverged = 0, False, False
    model.train()
    for _ in range(epochs):
        total = 0.0
        for idx in batches(n, batch_size, gen):
            idx = idx.to(x.device)
            with autocast:
                out = model(x[idx])
            batch_loss = loss_fn(loss, out.reshape(-1), y[idx])
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
            steps += 1
            total += float(batch_loss.detach()) * len(idx)
        if diverged:
            history.append(float("nan"))
            break
        history.append(total / n)
        if history[-1] < loss_tol:
            converged = True
            break
    model.eval()
    final = history[-1] if history else float("nan")
    return MinibatchResult(len(history), steps, final, converged, diverged, time.perf_counter() - start, history)


@torch.no_grad()
def predict(model: torch.nn.Module, x: torch.Tensor, batch_size: int = 1024) -> torch.Tensor:
    """Eval-mode outputs (n,) in full precision, in chunks."""
    was = model.training
    model.eval()
    try:
        outs = [model(x[i : i + batch_size]).reshape(-1) for i in range(0, x.shape[0], batch_size)]
    finally:
        model.train(was)
    return torch.cat(outs).float()
