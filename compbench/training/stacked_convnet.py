"""k seeds of one ConvNet held as one grouped model and trained together, each on its own batches.

Outputs: one value per sample, or K (vector MSE, or a class loss on K scores): the readout is one
more batched matmul with K columns, so K outputs cost no per-output loop.

Member i's channels are the i-th group of every layer: `Conv2d(groups=k·g)` on the members'
channels side by side, `BatchNorm2d(k·C)` (per-channel statistics are per-member statistics),
pooling and activations channel-wise, and the dense head as batched matmuls (`baddbmm`) after the
flatten. No operation mixes groups, so member i's forward and backward are those of its own
network, and since SGD (momentum, weight decay) and Adam act elementwise, one optimizer over the
stacked parameters is k separate optimizers. Member i draws its batches from its own
`torch.Generator().manual_seed(seeds[i])` exactly as `train_minibatch` would (all members' batches
have the same sizes: they depend only on n and the batch size), so each member's trajectory equals
training that seed alone, up to the float rounding of grouped vs ungrouped kernels.

A member stops alone (early stopping on `loss_tol`, or a non-finite loss): its state at that moment
is kept aside and restored at the end, and from then on it is left out of every forward pass (its
parameters are not even read, so nothing it holds can reach the others).

Grouped rather than `torch.func.vmap` over `stack_module_state`: BatchNorm's running statistics are
in-place buffer updates, which vmap cannot batch without functionalising the whole model, while a
grouped convolution is one ordinary kernel on every backend, autocast included.

Determinism: a run is bit-reproducible for the same seeds. On one CPU thread a seed's numbers do not
depend on which other seeds share the stack either (a lone member runs beside a ghost copy of
itself, see `_Rows`); with more threads, or on CUDA, the libraries' kernels may split reductions
by the total channel count, so a seed agrees with itself in another stack to float rounding only.
AMP (CUDA only, as in `train_minibatch`): with float16 the members share one GradScaler, so an
overflow in any member skips that step for all of them (bfloat16 needs no scaler).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Sequence
from functools import partial

import torch
import torch.nn.functional as F
from torch import nn

from compbench.training.minibatch import (
    MinibatchResult, TrainOptions, _autocast, batches, check_targets, epoch_budget, loss_fn, make_optimizer, shaped_output,
)

__all__ = ["StackedConvNet", "train_stacked_convnet"]

# Modules that act on each channel (or element) alone, so the grouped layout needs nothing special.
_CHANNELWISE = (
    nn.ReLU, nn.LeakyReLU, nn.ELU, nn.GELU, nn.SiLU, nn.Tanh, nn.Sigmoid, nn.Identity,
    nn.MaxPool2d, nn.AvgPool2d,
)


class _Rows:
    """Which members of the stack one forward pass runs, and how to read and write their rows.

    With `ghost`, the single running member is joined by a detached copy of itself, so that every
    grouped layer still has ≥ 2 groups: the CPU's grouped convolution kernels give member i the
    same numbers for any group count ≥ 2 but not for 1, and a seed's result should not depend on
    whether the others are still training (or on being the cell's only seed).
    """

    def __init__(self, members: torch.Tensor | None, ghost: bool) -> None:
        self.members, self.ghost = members, ghost

    def take(self, t: torch.Tensor | None) -> torch.Tensor | None:
        """The running members' rows of a stacked tensor (a view of all of it where possible)."""
        if t is None:
            return None
        rows = t if self.members is None else t.index_select(0, self.members)
        return torch.cat([rows, rows.detach()]) if self.ghost else rows

    def put(self, t: torch.Tensor, rows: torch.Tensor) -> None:
        """Write rows from `take` (updated in place) back into `t`, unless they were a view of it."""
        if self.members is None and not self.ghost:
            return
        rows = rows[: len(rows) // 2] if self.ghost else rows
        if self.members is None:
            t.copy_(rows)
        else:
            t.index_copy_(0, self.members, rows)


def _stack(tensors: list[torch.Tensor], parameter: bool) -> torch.Tensor:
    out = torch.stack([t.detach() for t in tensors]).clone()
    return nn.Parameter(out) if parameter else out


def _same(mods: Sequence[nn.Module], *attrs: str) -> None:
    for a in attrs:
        values = {repr(getattr(m, a)) for m in mods}
        if len(values) > 1:
            raise ValueError(f"members differ in {type(mods[0]).__name__}.{a}: {sorted(values)}")


class _Layer(nn.Module):
    """One layer of the stack; its tensors have a leading member dimension k."""

    # Names of the stacked tensors, as in the original module's state_dict.
    stacked: tuple[str, ...] = ()

    def member_tensors(self) -> dict[str, torch.Tensor]:
        """The stacked tensors that exist (a layer without bias has none)."""
        return {n: getattr(self, n) for n in self.stacked if getattr(self, n, None) is not None}


class _Conv(_Layer):
    stacked = ("weight", "bias")

    def __init__(self, mods: Sequence[nn.Conv2d]) -> None:
        super().__init__()
        _same(mods, "in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "groups", "padding_mode")
        m = mods[0]
        if m.padding_mode != "zeros":
            raise ValueError(f"stacked Conv2d supports padding_mode='zeros' only, got {m.padding_mode!r}")
        self.stride, self.padding, self.dilation, self.groups = m.stride, m.padding, m.dilation, m.groups
        self.weight = _stack([q.weight for q in mods], True)
        self.bias = _stack([q.bias for q in mods], True) if m.bias is not None else None

    def forward(self, h: torch.Tensor, rows: _Rows) -> torch.Tensor:
        w, b = rows.take(self.weight), rows.take(self.bias)
        k = w.shape[0]
        return F.conv2d(
            h, w.reshape(-1, *w.shape[2:]), None if b is None else b.reshape(-1),
            self.stride, self.padding, self.dilation, self.groups * k,
        )


class _BatchNorm(_Layer):
    stacked = ("weight", "bias", "running_mean", "running_var", "num_batches_tracked")

    def __init__(self, mods: Sequence[nn.BatchNorm2d]) -> None:
        super().__init__()
        _same(mods, "num_features", "eps", "momentum", "affine", "track_running_stats")
        m = mods[0]
        self.eps, self.momentum, self.track = m.eps, m.momentum, m.track_running_stats
        self.weight = _stack([q.weight for q in mods], True) if m.affine else None
        self.bias = _stack([q.bias for q in mods], True) if m.affine else None
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            tensors = [getattr(q, name) for q in mods]
            self.register_buffer(name, None if tensors[0] is None else _stack(tensors, False))

    def forward(self, h: torch.Tensor, rows: _Rows) -> torch.Tensor:
        # nn.BatchNorm's own logic, per member: its running statistics are rows of (k, C) buffers.
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track and self.num_batches_tracked is not None:
            members = rows.members
            if members is None:
                self.num_batches_tracked.add_(1)
                tracked = self.num_batches_tracked[0]
            else:
                self.num_batches_tracked.index_add_(0, members, torch.ones_like(members, dtype=self.num_batches_tracked.dtype))
                tracked = self.num_batches_tracked[members[0]]
            if self.momentum is None:  # a cumulative average; active members have seen equally many batches
                factor = 1.0 / float(tracked)
        use_batch = self.training or self.running_mean is None
        mean = var = None
        if not self.training or self.track:
            mean, var = rows.take(self.running_mean), rows.take(self.running_var)
        w, b = rows.take(self.weight), rows.take(self.bias)
        out = F.batch_norm(
            h,
            None if mean is None else mean.view(-1),
            None if var is None else var.view(-1),
            None if w is None else w.reshape(-1),
            None if b is None else b.reshape(-1),
            use_batch, factor, self.eps,
        )
        if self.training and mean is not None:
            rows.put(self.running_mean, mean)
            rows.put(self.running_var, var)
        return out


class _Linear(_Layer):
    stacked = ("weight", "bias")

    def __init__(self, mods: Sequence[nn.Linear]) -> None:
        super().__init__()
        _same(mods, "in_features", "out_features")
        self.weight = _stack([q.weight for q in mods], True)
        self.bias = _stack([q.bias for q in mods], True) if mods[0].bias is not None else None

    def forward(self, h: torch.Tensor, rows: _Rows) -> torch.Tensor:
        w, b = rows.take(self.weight), rows.take(self.bias)
        if b is None:
            return torch.bmm(h, w.transpose(1, 2))
        return torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))


class _Flatten(_Layer):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.channels = channels

    def forward(self, h: torch.Tensor, rows: _Rows) -> torch.Tensor:
        # (B, k·C, H, W) → (k, B, C·H·W): member i's features in nn.Flatten's (C, H, W) order.
        k = h.shape[1] // self.channels
        return h.reshape(h.shape[0], k, -1).transpose(0, 1)


class _Channelwise(_Layer):
    def __init__(self, mod: nn.Module) -> None:
        super().__init__()
        self.mod = copy.deepcopy(mod)

    def forward(self, h: torch.Tensor, rows: _Rows) -> torch.Tensor:
        return self.mod(h)


class _Grouped(nn.Module):
    """k same-architecture `nn.Sequential` ConvNets as one grouped network."""

    def __init__(self, nets: Sequence[nn.Sequential]) -> None:
        super().__init__()
        if not nets:
            raise ValueError("a stack needs at least one member")
        if not all(isinstance(n, nn.Sequential) for n in nets):
            raise TypeError(f"members must be nn.Sequential, got {sorted({type(n).__name__ for n in nets})}")
        lengths = {len(n) for n in nets}
        if len(lengths) > 1:
            raise ValueError(f"members have different numbers of layers: {sorted(lengths)}")
        self.k = len(nets)
        # The architecture (no storage), for member_module; in a tuple so it is no submodule.
        self.template = (copy.deepcopy(nets[0]).to("meta"),)
        layers: list[_Layer] = []
        dense, channels = False, None
        for j, first in enumerate(nets[0]):
            mods = [n[j] for n in nets]
            if {type(m) for m in mods} != {type(first)}:
                raise ValueError(f"members differ at layer {j}: {sorted({type(m).__name__ for m in mods})}")
            if isinstance(first, nn.Conv2d) and not dense:
                layers.append(_Conv(mods))
                channels = first.out_channels
            elif isinstance(first, nn.BatchNorm2d) and not dense:
                layers.append(_BatchNorm(mods))
            elif isinstance(first, nn.Flatten) and not dense and (first.start_dim, first.end_dim) == (1, -1):
                if channels is None:
                    raise ValueError("stacked ConvNet: Flatten before any Conv2d is not supported")
                layers.append(_Flatten(channels))
                dense = True
            elif isinstance(first, nn.Linear) and dense:
                layers.append(_Linear(mods))
            elif isinstance(first, _CHANNELWISE):
                layers.append(_Channelwise(first))
            else:
                raise ValueError(
                    f"stacked ConvNet: unsupported layer {j} ({first!r}); supported: Conv2d, BatchNorm2d, "
                    "channel-wise activations and pooling, then Flatten(), Linear and activations"
                )
        if not dense:
            raise ValueError("stacked ConvNet: the network must end with Flatten() and a dense head")
        self.layers = nn.ModuleList(layers)
        self.in_channels = next(m.in_channels for m in nets[0] if isinstance(m, nn.Conv2d))

    def forward(self, x: torch.Tensor, members: torch.Tensor | None = None) -> torch.Tensor:
        """Outputs (k_a, B) for per-member inputs x (k_a, B, C, H, W); (k_a, B, K) for K > 1 outputs."""
        k_a, b = x.shape[0], x.shape[1]
        rows = _Rows(members, ghost=k_a == 1)
        if rows.ghost:
            x = x.expand(2, *x.shape[1:])
        h = x.transpose(0, 1).reshape(b, x.shape[0] * x.shape[2], *x.shape[3:])
        for layer in self.layers:
            h = layer(h, rows)
        h = h[:k_a]
        return h.reshape(k_a, b) if h.shape[-1] == 1 else h

    def member_state_dict(self, i: int) -> dict[str, torch.Tensor]:
        """Member i's parameters and buffers under the keys of its original nn.Sequential (views)."""
        return {f"{j}.{name}": t[i] for j, layer in enumerate(self.layers) for name, t in layer.member_tensors().items()}


class StackedConvNet(nn.Module):
    """k seeds of one `nn.Sequential` ConvNet as one grouped model with outputs (k, B), or (k, B, K)
    when the networks have K > 1 outputs.

    `reference`, for a centred network, holds each member's frozen initial copy: the output is
    scale·(net(x) − net_0(x)) with net_0 under no_grad, as `compbench.adapters.deep.scalar_module`.
    """

    def __init__(
        self,
        nets: Sequence[nn.Sequential],
        reference: Sequence[nn.Sequential] | None = None,
        scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.body = _Grouped(nets)
        self.reference = None
        if reference is not None:
            if len(reference) != len(nets):
                raise ValueError(f"{len(nets)} members but {len(reference)} reference networks")
            self.reference = _Grouped(reference).requires_grad_(False)
        self.scale = float(scale)

    @property
    def k(self) -> int:
        """Number of members."""
        return self.body.k

    @property
    def static_reference(self) -> bool:
        """Whether the reference's output on a sample is a fixed function of that sample alone
        (no BatchNorm: its batch statistics and running averages would make it depend on the batch)."""
        return self.reference is not None and not any(isinstance(m, _BatchNorm) for m in self.reference.layers)

    def forward(self, x: torch.Tensor, members: torch.Tensor | None = None, reference_out: torch.Tensor | None = None) -> torch.Tensor:
        """Outputs (k_a, B) or (k_a, B, K): x is (k_a, B, C, H, W), one batch per member, or (B, C, H, W) shared.

        `members` (long, k_a) selects which members run (default: all k); the others' parameters are
        not read. `reference_out`, the reference's outputs on these inputs computed earlier, saves
        running it again (see `static_reference`).
        """
        if x.dim() == 4:
            x = x.unsqueeze(0).expand(self.k if members is None else len(members), *x.shape)
        out = self.body(x, members)
        if self.reference is not None:
            if reference_out is None:
                with torch.no_grad():
                    reference_out = self.reference(x, members)
            out = out - reference_out
        return out * self.scale if self.scale != 1.0 else out

    @torch.no_grad()
    def reference_outputs(self, x: torch.Tensor, chunk: int) -> torch.Tensor:
        """Every member's reference output on every sample of x (n, C, H, W): (k, n) or (k, n, K), `chunk` samples at a time."""
        if not self.static_reference:
            raise ValueError("the reference has BatchNorm: its output depends on the batch, so it cannot be computed ahead")
        parts = [self.reference(x[i : i + chunk].unsqueeze(0).expand(self.k, -1, *x.shape[1:])) for i in range(0, len(x), chunk)]
        return torch.cat(parts, dim=1)

    def member_state_dict(self, i: int) -> dict[str, torch.Tensor]:
        """Member i's current parameters and buffers, as `nets[i].state_dict()` keys (views)."""
        return self.body.member_state_dict(i)

    def member_module(self, i: int) -> nn.Sequential:
        """An ordinary nn.Sequential holding copies of member i's current parameters and buffers."""
        state = self.member_state_dict(i)
        net = copy.deepcopy(self.body.template[0]).to_empty(device=next(iter(state.values())).device)
        net.load_state_dict({k: v.detach().clone() for k, v in state.items()})
        net.train(self.training)
        return net

    def load_member(self, i: int, state: dict[str, torch.Tensor]) -> None:
        """Overwrite member i's parameters and buffers with `state` (keys as `member_state_dict`)."""
        own = self.member_state_dict(i)
        with torch.no_grad():
            for key, value in state.items():
                own[key].copy_(value)


def _member_rates(lrs: Sequence[float] | None, k: int, optimizer: str, device: torch.device) -> torch.Tensor | None:
    """Per-member learning rates as a (k,) float64 tensor, or None for one shared `lr`."""
    if lrs is None:
        return None
    if len(lrs) != k:
        raise ValueError(f"{k} members but {len(lrs)} learning rates")
    if optimizer != "sgd":
        raise ValueError(f"per-member learning rates need optimizer sgd (Adam's step is not linear in them), got {optimizer!r}")
    if not all(math.isfinite(r) and r > 0 for r in lrs):
        raise ValueError(f"learning rates must be positive and finite, got {list(lrs)}")
    return torch.tensor([float(r) for r in lrs], dtype=torch.float64, device=device)


@torch.no_grad()
def _scale_gradients(params: list[torch.Tensor], rates: torch.Tensor, weight_decay: float) -> None:
    """g_i ← lr_i · (g_i + wd · p_i) for each member row i, before an SGD step at lr 1 without weight decay.

    SGD's momentum buffer is linear in the gradients, buf ← μ·buf + g, so with each member's
    gradients scaled by its constant lr_i the buffer is lr_i times member i's own, and p ← p − buf
    is member i's step at its own learning rate (weight decay and all), up to float rounding.
    """
    for p in params:
        if p.grad is None:
            continue
        if weight_decay:
            p.grad.add_(p, alpha=weight_decay)
        p.grad.mul_(rates.to(p.grad.dtype).view(-1, *([1] * (p.dim() - 1))))


def _snapshot(model: StackedConvNet, i: int) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.member_state_dict(i).items()}


def train_stacked_convnet(
    model: StackedConvNet,
    x: torch.Tensor,
    y: torch.Tensor,
    options: TrainOptions = TrainOptions(),
    *,
    seeds: Sequence[int],
    lrs: Sequence[float] | None = None,
) -> list[MinibatchResult]:
    """Train every member in place as `train_minibatch(member i, x, y, seed=seeds[i], …)` would.

    Targets as `train_minibatch`: (n,), (n, K) for vector MSE, integer classes (n,) for the class losses;
    `steps` replaces `epochs` by a budget of optimizer steps (the same for every member). `lrs` gives
    each member its own SGD learning rate (`options.lr` is then unused). One result per member; its
    `seconds` is the wall time of the stacked run until that member stopped.
    """
    start = time.perf_counter()
    k = model.k
    if len(seeds) != k:
        raise ValueError(f"{k} members but {len(seeds)} seeds")
    params = [p for p in model.parameters() if p.requires_grad]
    rates = _member_rates(lrs, k, options.optimizer, x.device)
    if rates is None:
        opt = make_optimizer(params, options.optimizer, options.lr, options.momentum, options.weight_decay)
    else:  # the rates and the weight decay go into the gradients: see _scale_gradients
        opt = make_optimizer(params, options.optimizer, 1.0, options.momentum, 0.0)
    gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
    autocast, scaler = _autocast(x.device, options.amp)
    member_loss = torch.vmap(partial(loss_fn, options.loss))  # loss_fn itself, per member: same values as alone
    y = check_targets(options.loss, y)
    n = x.shape[0]
    history: list[list[float]] = [[] for _ in range(k)]
    n_steps = [0] * k
    converged, diverged = [False] * k, [False] * k
    seconds = [0.0] * k
    kept: dict[int, dict[str, torch.Tensor]] = {}
    active = list(range(k))
    members: torch.Tensor | None = None  # the running members' indices, once some have stopped

    def stop(i: int) -> None:
        nonlocal members
        kept[i] = _snapshot(model, i)
        seconds[i] = time.perf_counter() - start
        active.remove(i)
        members = torch.tensor(active, dtype=torch.long, device=x.device)

    model.train()
    # A reference without BatchNorm gives each sample the same output at every step: computed once,
    # it spares a forward pass of k networks per step (a third of a centred full-batch step's work).
    reference = None
    if model.static_reference:
        with autocast:
            reference = model.reference_outputs(x, max(options.batch_size, 1))
    everyone = torch.arange(k, device=x.device)

    def rows_of(running: torch.Tensor | None) -> torch.Tensor:
        return (everyone if running is None else running).unsqueeze(1)

    for _ in range(epoch_budget(n, options.batch_size, options.epochs, options.steps)):
        if not active:
            break
        plan = {i: batches(n, options.batch_size, gens[i]) for i in active}
        total = {i: 0.0 for i in active}
        seen = 0  # samples of this epoch so far (every running member has seen as many)
        for j in range(len(plan[active[0]])):
            if not active or (options.steps is not None and n_steps[active[0]] >= options.steps):
                break
            idx = torch.stack([plan[i][j] for i in active]).to(x.device)  # (k_a, B)
            with autocast:
                ref = None if reference is None else reference[rows_of(members), idx]
                out = model(x[idx], members, ref)
            target = y[idx]
            per = member_loss(shaped_output(options.loss, out, target), target)
            values = per.detach().tolist()
            bad = [a for a, v in enumerate(values) if not math.isfinite(v)]
            if bad:
                # As train_minibatch: no step on this batch; the state is the one after its forward pass.
                for a in bad:
                    i = active[a]
                    diverged[i] = True
                    history[i].append(float("nan"))
                for a in reversed(bad):
                    stop(active[a])
                good = [a for a in range(len(values)) if a not in bad]
                if not good:
                    break
                per, values = per[good], [values[a] for a in good]
            opt.zero_grad(set_to_none=True)
            batch_loss = per.sum()  # member i's parameters get exactly the gradient of its own loss
            if scaler is not None:
                scaler.scale(batch_loss).backward()
            else:
                batch_loss.backward()
            if bad:
                # The stopped members' rows saw their non-finite forward pass: keep that out of the
                # optimizer (their rows are restored at the end anyway; this spares GradScaler's check).
                gone = torch.tensor(sorted(kept), device=x.device)
                for p in params:
                    if p.grad is not None:
                        p.grad.index_fill_(0, gone, 0.0)
            if rates is not None:
                if scaler is not None:
                    scaler.unscale_(opt)
                _scale_gradients(params, rates, options.weight_decay)
            if scaler is not None:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            for i, v in zip(active, values):
                n_steps[i] += 1
                total[i] += v * idx.shape[1]
            seen += idx.shape[1]
        for i in list(active):
            history[i].append(total[i] / seen)
            if history[i][-1] < options.loss_tol:
                converged[i] = True
                stop(i)
    for i in list(active):
        seconds[i] = time.perf_counter() - start
    # Stopped members' rows kept moving with the shared optimizer (momentum, weight decay): restore them.
    for i, state in kept.items():
        model.load_member(i, state)
    model.eval()
    return [
        MinibatchResult(
            len(history[i]), n_steps[i], history[i][-1] if history[i] else float("nan"),
            converged[i], diverged[i], seconds[i], history[i],
        )
        for i in range(k)
    ]
