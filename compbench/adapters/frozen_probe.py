"""The `frozen_probe` adapter: a fixed, randomly initialised network's features and a linear readout.

The features φ(x) are the last hidden layer of a network that is never trained: for images,
`channels` 3×3 valid convolutions (ReLU, MaxPool(2) after each while there is room), flattened,
then a dense ReLU layer of `width` units; for vectors, `depth` dense ReLU layers of `width` units.
Weights are Kaiming-normal (fan-in, ReLU gain), biases zero, drawn on the CPU from the seed, so a
seed gives the same features everywhere. φ is scaled by 1/√width and followed by a constant
feature √`intercept`.

The readout is the ridge fit of the training targets on φ, w = argmin |Φw − y|² + λ|w|² with
λ = `ridge` (solved in the primal by numpy's SVD `lstsq` on the stacked system [Φ; √λ I] w ≈ [y; 0],
one column per output; `ridge: 0` is the min-norm least-squares fit). That is a kernel machine by
construction: kernel ridge regression with the linear kernel k(x, x') = φ(x)·φ(x') and the same λ.
The adapter hands that kernel and λ to the theory engine, which solves it in the dual by its own
solver. The two agree to rounding times the dual's condition number: random ReLU features of
similar images are nearly collinear (Gram condition numbers ~1e9 at λ = 0 on small sprite grids,
where the two differ by ~1e-7), so the default λ = 1e-4 keeps them within 1e-8
(tests/test_frozen_probe.py). This
is the transfer rows of Schott et al. 2022 with random instead of pretrained features, which
cannot be downloaded here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from pydantic import Field

from compbench.adapters.base import Adapter, AdapterParams, Batch, Fitted
from compbench.adapters.registry import register_adapter
from compbench.theory.options import TheoryOptions


class FrozenProbeParams(AdapterParams):
    """The frozen feature network and the readout's intercept feature."""

    channels: list[int] = Field(default=[16, 32], description="images: filters of the 3×3 convolutions")
    width: int = Field(default=512, ge=1, description="features: units of the last (dense ReLU) layer")
    depth: int = Field(default=1, ge=1, description="vectors: dense ReLU layers")
    intercept: float = Field(default=1.0, ge=0, description="the constant feature's square (0: none)")
    ridge: float = Field(default=1e-4, ge=0, description="λ of the readout's ridge penalty (0: min-norm least squares)")


def _features(p: FrozenProbeParams, x: np.ndarray, seed: int) -> np.ndarray:
    """φ(x) (n × width [+ 1]) of the network seeded by `seed`, float64."""
    import torch
    import torch.nn as nn

    gen = torch.Generator().manual_seed(int(seed))
    layers: list[nn.Module] = []
    xt = torch.as_tensor(np.asarray(x, dtype=np.float32))

    def init(layer: nn.Module, fan_in: int) -> nn.Module:
        with torch.no_grad():
            layer.weight.copy_(torch.randn(layer.weight.shape, generator=gen) * (2.0 / fan_in) ** 0.5)
            layer.bias.zero_()
        return layer

    if xt.ndim == 4:
        c, h, w = xt.shape[1:]
        for out in p.channels:
            layers += [init(nn.Conv2d(c, out, 3), c * 9), nn.ReLU()]
            c, h, w = out, h - 2, w - 2
            if min(h, w) < 1:
                raise ValueError(f"frozen_probe: inputs {xt.shape[2]}×{xt.shape[3]} are too small for {len(p.channels)} 3×3 convolutions")
            if min(h, w) >= 2:
                layers.append(nn.MaxPool2d(2))
                h, w = h // 2, w // 2
        layers.append(nn.Flatten())
        d = c * h * w
        layers += [init(nn.Linear(d, p.width), d), nn.ReLU()]
    else:
        xt = xt.reshape(len(xt), -1)
        d = xt.shape[1]
        for _ in range(p.depth):
            layers += [init(nn.Linear(d, p.width), d), nn.ReLU()]
            d = p.width
    net = nn.Sequential(*layers).eval()
    with torch.no_grad():
        phi = torch.cat([net(xt[i : i + 1024]) for i in range(0, len(xt), 1024)]).double().numpy() / np.sqrt(p.width)
    if p.intercept > 0:
        phi = np.concatenate([phi, np.full((len(phi), 1), np.sqrt(p.intercept))], axis=1)
    return phi


@register_adapter("frozen_probe")
class FrozenProbeAdapter(Adapter):
    """A fixed random network's features with a min-norm linear readout (exactly a linear-kernel machine)."""

    Params = FrozenProbeParams
    tags = ("kernels", "probes")
    params: FrozenProbeParams

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Per seed: draw the feature network, fit the readout in the primal, give the linear kernel to the theory."""
        y = train.regression_targets()
        out = []
        for seed in seeds:
            phi_tr = _features(self.params, train.x, seed)
            phi_ev = _features(self.params, evaluate.x, seed)
            lam = self.params.ridge
            a = np.concatenate([phi_tr, np.sqrt(lam) * np.eye(phi_tr.shape[1])]) if lam > 0 else phi_tr
            rhs = np.concatenate([y, np.zeros((phi_tr.shape[1], *y.shape[1:]))]) if lam > 0 else y
            w, *_ = np.linalg.lstsq(a, rhs, rcond=None)
            preds = phi_ev @ w
            # its features are its representation, so the linear probe re-fits its own read-out (up to the probe's λ)
            out.append(Fitted(preds, info={"features": int(phi_tr.shape[1])}, kernels=(phi_tr @ phi_tr.T, phi_ev @ phi_tr.T),
                              features=(phi_tr, phi_ev), kernel_diagonal=np.sum(phi_ev**2, axis=1)))
        return out

    def theory_options(self) -> TheoryOptions:
        """Kernel ridge regression with the readout's λ (min-norm at λ = 0)."""
        lam = self.params.ridge
        return TheoryOptions("ridge", lam) if lam > 0 else TheoryOptions("min_norm")

    def theory_kernel_name(self) -> str:
        """The linear kernel on the frozen features."""
        return "linear(frozen random features)"
