"""The `convnet` adapter: the reference ConvNet (REFERENCE.md §5.1), width-scalable.

4 × [Conv2d(kernel 5, Kaiming-normal) → ReLU → BatchNorm2d] with 32, 32, 64, 64 filters;
MaxPool(2); Flatten; Linear 512 → ReLU → Linear 1024 → ReLU → Linear 1 (Kaiming-normal).
`width` multiplies every filter count and hidden width. The reference uses no padding (for 28×28
MNIST); `padding: auto` keeps that when the input is large enough for four valid convolutions and a
pooling step, and otherwise pads 'same' (8×8 digits). Reference training: SGD lr 1e-4, momentum 0.9,
100 epochs, batch 128 — this adapter's defaults.

All seeds of a cell train at once as one grouped model (compbench.training.stacked_convnet), each
with its own initialisation and data order, so a seed's result is the one it gets trained alone
(`vectorize: false`), up to float rounding; f_0 and the empirical NTK at init are per seed as in
every deep adapter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

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
    padding: Literal["auto", "valid", "same"] = "auto"
    batchnorm: bool = True
    pool: bool = Field(default=True, description="MaxPool(2) after the convolutions")
    optimizer: Literal["sgd", "adam"] = "sgd"
    lr: float = Field(default=1e-4, gt=0)
    momentum: float = Field(default=0.9, ge=0, lt=1)
    vectorize: bool = Field(
        default=True, description="train all seeds of a cell as one grouped model (false, or lr_ntk set: one by one)"
    )
    seeds_per_batch: int | None = Field(
        default=None, ge=1, description="seeds trained together at most, to bound memory (default: all)"
    )


def _scaled(values: list[int], width: float) -> list[int]:
    return [max(1, int(round(v * width))) for v in values]


@register_adapter("convnet")
class ConvNetAdapter(NetworkAdapter):
    """The paper's ConvNet (conv → ReLU → BN ×4, max-pool, dense 512/1024), minibatch-trained."""

    Params = ConvNetParams
    params: ConvNetParams

    def build(self, in_shape: tuple[int, int, int]) -> torch.nn.Module:
        """The ConvNet for (channels, H, W) inputs."""
        import torch.nn as nn

        p = self.params
        c_in, h, w = in_shape
        k, n_conv = p.kernel_size, len(p.channels)
        padding = p.padding
        if padding == "auto":
            fits = min(h, w) - n_conv * (k - 1) >= (2 if p.pool else 1)
            padding = "valid" if fits else "same"
        pad = 0 if padding == "valid" else (k - 1) // 2
        layers: list[nn.Module] = []
        for c_out in _scaled(p.channels, p.width):
            conv = nn.Conv2d(c_in, c_out, k, padding=pad)
            nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
            layers += [conv, nn.ReLU()]
            if p.batchnorm:
                layers.append(nn.BatchNorm2d(c_out))
            c_in = c_out
            if pad == 0:
                h, w = h - (k - 1), w - (k - 1)
            elif k % 2 == 0:
                h, w = h - 1, w - 1
        if h < 1 or w < 1:
            raise ValueError(f"convnet: inputs {in_shape[1]}×{in_shape[2]} are too small for {n_conv} valid {k}×{k} convolutions; use padding: same")
        if p.pool and min(h, w) >= 2:
            layers.append(nn.MaxPool2d(2, 2))
            h, w = h // 2, w // 2
        layers.append(nn.Flatten())
        d = c_in * h * w
        for hidden in _scaled(p.hidden, p.width):
            lin = nn.Linear(d, hidden)
            nn.init.kaiming_normal_(lin.weight, nonlinearity="relu")
            layers += [lin, nn.ReLU()]
            d = hidden
        out = nn.Linear(d, 1)
        nn.init.kaiming_normal_(out.weight, nonlinearity="linear")
        layers.append(out)
        return nn.Sequential(*layers)

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Train the seeds together (`vectorize`), in groups of `seeds_per_batch`; else one by one."""
        p = self.params
        if not p.vectorize or p.lr_ntk is not None:  # lr_ntk: every seed its own learning rate
            return super().fit_seeds(train, evaluate, seeds)
        from compbench.training.stacked_convnet import StackedConvNet, train_stacked_convnet

        x_tr, x_ev, y_tr, in_shape = self._tensors(train, evaluate)
        size = p.seeds_per_batch or max(1, len(seeds))
        fitted: list[Fitted] = []
        for start in range(0, len(seeds), size):
            group = seeds[start : start + size]
            # Exactly the per-seed networks of the base class (scalar_module wrappers), so f_0, the
            # NTK and the predictions below run the ordinary per-seed code.
            nets = [self._init(seed, in_shape) for seed in group]
            at_init = [self._at_init(net, x_tr, x_ev, y_tr) for net in nets]
            stacked = StackedConvNet(
                [net.net for net in nets],
                reference=[net.net0 for net in nets] if p.center else None,
                scale=p.output_scale,
            )
            results = train_stacked_convnet(stacked, x_tr, y_tr, seeds=group, **self._train_options())
            for i, net in enumerate(nets):
                net.net.load_state_dict(stacked.member_state_dict(i))
                fit = self._fitted(net, results[i], x_ev, at_init[i], p.lr)
                fit.info["stacked_seeds"] = len(group)  # train_seconds is the shared wall time of the group
                fitted.append(fit)
            del stacked
        return fitted
