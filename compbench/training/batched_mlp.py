"""k seeds of one ReLU MLP held as stacked tensors and trained together, full batch.

Member i of the stack is initialised from `torch.Generator().manual_seed(seeds[i])` exactly as a
single network with that seed would be, and its updates touch only its own slice, so a member's
trajectory equals training that seed alone (up to float rounding of batched matmuls).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import torch

Layer = tuple[torch.Tensor, torch.Tensor | None]  # weights (k, fan_in, fan_out), bias (k, 1, fan_out)


def init_stacked_mlp(
    seeds: list[int],
    d_in: int,
    width: int,
    depth: int,
    init_scale: float,
    bias: bool = True,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
) -> list[Layer]:
    """Paper init per layer: W ~ N(0, (σ·√(2/fan_in))²), b ~ U(±σ/√fan_in); one member per seed."""
    dims = [d_in] + [width] * depth + [1]
    layers: list[Layer] = []
    gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
    for fan_in, fan_out in zip(dims[:-1], dims[1:]):
        w_std = init_scale * (2.0 / fan_in) ** 0.5
        b_bound = init_scale / fan_in**0.5
        ws, bs = [], []
        for g in gens:
            ws.append(torch.randn(fan_in, fan_out, generator=g, dtype=torch.float64) * w_std)
            if bias:
                bs.append((torch.rand(1, fan_out, generator=g, dtype=torch.float64) * 2 - 1) * b_bound)
        w = torch.stack(ws).to(dtype=dtype, device=device)
        b = torch.stack(bs).to(dtype=dtype, device=device) if bias else None
        layers.append((w, b))
    return layers


def stacked_forward(layers: list[Layer], x: torch.Tensor) -> torch.Tensor:
    """Outputs (k, n) of every member on shared inputs x (n, d)."""
    h = x.unsqueeze(0).expand(layers[0][0].shape[0], -1, -1)
    for i, (w, b) in enumerate(layers):
        h = torch.bmm(h, w) if b is None else torch.baddbmm(b, h, w)
        if i < len(layers) - 1:
            h = torch.relu(h)
    return h.squeeze(-1)


def member_module(layers: list[Layer], i: int) -> torch.nn.Module:
    """An ordinary nn.Sequential holding member i's parameters (e.g. for its empirical NTK)."""
    mods: list[torch.nn.Module] = []
    for j, (w, b) in enumerate(layers):
        lin = torch.nn.Linear(w.shape[1], w.shape[2], bias=b is not None, dtype=w.dtype, device=w.device)
        with torch.no_grad():
            lin.weight.copy_(w[i].T)
            if b is not None:
                lin.bias.copy_(b[i, 0])
        mods.append(lin)
        if j < len(layers) - 1:
            mods.append(torch.nn.ReLU())
    mods.append(torch.nn.Flatten(0))
    return torch.nn.Sequential(*mods)


@dataclass
class TrainResult:
    """Per-member outcome of batched training."""

    steps: list[int]
    final_loss: list[float]
    converged: list[bool]
    diverged: list[bool]
    loss_history: list[list[float]] = field(default_factory=list)


def _member_loss(out: torch.Tensor, y: torch.Tensor, loss: str) -> torch.Tensor:
    if loss == "mse":
        return ((out - y) ** 2).mean(dim=1)
    return torch.nn.functional.softplus(-y * out).mean(dim=1)


def train_stacked(
    layers: list[Layer],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    loss: Literal["mse", "logistic"] = "mse",
    optimizer: Literal["gd", "adam"] = "gd",
    lr: float = 0.01,
    max_steps: int = 10_000,
    loss_tol: float = 1e-4,
    offset: torch.Tensor | None = None,
) -> TrainResult:
    """Full-batch training of every member; each stops alone when its loss < loss_tol or diverges.

    `offset` (k, n) is subtracted from the outputs, e.g. the initial function for a centred model.
    """
    k = layers[0][0].shape[0]
    params = [p for layer in layers for p in layer if p is not None]
    for p in params:
        p.requires_grad_(True)
    active = torch.ones(k, dtype=torch.bool, device=x.device)
    steps = [max_steps] * k
    final = [float("nan")] * k
    converged, diverged = [False] * k, [False] * k
    adam_m = [torch.zeros_like(p) for p in params] if optimizer == "adam" else []
    adam_v = [torch.zeros_like(p) for p in params] if optimizer == "adam" else []
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    per_member = torch.zeros(k)
    for step in range(max_steps + 1):
        out = stacked_forward(layers, x)
        if offset is not None:
            out = out - offset
        per_member = _member_loss(out, y, loss)
        lv = per_member.detach()
        done = active & (lv < loss_tol)
        bad = active & ~torch.isfinite(lv)
        if bool(done.any()) or bool(bad.any()) or step == max_steps:
            for i in torch.nonzero(done | bad | (active if step == max_steps else done), as_tuple=True)[0].tolist():
                steps[i], final[i] = step, float(lv[i])
                converged[i], diverged[i] = bool(done[i]), bool(bad[i])
            active &= ~(done | bad)
        if step == max_steps or not bool(active.any()):
            break
        grads = torch.autograd.grad(per_member.sum(), params)
        with torch.no_grad():
            mask = active.to(x.dtype)
            for j, (p, g) in enumerate(zip(params, grads)):
                m = mask.view(k, *([1] * (p.dim() - 1)))
                if optimizer == "gd":
                    p.sub_(lr * g * m)
                else:
                    t = step + 1
                    adam_m[j].mul_(beta1).add_((1 - beta1) * g)
                    adam_v[j].mul_(beta2).add_((1 - beta2) * g * g)
                    upd = (adam_m[j] / (1 - beta1**t)) / ((adam_v[j] / (1 - beta2**t)).sqrt() + eps)
                    p.sub_(lr * upd * m)
    for p in params:
        p.requires_grad_(False)
    return TrainResult(steps=steps, final_loss=final, converged=converged, diverged=diverged)
