"""The `hypernet` adapter: the modular student of Schug et al. (ICLR 2024), a linear hypernetwork.

Each input row is a latent z (the cell's encoding: the k-hot module vector for the modular teacher)
followed by x. The latent linearly generates the hidden weights and biases of a ReLU network,

    h_l = relu(W_l(z) h_{l−1} + b_l(z)),   W_l(z) = Θ_l,0 + Σ_m z_m Θ_l,m,   b_l(z) = β_l,0 + Σ_m z_m β_l,m,

h_0 = x, for `layers` generated layers of `width` units, then a readout shared by every latent
(f = r·h_L + r_0; K units for K outputs). This is the teacher's form (its hidden weights are the sum
of the active modules' weights) plus a template Θ_0 for the empty combination, as the authors'
linear weight generator (`LinearBank`, smonsays/modular-hyperteacher) maps the latent to the
target network's weights. Written as a network: layer l is one bias-free `nn.Linear` on the
outer-product features (1, z) ⊗ (h_{l−1}, 1), so the structured empirical NTK applies to it as is.

Initialisation (each template like one layer of the `mlp` adapter): weights N(0, (σ·√(2/fan_in))²),
biases U(±σ/√fan_in), fan_in the layer's input width; hence W(z) has (1 + ‖z‖²) times a plain
layer's variance (3× for a 2-hot latent). Training: Adam on the mean squared error (one-hot rows
for classes), full batch or minibatches, a budget of `steps`; all seeds of a cell train together
(`compbench.training.stacked_modules`). Theory (`theory: empirical`): each seed's empirical NTK at
initialisation and its f_0; with K outputs the output-averaged kernel (`ntk_outputs: trace`) or
the full (n·K)² one.

Where z ends: `latent_dim`, or (None) read off the batch: the k-hot encoding (the first C columns
equal the cells, C = len(n_values)) or the one-hot encoding (the first Σ n_c columns are the
cells' one-hot codes). A batch with no columns after the latent trains a plain network of z.
"""

from __future__ import annotations

import functools
from typing import Any, Literal

import numpy as np
from pydantic import Field

from compbench.adapters.base import Batch
from compbench.adapters.registry import register_adapter
from compbench.adapters.stacked import BatchSize, InitScale, LearningRate, StackedModuleAdapter, StackedModuleParams, Steps, Theory

__all__ = ["HypernetAdapter", "HypernetParams", "hypernet_module", "latent_width"]


def latent_width(batch: Batch, latent_dim: int | None = None) -> int:
    """How many leading columns of `batch.x` are the latent (the cell's encoding); the rest is x.

    `latent_dim` given: checked against the width. None: the k-hot encoding (first C columns equal
    the cells) or the one-hot encoding (first Σ n_c columns are the one-hot codes); anything else
    is an error asking for `latent_dim`.
    """
    from compbench.encodings.onehot import onehot

    x = np.asarray(batch.x).reshape(len(batch), -1)
    if latent_dim is not None:
        if not 0 <= latent_dim <= x.shape[1]:
            raise ValueError(f"latent_dim {latent_dim} is outside the input's {x.shape[1]} columns")
        return int(latent_dim)
    cells = np.asarray(batch.cells)
    c, wide = cells.shape[1], int(sum(batch.n_values))
    if all(n == 2 for n in batch.n_values) and x.shape[1] >= c and np.array_equal(x[:, :c], cells):
        return c
    if x.shape[1] >= wide and np.array_equal(x[:, :wide], onehot(cells, batch.n_values)):
        return wide
    raise ValueError(
        f"cannot tell where the latent ends in inputs of {x.shape[1]} columns: they start with neither the k-hot "
        f"cells ({c} columns) nor their one-hot codes ({wide} columns); set latent_dim"
    )


def hypernet_module(latent_dim: int, x_dim: int, width: int, layers: int, n_out: int, flat: bool) -> Any:
    """An (uninitialised) hypernetwork `nn.Module` on rows (z, x); outputs (n,) if `flat` else (n, n_out)."""
    return _hypernet_class()(latent_dim, x_dim, width, layers, n_out, flat)


@functools.cache
def _hypernet_class() -> type:
    """The module class, made once (torch is imported lazily; stacking needs one class for all seeds)."""
    import torch
    from torch import nn

    class Hypernet(nn.Module):
        """h_l = relu(Lin_l((1, z) ⊗ (h_{l−1}, 1))), f = readout(h_L): W_l(z) and b_l(z) linear in z."""

        def __init__(self, latent_dim: int, x_dim: int, width: int, layers: int, n_out: int, flat: bool) -> None:
            super().__init__()
            self.latent_dim, self.width, self.flat = latent_dim, width, flat
            self.fans = [x_dim] + [width] * (layers - 1)
            self.generated = nn.ModuleList(
                nn.Linear((latent_dim + 1) * (d + 1), width, bias=False) for d in self.fans
            )
            self.readout = nn.Linear(width, n_out)

        def _kron(self, zt: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
            """(…, n, (L+1)(d+1)): the features (1, z) ⊗ (h, 1) on which W(z) h + b(z) is linear."""
            ht = torch.cat([h, h.new_ones(*h.shape[:-1], 1)], dim=-1)  # (not ones_like(h[..., :1]): h may have no columns)
            return (zt.unsqueeze(-1) * ht.unsqueeze(-2)).flatten(-2)

        def _latent(self, inp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            z = inp[..., : self.latent_dim]
            return torch.cat([inp.new_ones(*inp.shape[:-1], 1), z], dim=-1), inp[..., self.latent_dim :]

        def forward(self, inp: torch.Tensor) -> torch.Tensor:
            zt, h = self._latent(inp)
            for lin in self.generated:
                h = torch.relu(lin(self._kron(zt, h)))
            out = self.readout(h)
            return out[:, 0] if self.flat else out

        def stacked_forward(self, params: dict[str, torch.Tensor], inp: torch.Tensor) -> torch.Tensor:
            """`forward` of every member at once: params with a leading member axis k; inp (n, d) or (k, n, d) → (k, n[, K])."""
            zt, h = self._latent(inp)
            for i in range(len(self.generated)):
                # (n, D) or (k, n, D) times (k, D, H): the first layer's features are shared by the members
                h = torch.relu(torch.matmul(self._kron(zt, h), params[f"generated.{i}.weight"].transpose(1, 2)))
            w, b = params["readout.weight"], params["readout.bias"]
            if w.shape[1] == 1:  # one output: a product and a sum (a bmm with one column is slow on the CPU)
                out = (h * w[:, None, 0, :]).sum(-1, keepdim=True) + b[:, None, :]
            else:
                out = torch.baddbmm(b.unsqueeze(1), h, w.transpose(1, 2))
            return out[..., 0] if self.flat else out

        @torch.no_grad()
        def init_(self, seed: int, init_scale: float) -> None:
            """Seeded init of every template (as one `mlp` layer each) and of the readout."""
            g = torch.Generator().manual_seed(int(seed))
            f64, width, n_out = torch.float64, self.width, self.readout.out_features
            for lin, d in zip(self.generated, self.fans):
                fan = max(d, 1)
                w = torch.randn(width, self.latent_dim + 1, d, generator=g, dtype=f64) * init_scale * (2.0 / fan) ** 0.5
                b = (torch.rand(width, self.latent_dim + 1, 1, generator=g, dtype=f64) * 2 - 1) * init_scale / fan**0.5
                lin.weight.copy_(torch.cat([w, b], dim=2).reshape(width, -1))
            self.readout.weight.copy_(torch.randn(n_out, width, generator=g, dtype=f64) * init_scale * (2.0 / width) ** 0.5)
            self.readout.bias.copy_((torch.rand(n_out, generator=g, dtype=f64) * 2 - 1) * init_scale / width**0.5)

    return Hypernet


class HypernetParams(StackedModuleParams):
    """Hyperparameters of the linear hypernetwork student."""

    width: int = Field(default=32, ge=1, description="units per generated hidden layer")
    layers: int = Field(default=1, ge=1, description="number of generated hidden layers")
    latent_dim: int | None = Field(
        default=None, ge=0, description="leading input columns that are the latent z (None: the k-hot or one-hot cell code)"
    )
    init_scale: InitScale = 0.3  # every template drawn as one `mlp` layer
    lr: LearningRate = 3e-3
    steps: Steps = 5000
    batch_size: BatchSize = 1024
    theory: Theory = "empirical"
    ntk_outputs: Literal["trace", "full"] = Field(
        default="trace", description="K outputs: the output-averaged eNTK or the full (n·K)² one"
    )


@register_adapter("hypernet")
class HypernetAdapter(StackedModuleAdapter):
    """Linear hypernetwork (latent → hidden weights), trained with Adam; seeds train together."""

    Params = HypernetParams
    params: HypernetParams

    def member_builder(self, train: Batch, evaluate: Batch) -> tuple[Any, dict[str, Any]]:
        """A hypernetwork on this batch's latent and x (the latent's width recorded in every seed's info)."""
        p = self.params
        latent = latent_width(train, p.latent_dim)  # the evaluation inputs have the same columns (stack_inputs)
        x_dim = int(np.prod(train.x.shape[1:])) - latent
        n_out, flat = train.n_outputs, not train.vector_output
        return (lambda: hypernet_module(latent, x_dim, p.width, p.layers, n_out, flat)), {"latent_dim": latent}

    def ntk_outputs(self) -> str:
        """`ntk_outputs` of the params: the output-averaged or the full eNTK."""
        return self.params.ntk_outputs
