"""Empirical NTK (torch) against brute force and against the analytic large-width kernels."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from compbench.theory import empirical_ntk, relu_ntk, standard_mlp_ntk  # noqa: E402
from compbench.theory import ntk as ntk_module  # noqa: E402


def onehot_inputs(n: tuple[int, ...], stride: int, count: int) -> np.ndarray:
    cells = np.array(list(product(*(range(k) for k in n))))[::stride][:count]
    return np.concatenate([np.eye(k)[cells[:, c]] for c, k in enumerate(n)], axis=1)


def rel_err(K: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(K - ref) / np.linalg.norm(ref))


# ---------------------------------------------------------------- exactness of the computation


def small_net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 8),
        torch.nn.BatchNorm1d(8),
        torch.nn.Tanh(),
        torch.nn.Linear(8, 1),
    ).double()


def brute_force_ntk(module: torch.nn.Module, xa: torch.Tensor, xb: torch.Tensor) -> np.ndarray:
    """One backward per sample (as the reference code's get_ntk.py), eval mode."""
    module.eval()
    params = [p for p in module.parameters() if p.requires_grad]

    def grads(x: torch.Tensor) -> torch.Tensor:
        rows = []
        for i in range(x.shape[0]):
            g = torch.autograd.grad(module(x[i : i + 1]).sum(), params)
            rows.append(torch.cat([t.reshape(-1) for t in g]))
        return torch.stack(rows)

    return (grads(xa) @ grads(xb).T).detach().numpy()


def test_empirical_ntk_equals_brute_force_and_restores_mode():
    net = small_net()
    with torch.no_grad():  # non-trivial running statistics so eval mode matters
        net[1].running_mean.uniform_(-0.5, 0.5)
        net[1].running_var.uniform_(0.5, 2.0)
    net.train()
    xa = torch.randn(3, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    xb = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    K = empirical_ntk(net, xa)
    assert net.training and all(m.training for m in net.modules())
    assert K.dtype == torch.float64 and K.shape == (3, 3)
    ref = brute_force_ntk(net, xa, xa)
    net.train()
    assert rel_err(K.numpy(), ref) < 1e-10
    Kab = empirical_ntk(net, xa, xb)
    assert Kab.shape == (3, 5)
    assert rel_err(Kab.numpy(), brute_force_ntk(net, xa, xb)) < 1e-10


def test_empirical_ntk_chunking_and_uncached_path(monkeypatch):
    net = small_net()
    x = torch.randn(7, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(3))
    z = torch.randn(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    full, full_cross = empirical_ntk(net, x), empirical_ntk(net, x, z)
    assert rel_err(empirical_ntk(net, x, chunk_size=2).numpy(), full.numpy()) < 1e-12
    monkeypatch.setattr(ntk_module, "_JAC_CACHE_ELEMENTS", 0)
    assert rel_err(empirical_ntk(net, x, chunk_size=3).numpy(), full.numpy()) < 1e-12
    assert rel_err(empirical_ntk(net, x, z, chunk_size=2).numpy(), full_cross.numpy()) < 1e-12
    np.testing.assert_allclose(full.numpy(), full.numpy().T, rtol=1e-12)


def test_empirical_ntk_rejects_outputs_that_are_neither_scalar_nor_vector():
    # (n, K) outputs are supported (tests/test_ntk_outputs.py); (n, 2, 2) is not
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Unflatten(1, (2, 2)))
    with pytest.raises(ValueError, match=r"one scalar \(n,\) or a vector \(n, K\).*\(2, 2, 2\)"):
        empirical_ntk(net, torch.randn(4, 3))


def test_empirical_ntk_float32_module_is_accumulated_in_float64():
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    x = torch.randn(6, 4)
    K = empirical_ntk(net, x)
    assert K.dtype == torch.float64
    assert rel_err(K.numpy(), empirical_ntk(net.double(), x.double()).numpy()) < 1e-5


# ---------------------------------------------------------------- analytic NTK (NTK parameterisation)


class NTKParamMLP(torch.nn.Module):
    """f = σ_w/√H · w2·relu(σ_w/√d · W1 x + σ_b b1) + σ_b b2, all parameters N(0, 1)."""

    def __init__(self, d: int, width: int, sigma_w2: float, sigma_b2: float, seed: int) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        kw = {"generator": g, "dtype": torch.float64}
        self.W1 = torch.nn.Parameter(torch.randn(width, d, **kw))
        self.b1 = torch.nn.Parameter(torch.randn(width, **kw))
        self.w2 = torch.nn.Parameter(torch.randn(width, **kw))
        self.b2 = torch.nn.Parameter(torch.randn((), **kw))
        self.sw, self.sb, self.width, self.d = sigma_w2**0.5, sigma_b2**0.5, width, d

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.sw / self.d**0.5 * x @ self.W1.T + self.sb * self.b1
        return self.sw / self.width**0.5 * torch.relu(h) @ self.w2 + self.sb * self.b2


def test_relu_ntk_matches_wide_ntk_parameterised_network():
    x = onehot_inputs((3, 4), stride=1, count=10)
    sigma_w2, sigma_b2 = 2.0, 0.1
    theory = relu_ntk(x, depth=1, sigma_w2=sigma_w2, sigma_b2=sigma_b2)
    errors = {}
    for width in (256, 4096):
        errors[width] = [
            rel_err(empirical_ntk(NTKParamMLP(x.shape[1], width, sigma_w2, sigma_b2, seed), torch.tensor(x)).numpy(), theory)
            for seed in range(3)
        ]
    assert max(errors[4096]) < 0.05
    assert np.mean(errors[4096]) < np.mean(errors[256])


# ---------------------------------------------------------------- standard parameterisation (mlp adapter)


def standard_mlp(d: int, width: int, depth: int, scale: float, seed: int, dtype=torch.float32) -> torch.nn.Module:
    """The paper's DenseNet: W ~ N(0, (σ√(2/fan_in))²), b ~ U(±σ/√fan_in) in every layer."""
    torch.manual_seed(seed)
    dims = [d] + [width] * depth + [1]
    layers: list[torch.nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(dims[:-1], dims[1:])):
        lin = torch.nn.Linear(fan_in, fan_out, dtype=dtype)
        with torch.no_grad():
            lin.weight.normal_(0.0, scale * (2.0 / fan_in) ** 0.5)
            lin.bias.uniform_(-scale / fan_in**0.5, scale / fan_in**0.5)
        layers.append(lin)
        if i < depth:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers)


@pytest.mark.parametrize("depth", [1, 2])
@pytest.mark.parametrize("scale", [1.0, 0.01])
def test_standard_mlp_ntk_matches_empirical(depth, scale):
    x = onehot_inputs((9, 9), stride=8, count=10)
    width = 2048
    theory, _ = standard_mlp_ntk(x, width=width, depth=depth, init_scale=scale)
    kernels = [
        empirical_ntk(standard_mlp(18, width, depth, scale, seed), torch.tensor(x, dtype=torch.float32)).numpy()
        for seed in range(4)
    ]
    # A single width-2048 draw fluctuates by ≈5-7% (≈√5/√H per diagonal entry of the readout
    # term), so the seed-averaged kernel is compared. The readout bias adds a constant 1 to Θ,
    # which dominates at small σ; it is removed so the σ-dependent part is what gets checked.
    mean_k = np.mean(kernels, axis=0)
    assert rel_err(mean_k, theory) < 0.05
    assert rel_err(mean_k - 1.0, theory - 1.0) < 0.05
    if depth == 1:  # one hidden layer: Θ − 1 ∝ σ² exactly (and ≈ ∝ H, the readout term dominates)
        ref, _ = standard_mlp_ntk(x, width=width, depth=1, init_scale=1.0)
        np.testing.assert_allclose(theory - 1.0, scale**2 * (ref - 1.0), rtol=1e-12)


@pytest.mark.parametrize("depth", [1, 2])
def test_standard_mlp_nngp_is_output_covariance(depth):
    x = onehot_inputs((9, 9), stride=8, count=10)
    width, scale, n_seeds = 128, 1.0, 300
    _, nngp = standard_mlp_ntk(x, width=width, depth=depth, init_scale=scale)
    xt = torch.tensor(x)
    with torch.no_grad():
        f0 = np.stack(
            [standard_mlp(18, width, depth, scale, seed, torch.float64)(xt)[:, 0].numpy() for seed in range(n_seeds)]
        )
    cov = f0.T @ f0 / n_seeds  # the mean of f_0 over initialisations is 0
    assert rel_err(cov, nngp) < 0.2


def test_empirical_ntk_accepts_numpy_float64_inputs_for_float32_module():
    net = torch.nn.Sequential(torch.nn.Linear(3, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    x = np.random.default_rng(0).normal(size=(4, 3))
    K = empirical_ntk(net, x)
    assert rel_err(K.numpy(), empirical_ntk(net, torch.tensor(x, dtype=torch.float32)).numpy()) == 0.0
