"""Benchmarks: empirical NTK Gram of a 3-layer MLP and a small ConvNet at N = 256 and 1024.

Compares (a) a per-sample autograd loop, (b) `vmap(jacrev)` materialising all Jacobians, (c)
compbench's generic path (`empirical_ntk(structured=False)`: chunked per-sample Jacobians, float64
Grams) and (d) `compbench.theory.empirical_ntk` (the structured per-layer path, chosen
automatically). Run with `pytest tests/benchmarks --benchmark-only`.
"""

from __future__ import annotations

import pytest
import torch
from torch.func import functional_call, jacrev, vmap

from compbench.theory import empirical_ntk


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(18, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512), torch.nn.ReLU(),
        torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 1), torch.nn.Flatten(0),
    )


def convnet() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(2, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(16 * 8 * 16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1), torch.nn.Flatten(0),
    )


def inputs(kind: str, n: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.rand(n, 18, generator=g) if kind == "mlp" else torch.rand(n, 2, 8, 16, generator=g)


def per_sample_loop(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    rows = []
    for i in range(len(x)):
        grads = torch.autograd.grad(model(x[i : i + 1]).sum(), list(model.parameters()))
        rows.append(torch.cat([g.reshape(-1) for g in grads]).double())
    j = torch.stack(rows)
    return j @ j.T


def vmap_jacrev(model: torch.nn.Module, x: torch.Tensor) -> torch.Tensor:
    params = {k: v.detach() for k, v in model.named_parameters()}

    def f(p, xi):
        return functional_call(model, p, (xi.unsqueeze(0),)).squeeze()

    jac = vmap(jacrev(f), in_dims=(None, 0))(params, x)
    j = torch.cat([v.reshape(len(x), -1) for v in jac.values()], dim=1).double()
    return j @ j.T


@pytest.mark.parametrize("kind", ["mlp", "convnet"])
@pytest.mark.parametrize("n", [256, 1024])
@pytest.mark.parametrize("method", ["loop", "vmap_jacrev", "generic", "compbench"])
def test_ntk_gram(benchmark, kind, n, method):
    model = (mlp if kind == "mlp" else convnet)().eval()
    x = inputs(kind, n)
    fn = {
        "loop": per_sample_loop,
        "vmap_jacrev": vmap_jacrev,
        "generic": lambda m, xx: empirical_ntk(m, xx, structured=False),  # compbench's chunked torch.func path
        "compbench": lambda m, xx: empirical_ntk(m, xx),  # the structured path (automatic)
    }[method]
    benchmark.group = f"ntk-{kind}-N{n}"
    # compbench's path takes ~0.1 s, where one-time setup (first-call allocations) would dominate a
    # single round: it gets a warm-up and 3 rounds; the 1-30 s baselines one round each.
    fast = method == "compbench"
    K = benchmark.pedantic(fn, args=(model, x), rounds=3 if fast else 1, iterations=1, warmup_rounds=1 if fast else 0)
    assert K.shape == (n, n)
