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


@torch.no_grad()
def loss_and_grads(
    layers: list[Layer], x: torch.Tensor, y: torch.Tensor, loss: str = "mse", offset: torch.Tensor | None = None
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Per-member loss (k,) and gradients of every parameter, by hand-written backprop.

    Equivalent to autograd on the sum of member losses (tests check it), with fewer passes over
    the (k, n, width) activations, which is what bounds a step's time on a CPU.
    """
    k, n = layers[0][0].shape[0], x.shape[0]
    acts = [x]  # acts[l]: input of layer l; layer 0's input is shared by all members
    h = None
    for i, (w, b) in enumerate(layers):
        pre = torch.matmul(acts[-1], w) if i == 0 else torch.bmm(acts[-1], w)
        if b is not None:
            pre.add_(b)
        if i < len(layers) - 1:
            acts.append(pre.clamp_(min=0))
        else:
            h = pre
    out = h.squeeze(-1)
    if offset is not None:
        out = out - offset
    if loss == "mse":
        diff = out - y
        per_member = (diff * diff).mean(dim=1)
        dout = diff.mul_(2.0 / n)
    else:
        margin = -y * out
        per_member = torch.nn.functional.softplus(margin).mean(dim=1)
        dout = (-y * torch.sigmoid(margin)).div_(n)
    grads: list[torch.Tensor] = []
    delta = dout.unsqueeze(-1)  # (k, n, 1): gradient at the current layer's output
    for i in range(len(layers) - 1, -1, -1):
        w, b = layers[i]
        inp = acts[i]
        gw = torch.matmul(inp.T, delta) if i == 0 else torch.bmm(inp.transpose(1, 2), delta)
        layer_grads = [gw] + ([delta.sum(dim=1, keepdim=True)] if b is not None else [])
        grads = layer_grads + grads
        if i > 0:
            # delta @ wᵀ, then ReLU's backward (zero where the unit was off) in one fused pass.
            delta = torch.ops.aten.threshold_backward(torch.bmm(delta, w.transpose(1, 2)), inp, 0)
    return per_member, grads


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
    active = torch.ones(k, dtype=torch.bool, device=x.device)
    steps = [max_steps] * k
    final = [float("nan")] * k
    converged, diverged = [False] * k, [False] * k
    adam_m = [torch.zeros_like(p) for p in params] if optimizer == "adam" else []
    adam_v = [torch.zeros_like(p) for p in params] if optimizer == "adam" else []
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    per_member = torch.zeros(k)
    for step in range(max_steps + 1):
        per_member, grads = loss_and_grads(layers, x, y, loss, offset)
        lv = per_member
        done = active & (lv < loss_tol)
        bad = active & ~torch.isfinite(lv)
        if bool(done.any()) or bool(bad.any()) or step == max_steps:
            for i in torch.nonzero(done | bad | (active if step == max_steps else done), as_tuple=True)[0].tolist():
                steps[i], final[i] = step, float(lv[i])
                converged[i], diverged[i] = bool(done[i]), bool(bad[i])
            active &= ~(done | bad)
        if step == max_steps or not bool(active.any()):
            break
        with torch.no_grad():
            mask = active.to(x.dtype)
            for j, (p, g) in enumerate(zip(params, grads)):
                m = mask.view(k, *([1] * (p.dim() - 1)))
                if optimizer == "gd":
                    p.addcmul_(g, m, value=-lr)
                else:
                    t = step + 1
                    adam_m[j].mul_(beta1).add_((1 - beta1) * g)
                    adam_v[j].mul_(beta2).add_((1 - beta2) * g * g)
                    upd = (adam_m[j] / (1 - beta1**t)) / ((adam_v[j] / (1 - beta2**t)).sqrt() + eps)
                    p.sub_(lr * upd * m)
    return TrainResult(steps=steps, final_loss=final, converged=converged, diverged=diverged)
