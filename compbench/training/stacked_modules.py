"""k seeds of one small torch network trained together: parameters stacked along a member axis.

Used by the `hypernet` and `slot_decoder` adapters. Member i is built and initialised from its own
seed exactly as a lone network of that seed would be (the adapter does that); here its parameters
sit in row i of stacked tensors, and the network's `stacked_forward` runs every member at once. The loss is the sum over members of each member's own mean
loss, so member i's gradient is its own gradient, and Adam acts elementwise, so one Adam over the
stacked tensors is k independent Adams. Minibatches: member i shuffles each epoch with its own
`torch.Generator` (`compbench.training.minibatch.batches`, as a lone run would); every member's
batches have the same sizes (they depend only on n and the batch size), so they stack. Member i's
trajectory is therefore the one its seed gives alone, up to the float rounding of batched matmuls.

Loss: mean squared error over every entry (samples × outputs), as `torch.nn.MSELoss` (the slot
decoder paper's loss); targets (n,) or (n, K) as the network's outputs.
"""

from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass

import numpy as np
import torch

from compbench.training.minibatch import batches

__all__ = ["ModuleStack", "StackResult", "data_seed", "train_module_stack"]

PREDICT_CHUNK = 4096  # rows per forward pass when predicting (bounds the activations held at once)


def data_seed(seed: int) -> int:
    """The seed of member `seed`'s minibatch order: a stream apart from its initialisation's."""
    return int(np.random.SeedSequence([int(seed), 3]).generate_state(1, dtype=np.uint64)[0] >> 1)


class ModuleStack:
    """k networks of one architecture with their own parameters, run together.

    Each member is an `nn.Module` with a method `stacked_forward(params, x)`: the same function as
    its `forward`, computed for every member at once from parameters stacked along a leading
    member axis (named as in `named_parameters()`), on inputs x (n, d) shared by the members or
    (k, n, d) one batch per member, giving (k, n, ...). (Batched matmuls, not `torch.vmap`, which
    was 20× slower here on the CPU.) The members' own `forward` serves a lone member, e.g. for its
    empirical NTK, whose structured engine needs the module's `nn.Linear` calls.
    """

    def __init__(self, members: list[torch.nn.Module]) -> None:
        if not members:
            raise ValueError("a stack needs at least one member")
        if len({type(m) for m in members}) != 1 or not hasattr(members[0], "stacked_forward"):
            raise ValueError("a stack's members must be modules of one class with a stacked_forward(params, x) method")
        if any(True for _ in members[0].buffers()):
            raise ValueError("stacked training handles parameters only; the network has buffers")
        self._proto = copy.deepcopy(members[0])
        names = [n for n, _ in members[0].named_parameters()]
        self.params: dict[str, torch.Tensor] = {
            n: torch.stack([dict(m.named_parameters())[n].detach() for m in members]).clone().requires_grad_(True)
            for n in names
        }
        self.k = len(members)

    def __call__(self, x: torch.Tensor, per_member: bool = False) -> torch.Tensor:
        """Outputs (k, n, ...) on inputs x (n, d) shared by every member, or x (k, n, d) with `per_member`."""
        if per_member and (x.dim() < 3 or x.shape[0] != self.k):
            raise ValueError(f"per-member inputs must be (k={self.k}, n, d), got {tuple(x.shape)}")
        return self._proto.stacked_forward(self.params, x)

    @torch.no_grad()
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Outputs (k, n, ...) on shared inputs, in chunks of rows."""
        outs = [self(x[i : i + PREDICT_CHUNK]) for i in range(0, len(x), PREDICT_CHUNK)]
        return torch.cat(outs, dim=1)

    def member(self, i: int) -> torch.nn.Module:
        """An ordinary module holding member i's current parameters (e.g. for its empirical NTK)."""
        m = copy.deepcopy(self._proto)
        with torch.no_grad():
            for name, p in m.named_parameters():
                p.copy_(self.params[name][i])
        return m


@dataclass
class StackResult:
    """Per-member outcome of stacked training."""

    steps: int
    final_loss: list[float]  # full-batch training loss after the last step
    diverged: list[bool]
    seconds: float


def _member_losses(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """(k,) mean squared error of each member over every entry."""
    if out.shape[1:] != y.shape[-out.dim() + 1 :]:
        raise ValueError(f"the network's outputs {tuple(out.shape[1:])} do not match the targets {tuple(y.shape[-out.dim() + 1:])}")
    return (out - y).pow(2).reshape(out.shape[0], -1).mean(dim=1)


def train_module_stack(
    stack: ModuleStack,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    seeds: list[int],
    lr: float,
    steps: int,
    batch_size: int | None = None,
) -> StackResult:
    """Adam on every member for `steps` steps: full batch (`batch_size` None or ≥ n) or minibatches.

    Member i's minibatch order comes from `data_seed(seeds[i])`.
    """
    if len(seeds) != stack.k:
        raise ValueError(f"{len(seeds)} seeds for a stack of {stack.k} members")
    if steps < 1:
        raise ValueError(f"steps must be ≥ 1, got {steps}")
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"x and y need the same, non-zero number of rows, got {len(x)} and {len(y)}")
    n = len(x)
    full = batch_size is None or batch_size >= n
    opt = torch.optim.Adam(list(stack.params.values()), lr=lr)
    gens = [torch.Generator().manual_seed(data_seed(s)) for s in seeds]
    pending: list[list[torch.Tensor]] = [[] for _ in seeds]
    start = time.perf_counter()
    for _ in range(steps):
        if full:
            per = _member_losses(stack(x), y)
        else:
            for i, g in enumerate(gens):
                if not pending[i]:
                    pending[i] = batches(n, int(batch_size), g)  # type: ignore[arg-type]
            idx = torch.stack([q.pop(0) for q in pending]).to(x.device)  # (k, B): one batch per member
            per = _member_losses(stack(x[idx], per_member=True), y[idx])
        opt.zero_grad(set_to_none=True)
        per.sum().backward()
        opt.step()
    with torch.no_grad():
        sq = torch.zeros(stack.k, dtype=torch.float64)
        for i in range(0, n, 4096):
            out = stack(x[i : i + 4096])
            sq += (out - y[i : i + 4096]).double().pow(2).reshape(stack.k, -1).sum(dim=1).cpu()
        final = (sq / y.numel()).tolist()
    return StackResult(
        steps=steps,
        final_loss=final,
        diverged=[not math.isfinite(v) for v in final],
        seconds=time.perf_counter() - start,
    )
