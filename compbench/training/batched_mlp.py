"""k seeds of one ReLU MLP held as stacked tensors and trained together, full batch.

Member i of the stack is initialised from `torch.Generator().manual_seed(seeds[i])` exactly as a
single network with that seed would be, and its updates touch only its own slice, so a member's
trajectory equals training that seed alone (up to float rounding of batched matmuls).

Outputs: one unit (`d_out` = 1) gives outputs (k, n), the scalar path with its width-1 readout;
K > 1 units give (k, n, K). Losses, per member:

* ``mse``: (1/n) Σ_i ‖f(x_i) − y_i‖², i.e. the squared error *summed over outputs* and averaged
  over samples (for K = 1 the plain mean squared error). Summing over outputs keeps each output's
  gradient what it would be in a scalar network, so the same learning rate is as fast and as
  stable for any K (in the lazy regime, where the NTK is shared by the outputs, each output
  trains exactly like a scalar network); targets (n,) for K = 1, (n, K) otherwise.
* ``logistic``: mean softplus(−y·f), scalar outputs and ±1 targets only.
* ``cross_entropy``: mean over samples of −log softmax(f(x_i))[y_i], integer classes y (n,) and
  K ≥ 2 logits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import torch

Layer = tuple[torch.Tensor, torch.Tensor | None]  # weights (k, fan_in, fan_out), bias (k, 1, fan_out)
Loss = Literal["mse", "logistic", "cross_entropy"]
LOSSES = ("mse", "logistic", "cross_entropy")


def init_stacked_mlp(
    seeds: list[int],
    d_in: int,
    width: int,
    depth: int,
    init_scale: float,
    bias: bool = True,
    dtype: torch.dtype = torch.float32,
    device: str = "cpu",
    d_out: int = 1,
) -> list[Layer]:
    """Paper init per layer: W ~ N(0, (σ·√(2/fan_in))²), b ~ U(±σ/√fan_in); one member per seed."""
    if d_out < 1:
        raise ValueError(f"d_out must be ≥ 1, got {d_out}")
    dims = [d_in] + [width] * depth + [d_out]
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
    """Outputs (k, n) of every member on shared inputs x (n, d); (k, n, K) with K > 1 output units."""
    return _forward(layers, x)[1]


def stacked_features(layers: list[Layer], x: torch.Tensor) -> torch.Tensor:
    """Every member's penultimate activations (k, n, H), the read-out's input: x itself (k copies) for a one-layer net."""
    last = _forward(layers, x)[0][-1]
    return last if last.dim() == 3 else last.unsqueeze(0).expand(layers[0][0].shape[0], -1, -1)


def n_outputs(layers: list[Layer]) -> int:
    """Output units of the stacked network."""
    return int(layers[-1][0].shape[2])


def _forward(layers: list[Layer], x: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
    """Every layer's input (layer 0's is x, shared by all members) and the outputs (k, n) or (k, n, K)."""
    acts = [x]
    for i, (w, b) in enumerate(layers):
        # layer 0's input is shared: expanded with stride 0, not copied
        inp = acts[-1].unsqueeze(0).expand(w.shape[0], -1, -1) if i == 0 else acts[-1]
        if i == len(layers) - 1 and w.shape[2] == 1:
            return acts, _readout(inp, w, b)
        pre = torch.bmm(inp, w) if b is None else torch.baddbmm(b, inp, w)
        if i == len(layers) - 1:
            return acts, pre  # K > 1 outputs (a single one took the readout above)
        acts.append(pre.clamp_(min=0))
    raise ValueError("an MLP needs at least one layer")


def _readout(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    """(k, n) outputs of a width-1 readout: as (1 × H)·(H × n) products, since a batched
    matrix-vector bmm with a trailing dimension of 1 is several times slower on the CPU."""
    if b is None:
        return torch.bmm(w.transpose(1, 2), h.transpose(1, 2)).squeeze(1)
    return torch.baddbmm(b.reshape(-1, 1, 1), w.transpose(1, 2), h.transpose(1, 2)).squeeze(1)


def member_module(layers: list[Layer], i: int) -> torch.nn.Module:
    """An ordinary nn.Sequential holding member i's parameters (e.g. for its empirical NTK).

    Its output is (n,) for one output unit, (n, K) for K > 1.
    """
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
    if n_outputs(layers) == 1:
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


def check_targets(layers: list[Layer], x: torch.Tensor, y: torch.Tensor, loss: str, offset: torch.Tensor | None) -> None:
    """Raise ValueError unless the loss fits the network's outputs and y (and offset) their shapes."""
    if loss not in LOSSES:
        raise ValueError(f"unknown loss {loss!r}; known: {', '.join(LOSSES)}")
    k, n, K = layers[0][0].shape[0], x.shape[0], n_outputs(layers)
    out_shape = (k, n) if K == 1 else (k, n, K)
    if loss == "cross_entropy":
        if K < 2:
            raise ValueError(f"loss 'cross_entropy' needs ≥ 2 output units (one logit per class), the network has {K}")
        if y.shape != (n,) or y.is_floating_point() or y.is_complex() or y.dtype == torch.bool:
            raise ValueError(f"loss 'cross_entropy' needs integer class targets of shape ({n},), got {y.dtype} {tuple(y.shape)}")
        if n and (int(y.min()) < 0 or int(y.max()) >= K):
            raise ValueError(f"class targets must lie in 0..{K - 1}, got {int(y.min())}..{int(y.max())}")
    elif loss == "logistic" and K != 1:
        raise ValueError(f"loss 'logistic' takes one output unit and ±1 targets, the network has {K} outputs; use cross_entropy or mse")
    else:
        want = (n,) if K == 1 else (n, K)
        if tuple(y.shape) != want:
            raise ValueError(f"loss {loss!r} with {K} output unit(s) needs targets of shape {want}, got {tuple(y.shape)}")
    if offset is not None and tuple(offset.shape) != out_shape:
        raise ValueError(f"offset must have the outputs' shape {out_shape}, got {tuple(offset.shape)}")


@torch.no_grad()
def _forward_loss(
    layers: list[Layer], x: torch.Tensor, y: torch.Tensor, loss: str, offset: torch.Tensor | None
) -> tuple[list[torch.Tensor], torch.Tensor, torch.Tensor]:
    """Layer inputs, per-member loss (k,) and the loss gradient at the outputs ((k, n) or (k, n, K))."""
    n = x.shape[0]
    acts, out = _forward(layers, x)
    if offset is not None:
        out = out - offset
    if loss == "mse":
        diff = out - y
        sq = diff * diff
        # summed over outputs, averaged over samples (the module docstring says why)
        per_member = sq.mean(dim=1) if sq.dim() == 2 else sq.sum(dim=2).mean(dim=1)
        dout = diff.mul_(2.0 / n)
    elif loss == "cross_entropy":
        idx = y.long().view(1, n, 1).expand(out.shape[0], n, 1)
        logp = torch.log_softmax(out, dim=2)
        picked = logp.gather(2, idx)
        per_member = -picked.squeeze(2).mean(dim=1)
        # ∂/∂f of the mean cross-entropy: (softmax − one-hot) / n
        dout = logp.exp_()
        dout.scatter_(2, idx, picked.exp_().sub_(1.0))
        dout.div_(n)
    else:
        margin = -y * out
        per_member = torch.nn.functional.softplus(margin).mean(dim=1)
        dout = (-y * torch.sigmoid(margin)).div_(n)
    return acts, per_member, dout


@torch.no_grad()
def _backward(layers: list[Layer], acts: list[torch.Tensor], dout: torch.Tensor, lr: float | None) -> list[torch.Tensor]:
    """Backprop from the output gradient: the gradients (lr None), or a GD step applied in place.

    In place, each layer's update is fused into its gradient product (baddbmm with alpha −lr),
    after the layer's weights have been used to propagate the gradient further down.
    """
    k = dout.shape[0]
    grads: list[torch.Tensor] = []
    # (k, n, K): gradient at the current layer's output (K = 1: dout is (k, n))
    delta = dout.unsqueeze(-1) if dout.dim() == 2 else dout
    for i in range(len(layers) - 1, -1, -1):
        w, b = layers[i]
        inp = acts[i]
        width_one = delta.shape[2] == 1 and i > 0
        # gradient product as (target, left, right): target += left @ right
        if i == 0:
            target, left, right = w, inp.T.unsqueeze(0).expand(k, -1, -1), delta
        elif width_one:  # (1 × n)·(n × H) into the transposed (H × 1) weight: see _readout
            target, left, right = w.transpose(1, 2), delta.transpose(1, 2), inp
        else:
            target, left, right = w, inp.transpose(1, 2), delta
        gb = delta.sum(dim=1, keepdim=True) if b is not None else None
        if i > 0:
            # delta @ wᵀ (an outer product for a width-1 layer), then ReLU's backward (zero where
            # the unit was off) in one fused pass.
            back = delta * w.transpose(1, 2) if width_one else torch.bmm(delta, w.transpose(1, 2))
            next_delta = torch.ops.aten.threshold_backward(back, inp, 0)
        if lr is None:
            gw = torch.bmm(left, right)
            grads = [gw.transpose(1, 2) if width_one else gw] + ([gb] if gb is not None else []) + grads
        else:
            target.baddbmm_(left, right, alpha=-lr)
            if gb is not None:
                b.add_(gb, alpha=-lr)
        if i > 0:
            delta = next_delta
    return grads


@torch.no_grad()
def loss_and_grads(
    layers: list[Layer], x: torch.Tensor, y: torch.Tensor, loss: str = "mse", offset: torch.Tensor | None = None
) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """Per-member loss (k,) and gradients of every parameter, by hand-written backprop.

    Equivalent to autograd on the sum of member losses (tests check it), with fewer passes over
    the (k, n, width) activations, which is what bounds a step's time on a CPU.
    """
    check_targets(layers, x, y, loss, offset)
    acts, per_member, dout = _forward_loss(layers, x, y, loss, offset)
    return per_member, _backward(layers, acts, dout, None)


def train_stacked(
    layers: list[Layer],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    loss: Loss = "mse",
    optimizer: Literal["gd", "adam"] = "gd",
    lr: float = 0.01,
    max_steps: int = 10_000,
    loss_tol: float = 1e-4,
    offset: torch.Tensor | None = None,
    batch_size: int | None = None,
    order_seed: int = 0,
) -> TrainResult:
    """Training of every member, full batch or on minibatches; each stops alone when its loss < loss_tol or diverges.

    `offset` (the outputs' shape: (k, n), or (k, n, K)) is subtracted from the outputs, e.g. the
    initial function for a centred model. Targets: see the module docstring. `batch_size`: each
    step takes the next `batch_size` samples of a permutation redrawn every epoch from
    `order_seed` (the last batch of an epoch may be smaller); the order is shared by the members,
    so a member still trains exactly as it would alone. The stop test then reads the step's batch
    loss, and `final_loss` is the loss on every sample.
    """
    check_targets(layers, x, y, loss, offset)
    if batch_size is not None and batch_size < 1:
        raise ValueError(f"batch_size must be ≥ 1 (or None: full batch), got {batch_size}")
    n = x.shape[0]
    minibatch = batch_size is not None and batch_size < n
    order = torch.Generator().manual_seed(int(order_seed))
    perm, at = torch.arange(n), n
    k = layers[0][0].shape[0]
    params = [p for layer in layers for p in layer if p is not None]
    active = torch.ones(k, dtype=torch.bool, device=x.device)
    steps = [max_steps] * k
    final = [float("nan")] * k
    converged, diverged = [False] * k, [False] * k
    adam_m = [torch.zeros_like(p) for p in params] if optimizer == "adam" else []
    adam_v = [torch.zeros_like(p) for p in params] if optimizer == "adam" else []
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    running = list(range(k))  # members still training (a Python list: one host sync per step)
    for step in range(max_steps + 1):
        if minibatch:
            if at >= n:
                perm, at = torch.randperm(n, generator=order).to(x.device), 0
            idx, at = perm[at:at + batch_size], at + batch_size
            acts, lv, dout = _forward_loss(layers, x[idx], y[idx], loss, None if offset is None else offset[:, idx])
        else:
            acts, lv, dout = _forward_loss(layers, x, y, loss, offset)
        losses = lv.tolist()
        stopped = [i for i in running if not math.isfinite(losses[i]) or losses[i] < loss_tol or step == max_steps]
        for i in stopped:
            steps[i], final[i] = step, losses[i]
            diverged[i] = not math.isfinite(losses[i])
            converged[i] = not diverged[i] and losses[i] < loss_tol
        if stopped:
            running = [i for i in running if i not in stopped]
            active[stopped] = False
        if not running:
            break
        if optimizer == "gd":
            # A stopped member gets a zero output gradient, hence exactly zero updates, so one
            # fused in-place step serves every member.
            if len(running) < k:
                dout = torch.where(active.view(k, *([1] * (dout.dim() - 1))), dout, 0.0)
            _backward(layers, acts, dout, lr)
            continue
        grads = _backward(layers, acts, dout, None)
        with torch.no_grad():
            mask = active.to(x.dtype)
            for j, (p, g) in enumerate(zip(params, grads)):
                m = mask.view(k, *([1] * (p.dim() - 1)))
                t = step + 1
                adam_m[j].mul_(beta1).add_((1 - beta1) * g)
                adam_v[j].mul_(beta2).add_((1 - beta2) * g * g)
                upd = (adam_m[j] / (1 - beta1**t)) / ((adam_v[j] / (1 - beta2**t)).sqrt() + eps)
                p.sub_(lr * upd * m)
    if minibatch:
        # A stopped member's parameters have not moved since it stopped: its loss on every sample now is the one then.
        full = _forward_loss(layers, x, y, loss, offset)[1].tolist()
        final = [b if d else f for f, b, d in zip(full, final, diverged)]
    return TrainResult(steps=steps, final_loss=final, converged=converged, diverged=diverged)
