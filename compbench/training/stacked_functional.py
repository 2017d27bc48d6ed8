"""k seeds of any torch network trained at once: `torch.func.functional_call` over stacked parameters.

The generic counterpart of `compbench.training.stacked_modules` (which needs a hand-written
`stacked_forward`): member i's parameters sit in row i of stacked tensors and `torch.vmap` runs
the module once for all members. Everything else is `compbench.training.minibatch.train_minibatch`
for each member: its own `torch.Generator(seed)` data order, the same epochs / steps budget, the
loss summed over members (so member i's gradient is its own) and one SGD or Adam over the stacked
tensors (elementwise, so k independent optimisers). A member that reaches `loss_tol`, or whose
loss turns non-finite, stops: its parameters are kept as they were at that moment (the others
train on, and its rows are restored at the end). Its trajectory is therefore the one its seed
gives alone, up to the float rounding of batched kernels.

Modules that cannot run this way raise `CannotStack` before any training: buffers (BatchNorm's
running statistics change in place), random operations (dropout: vmap would draw other numbers
than a lone run), mixed precision on CUDA, or an operation vmap has no rule for.
"""

from __future__ import annotations

import copy
import time

import torch

from compbench.errors import CompbenchError
from compbench.training.minibatch import MinibatchResult, TrainOptions, batches, check_targets, epoch_budget, loss_fn, make_optimizer, shaped_output

__all__ = ["CannotStack", "train_stacked"]


class CannotStack(CompbenchError, RuntimeError):
    """The networks cannot train as one stack (the reason is the message); train them one by one."""


def _stack(nets: list[torch.nn.Module]) -> dict[str, torch.Tensor]:
    names = [n for n, _ in nets[0].named_parameters()]
    if any([n for n, _ in m.named_parameters()] != names for m in nets[1:]):
        raise CannotStack("the seeds' networks do not have the same parameters")
    params = {}
    for n, p0 in nets[0].named_parameters():
        rows = [dict(m.named_parameters())[n].detach() for m in nets]
        if any(r.shape != p0.shape for r in rows):
            raise CannotStack(f"parameter {n} has different shapes across seeds")
        params[n] = torch.stack(rows).clone().requires_grad_(p0.requires_grad)
    return params


def train_stacked(
    nets: list[torch.nn.Module],
    x: torch.Tensor,
    y: torch.Tensor,
    seeds: list[int],
    options: TrainOptions = TrainOptions(),
) -> list[MinibatchResult]:
    """Train `nets` (one per seed, same architecture) in place, as `train_minibatch` would one by one."""
    from torch.func import functional_call

    if len(nets) != len(seeds) or not nets:
        raise ValueError("one network per seed")
    if options.amp and x.device.type == "cuda":
        raise CannotStack("mixed precision on CUDA trains one seed at a time")
    if any(True for _ in nets[0].buffers()):
        raise CannotStack("the network has buffers (e.g. BatchNorm running statistics)")
    start = time.perf_counter()
    k = len(nets)
    params = _stack(nets)
    proto = copy.deepcopy(nets[0])
    trainable = [p for p in params.values() if p.requires_grad]
    opt = make_optimizer(trainable, options.optimizer, options.lr, options.momentum, options.weight_decay)
    gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
    y = check_targets(options.loss, y)
    n = x.shape[0]

    def member_out(p: dict[str, torch.Tensor], xb: torch.Tensor) -> torch.Tensor:
        return functional_call(proto, p, (xb,))

    def member_loss(out: torch.Tensor, yb: torch.Tensor) -> torch.Tensor:
        return loss_fn(options.loss, shaped_output(options.loss, out, yb), yb)

    run = torch.vmap(member_out, in_dims=(0, 0), randomness="error")
    losses_of = torch.vmap(member_loss, in_dims=(0, 0))
    history: list[list[float]] = [[] for _ in range(k)]
    n_steps = [0] * k
    active = [True] * k
    converged, diverged = [False] * k, [False] * k
    frozen: dict[int, dict[str, torch.Tensor]] = {}

    def stop(i: int) -> None:
        active[i] = False
        frozen[i] = {name: t[i].detach().clone() for name, t in params.items()}

    proto.train()
    budget = epoch_budget(n, options.batch_size, options.epochs, options.steps)
    for _ in range(budget):
        if not any(active):
            break
        epoch = [batches(n, options.batch_size, g) for g in gens]
        total, seen = [0.0] * k, [0] * k
        for j in range(len(epoch[0])):
            if options.steps is not None and max(n_steps) >= options.steps:
                break
            idx = torch.stack([epoch[i][j] for i in range(k)]).to(x.device)  # (k, B): the sizes depend on n only
            try:
                out = run(params, x[idx])
                member_losses = losses_of(out, y[idx])
            except Exception as exc:  # noqa: BLE001 — vmap refuses this module (no batching rule, randomness, ...)
                if not any(n_steps):
                    raise CannotStack(f"torch.vmap cannot run the network: {type(exc).__name__}: {str(exc).splitlines()[0]}") from exc
                raise
            values = member_losses.detach()
            for i in range(k):
                if active[i] and not bool(torch.isfinite(values[i])):
                    diverged[i] = True
                    history[i].append(float("nan"))
                    stop(i)
            mask = torch.tensor(active, dtype=member_losses.dtype, device=member_losses.device)
            if not any(active):
                break
            opt.zero_grad(set_to_none=True)
            # Masked, not summed over a subset: a stopped member's loss may be NaN, and NaN·0 is NaN.
            torch.where(mask.bool(), member_losses, torch.zeros_like(member_losses)).sum().backward()
            opt.step()
            for i in range(k):
                if active[i]:
                    n_steps[i] += 1
                    total[i] += float(values[i]) * idx.shape[1]
                    seen[i] += idx.shape[1]
        for i in range(k):
            if active[i] and seen[i]:
                history[i].append(total[i] / seen[i])
                if history[i][-1] < options.loss_tol:
                    converged[i] = True
                    stop(i)
    seconds = time.perf_counter() - start
    results = []
    with torch.no_grad():
        for i, net in enumerate(nets):
            rows = frozen.get(i) or {name: t[i].detach() for name, t in params.items()}
            named = dict(net.named_parameters())
            for name, value in rows.items():
                named[name].copy_(value)
            net.eval()
            final = history[i][-1] if history[i] else float("nan")
            results.append(MinibatchResult(len(history[i]), n_steps[i], final, converged[i], diverged[i], seconds, history[i]))
    return results
