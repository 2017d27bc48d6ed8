"""The `convnet` adapter: the reference ConvNet (REFERENCE.md §5.1), width-scalable.

4 × [Conv2d(kernel 5, Kaiming-normal) → ReLU → BatchNorm2d] with 32, 32, 64, 64 filters;
MaxPool(2); Flatten; Linear 512 → ReLU → Linear 1024 → ReLU → Linear K (Kaiming-normal; K = the
task's outputs: 1 for a scalar task).
`width` multiplies every filter count and hidden width. The reference uses no padding (for 28×28
MNIST); `padding: auto` keeps that when the input is large enough for four valid convolutions and a
pooling step, and otherwise pads 'same' (8×8 digits). Reference training: SGD lr 1e-4, momentum 0.9,
100 epochs, batch 128 — this adapter's defaults.

Other small CNNs are configurations of it: `pool` as a list puts MaxPool(2) after chosen
convolutions, `init: glorot` is Keras' default initialisation (Glorot-uniform weights, zero biases).
The CNN of "Gradient Descent Resists Compositionality" (github.com/yuanpeng16/BCDLSG@efb6c20,
mnist.py `DeepModelGenerator`: Conv 32 3×3 valid ReLU → MaxPool 2 → Conv 64 3×3 valid ReLU →
Flatten → Dense 64 ReLU → Dense 64 ReLU → Dense 10; Adam 1e-3, batch 64, 200 steps; the
experiments/mnist_paired_first runs keep `--loss_type hinge`, Keras' categorical hinge on a linear
output, and `cross_entropy` is its softmax alternative) is `{channels: [32, 64], hidden: [64, 64],
kernel_size: 3, padding: valid, pool: [0], batchnorm: false, init: glorot, optimizer: adam,
lr: 1.0e-3, batch_size: 64, steps: 200, loss: categorical_hinge}`. (Keras' Adam has ε = 1e-7,
PyTorch's 1e-8.)

Strided convolutions: `stride` and `padding` take one number for every convolution or a list with one per
convolution; a convolution's output side is ⌊(side + 2·padding − kernel) / stride⌋ + 1. The `VanillaCNN`
of Schott et al. 2022 (github.com/bethgelab/InDomainGeneralizationBenchmark@8eefa96,
src/lablet_generalization_benchmark/model.py: Conv 32, 32, 64, 64 4×4 stride 2 padding 1, each with ReLU
→ Conv 256 4×4 stride 1 padding 0 → ReLU → Linear K; no BatchNorm, no pooling, PyTorch's default
initialisation) is `{channels: [32, 32, 64, 64, 256], kernel_size: 4, stride: [2, 2, 2, 2, 1],
padding: [1, 1, 1, 1, 0], batchnorm: false, pool: false, hidden: [], init: torch}` on its 64×64 images
(64 → 32 → 16 → 8 → 4 → 1). On 32×32 images the four strided convolutions leave 2×2, too small for the
last 4×4 convolution without padding: `padding: 1` there gives 1×1, its 4×4 kernel reaching the 2×2 map
with its central 2×2 taps only (the outer taps see zeros).

All seeds of a cell train at once as one grouped model (compbench.training.stacked_convnet), each
with its own initialisation and data order (and, with `lr_ntk` under SGD, its own learning rate),
so a seed's result is the one it gets trained alone (`vectorize: false`), up to float rounding; f_0
and the empirical NTK at init are per seed as in every deep adapter.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from compbench.adapters.base import Batch, Fitted
from compbench.adapters.deep import NetworkAdapter, NetworkParams
from compbench.adapters.registry import register_adapter

if TYPE_CHECKING:
    import torch


class ConvNetParams(NetworkParams):
    """Hyperparameters of the reference ConvNet."""

    width: float = Field(default=1.0, gt=0, description="multiplier of every filter count and hidden width")
    channels: list[int] = Field(default=[32, 32, 64, 64], min_length=1, description="filters per conv layer (before `width`)")
    hidden: list[int] = Field(default=[512, 1024], description="hidden widths of the dense head (before `width`)")
    kernel_size: int = Field(default=5, ge=1)
    stride: int | list[int] = Field(default=1, description="stride of every convolution, or a list with one per convolution")
    padding: Literal["auto", "valid", "same"] | int | list[int] = Field(
        default="auto",
        description="valid (none), same ((kernel − 1) // 2 pixels), auto (valid when it fits, else same), or zero-padding "
        "in pixels per side: one number for every convolution, or a list with one per convolution",
    )
    batchnorm: bool = True
    pool: bool | list[int] = Field(
        default=True,
        description="MaxPool(2) after the last convolution (true), none (false), or after each listed convolution (0-based)",
    )
    init: Literal["kaiming", "glorot", "torch"] = Field(
        default="kaiming",
        description="kaiming: Kaiming-normal weights (PyTorch's default biases); glorot: Glorot-uniform weights "
        "and zero biases (Keras' default); torch: PyTorch's default (weights and biases uniform in ±1/√fan_in)",
    )
    optimizer: Literal["sgd", "adam"] = "sgd"
    lr: float = Field(default=1e-4, gt=0)
    momentum: float = Field(default=0.9, ge=0, lt=1)
    vectorize: bool = Field(
        default=True,
        description="train all seeds of a cell as one grouped model (false, or lr_ntk with adam: one by one)",
    )
    seeds_per_batch: int | None = Field(
        default=None, ge=1, description="seeds trained together at most, to bound memory (default: all)"
    )

    @model_validator(mode="after")
    def _per_convolution(self) -> ConvNetParams:
        n = len(self.channels)
        for name, value, least in (("stride", self.stride, 1), ("padding", self.padding, 0)):
            if isinstance(value, str):
                continue
            values = value if isinstance(value, list) else [value]
            if isinstance(value, list) and len(value) != n:
                raise ValueError(f"{name} lists {len(value)} values for {n} convolutions (channels): "
                                 f"give one per convolution, or one number for all")
            bad = [v for v in values if v < least]
            if bad:
                raise ValueError(f"{name} {bad[0]} is not allowed: a {name} is an integer ≥ {least}")
        return self

    @model_validator(mode="after")
    def _pool_positions(self) -> ConvNetParams:
        if isinstance(self.pool, list):
            bad = [i for i in self.pool if not 0 <= i < len(self.channels)]
            if bad:
                raise ValueError(f"pool positions {bad} are not convolutions 0..{len(self.channels) - 1}")
            if len(set(self.pool)) != len(self.pool):
                raise ValueError(f"pool lists a convolution twice: {self.pool}")
        return self


def _scaled(values: list[int], width: float) -> list[int]:
    return [max(1, int(round(v * width))) for v in values]


def _per_layer(value: int | list[int], n: int) -> list[int]:
    return list(value) if isinstance(value, list) else [value] * n


def conv_side(side: int, kernel: int, stride: int = 1, padding: int = 0) -> int:
    """A convolution's output side: ⌊(side + 2·padding − kernel) / stride⌋ + 1 (≤ 0: no output)."""
    return (side + 2 * padding - kernel) // stride + 1


@register_adapter("convnet")
class ConvNetAdapter(NetworkAdapter):
    """The paper's ConvNet (conv → ReLU → BN ×4, max-pool, dense 512/1024), minibatch-trained."""

    Params = ConvNetParams
    params: ConvNetParams

    def _pool_after(self) -> set[int]:
        p = self.params
        if isinstance(p.pool, list):
            return set(p.pool)
        return {len(p.channels) - 1} if p.pool else set()

    def _valid_fits(self, h: int, w: int) -> bool:
        """Whether every convolution and pooling step has room without padding."""
        k, pools = self.params.kernel_size, self._pool_after()
        for i, s in enumerate(_per_layer(self.params.stride, len(self.params.channels))):
            h, w = conv_side(h, k, s), conv_side(w, k, s)
            if min(h, w) < (2 if i in pools else 1):
                return False
            if i in pools:
                h, w = h // 2, w // 2
        return True

    def _initialise(self, layer: torch.nn.Module, nonlinearity: str) -> None:
        import torch.nn as nn

        if self.params.init == "glorot":
            nn.init.xavier_uniform_(layer.weight)
            nn.init.zeros_(layer.bias)
        elif self.params.init == "torch":
            return  # as constructed: PyTorch's default, drawn from the seeded RNG
        else:
            nn.init.kaiming_normal_(layer.weight, nonlinearity=nonlinearity)

    def build(self, in_shape: tuple[int, int, int], n_out: int = 1) -> torch.nn.Module:
        """The ConvNet for (channels, H, W) inputs with `n_out` outputs."""
        import torch.nn as nn

        p = self.params
        c_in, h, w = in_shape
        k, n_conv = p.kernel_size, len(p.channels)
        pools, listed = self._pool_after(), isinstance(p.pool, list)
        padding = p.padding
        if padding == "auto":
            padding = "valid" if self._valid_fits(h, w) else "same"
        if isinstance(padding, str):
            padding = 0 if padding == "valid" else (k - 1) // 2
        pads = _per_layer(padding, n_conv)
        strides = _per_layer(p.stride, n_conv)
        layers: list[nn.Module] = []
        for i, c_out in enumerate(_scaled(p.channels, p.width)):
            conv = nn.Conv2d(c_in, c_out, k, stride=strides[i], padding=pads[i])
            self._initialise(conv, "relu")
            layers += [conv, nn.ReLU()]
            if p.batchnorm:
                layers.append(nn.BatchNorm2d(c_out))
            c_in = c_out
            before = (h, w)
            h, w = conv_side(h, k, strides[i], pads[i]), conv_side(w, k, strides[i], pads[i])
            if h < 1 or w < 1:
                raise ValueError(
                    f"convnet: convolution {i} ({k}×{k}, stride {strides[i]}, padding {pads[i]}) has no output on its "
                    f"{before[0]}×{before[1]} input (the images are {in_shape[1]}×{in_shape[2]}, {n_conv} convolutions); "
                    "pad more (padding: same or a number), stride less, or use fewer convolutions")
            if i in pools:
                if min(h, w) >= 2:
                    layers.append(nn.MaxPool2d(2, 2))
                    h, w = h // 2, w // 2
                elif listed:  # pool: true skips a pooling that has no room; a listed one is asked for
                    raise ValueError(f"convnet: no room for MaxPool(2) after convolution {i} ({h}×{w}); change pool or padding")
        layers.append(nn.Flatten())
        d = c_in * h * w
        for hidden in _scaled(p.hidden, p.width):
            lin = nn.Linear(d, hidden)
            self._initialise(lin, "relu")
            layers += [lin, nn.ReLU()]
            d = hidden
        out = nn.Linear(d, n_out)
        self._initialise(out, "linear")
        layers.append(out)
        return nn.Sequential(*layers)

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Train the seeds together (`vectorize`), in groups of `seeds_per_batch`; else one by one."""
        p = self.params
        if not p.vectorize or (p.lr_ntk is not None and p.optimizer != "sgd"):
            # Adam's step is not linear in the learning rate, so lr_ntk's per-seed rates need one net each.
            return super().fit_seeds(train, evaluate, seeds)
        from compbench.training.stacked_convnet import StackedConvNet, train_stacked_convnet

        x_tr, x_ev, y_tr, in_shape = self._tensors(train, evaluate)
        outputs = self._outputs(train)
        size = p.seeds_per_batch or max(1, len(seeds))
        fitted: list[Fitted] = []
        for start in range(0, len(seeds), size):
            group = seeds[start : start + size]
            # Exactly the per-seed networks of the base class (output_module wrappers), so f_0, the
            # NTK and the predictions below run the ordinary per-seed code.
            nets = [self._init(seed, in_shape, outputs) for seed in group]
            at_init = [self._at_init(net, x_tr, x_ev, y_tr, outputs) for net in nets]
            stacked = StackedConvNet(
                [net.net for net in nets],
                reference=[net.net0 for net in nets] if p.center else None,
                scale=p.output_scale,
            )
            options = [self._train_options(state) for state in at_init]  # lr_ntk: each seed's own lr
            lrs = [o.lr for o in options] if p.lr_ntk is not None else None
            results = train_stacked_convnet(stacked, x_tr, y_tr, dataclasses.replace(options[0], lr=p.lr), seeds=group, lrs=lrs)
            for i, net in enumerate(nets):
                net.net.load_state_dict(stacked.member_state_dict(i))
                fit = self._fitted(net, results[i], x_ev, at_init[i], options[i].lr, x_tr)
                fit.info["stacked_seeds"] = len(group)  # train_seconds is the shared wall time of the group
                fitted.append(fit)
            del stacked
        return fitted
