"""The `slot_decoder` adapter: the compositional decoder of Wiedemer et al. (NeurIPS 2023).

The input's columns are split into `slots` equal groups (the `latents` encoding of a slot task: each
slot's factors, e.g. position x, y and brightness); one ReLU MLP φ maps a slot's factors to the whole
output (e.g. 256 pixels), and the slots' outputs are summed:

    f(z) = Σ_s φ(z_s)          (slot-additive: no term sees two slots at once)

With `share: true` (default) every slot uses the same φ; `share: false` gives each slot its own φ_s,
as the authors' code does by default (`reuse_phi: False`, src/train.py at 4f96ac0). Both are
slot-additive. The monolithic decoder to compare with is the `mlp` adapter on the same inputs.

φ has `depth` hidden layers of `width` units, each layer initialised as in the `mlp` adapter
(weights N(0, (σ·√(2/fan_in))²), biases U(±σ/√fan_in)). Training: Adam on the mean squared error
over every entry (nn.MSELoss, the paper's loss; one-hot rows for classes), minibatches of
`batch_size` (the paper's setting) or full batch, `steps` optimizer steps; all seeds of a cell train
together (`compbench.training.stacked_modules`). Theory (`theory: empirical`): each seed's empirical
NTK at initialisation with f_0; with K outputs the output-averaged kernel (1/K) Σ_k J_k J_kᵀ
(`ntk_outputs: trace`). Its cost grows with K (the structured engine stacks the K output gradients
of each hidden layer), so it is off by default.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
from pydantic import Field

from compbench.adapters.base import Batch
from compbench.adapters.registry import register_adapter
from compbench.adapters.stacked import BatchSize, InitScale, LearningRate, StackedModuleAdapter, StackedModuleParams, Steps, Theory

__all__ = ["SlotDecoderAdapter", "SlotDecoderParams", "slot_decoder_module"]


def slot_decoder_module(slot_dim: int, slots: int, width: int, depth: int, n_out: int, share: bool, flat: bool) -> Any:
    """An (uninitialised) slot-additive decoder on rows of `slots`·`slot_dim` factors; outputs (n,) if `flat` else (n, n_out)."""
    return _slot_decoder_class()(slot_dim, slots, width, depth, n_out, share, flat)


@functools.cache
def _slot_decoder_class() -> type:
    """The module class, made once (torch is imported lazily; stacking needs one class for all seeds)."""
    import torch
    from torch import nn

    class SlotDecoder(nn.Module):
        """f(z) = Σ_s φ_s(z_s), φ_s = φ_0 for every slot when shared."""

        def __init__(self, slot_dim: int, slots: int, width: int, depth: int, n_out: int, share: bool, flat: bool) -> None:
            super().__init__()
            self.slot_dim, self.slots, self.share, self.flat = slot_dim, slots, share, flat
            dims = [slot_dim] + [width] * depth + [n_out]
            self.n_layers = len(dims) - 1

            def phi() -> nn.Sequential:
                mods: list[nn.Module] = []
                for j, (a, b) in enumerate(zip(dims[:-1], dims[1:])):
                    mods.append(nn.Linear(a, b))
                    if j < len(dims) - 2:
                        mods.append(nn.ReLU())
                return nn.Sequential(*mods)

            self.phis = nn.ModuleList(phi() for _ in range(1 if share else slots))

        def forward(self, inp: torch.Tensor) -> torch.Tensor:
            d = self.slot_dim
            out = sum(self.phis[0 if self.share else s](inp[:, s * d : (s + 1) * d]) for s in range(self.slots))
            return out[:, 0] if self.flat else out

        def stacked_forward(self, params: dict[str, torch.Tensor], inp: torch.Tensor) -> torch.Tensor:
            """`forward` of every member at once: params with a leading member axis k; inp (n, S·d) or (k, n, S·d) → (k, n[, K])."""
            # slots before samples, (S, n, d) or (k, S, n, d): one matmul per (member, slot)
            h = inp.unflatten(-1, (self.slots, self.slot_dim)).transpose(-3, -2)
            n_phi = len(self.phis)
            for j in range(self.n_layers):
                # weights (k, S', out, in), biases (k, S', out); S' = 1 when the slots share φ
                w = torch.stack([params[f"phis.{s}.{2 * j}.weight"] for s in range(n_phi)], dim=1)
                b = torch.stack([params[f"phis.{s}.{2 * j}.bias"] for s in range(n_phi)], dim=1)
                h = torch.matmul(h, w.transpose(-1, -2)) + b.unsqueeze(-2)
                if j < self.n_layers - 1:
                    h = torch.relu(h)
            out = h.sum(dim=-3)  # (k, n, K): the slots' outputs summed
            return out[..., 0] if self.flat else out

        @torch.no_grad()
        def init_(self, seed: int, init_scale: float) -> None:
            """Seeded init of every layer as in the `mlp` adapter (φ of slot 0 first when not shared)."""
            g = torch.Generator().manual_seed(int(seed))
            f64 = torch.float64
            for phi in self.phis:
                for lin in phi:
                    if isinstance(lin, nn.Linear):
                        fan_in, fan_out = lin.in_features, lin.out_features
                        lin.weight.copy_((torch.randn(fan_in, fan_out, generator=g, dtype=f64) * init_scale * (2.0 / fan_in) ** 0.5).T)
                        lin.bias.copy_((torch.rand(fan_out, generator=g, dtype=f64) * 2 - 1) * init_scale / fan_in**0.5)

    return SlotDecoder


class SlotDecoderParams(StackedModuleParams):
    """Hyperparameters of the slot-additive decoder."""

    slots: int = Field(default=2, ge=1, description="the input's columns split into this many equal groups")
    share: bool = Field(default=True, description="one φ for every slot (false: one φ per slot, the paper's default)")
    width: int = Field(default=256, ge=1, description="hidden units of φ")
    depth: int = Field(default=2, ge=1, description="hidden layers of φ")
    init_scale: InitScale = 1.0
    lr: LearningRate = 1e-3
    steps: Steps = 3000
    batch_size: BatchSize = 256
    theory: Theory = "none"


@register_adapter("slot_decoder")
class SlotDecoderAdapter(StackedModuleAdapter):
    """Slot-additive decoder Σ_s φ(z_s), trained with Adam on minibatches; seeds train together."""

    Params = SlotDecoderParams
    params: SlotDecoderParams

    def member_builder(self, train: Batch, evaluate: Batch) -> tuple[Any, dict[str, Any]]:
        """A decoder whose slots split this batch's columns equally."""
        p = self.params
        width = int(np.prod(train.x.shape[1:]))
        if width % p.slots:
            raise ValueError(f"inputs of {width} columns do not split into {p.slots} equal slots")
        n_out, flat = train.n_outputs, not train.vector_output
        return (lambda: slot_decoder_module(width // p.slots, p.slots, p.width, p.depth, n_out, p.share, flat)), {}
