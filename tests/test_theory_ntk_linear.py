"""The structured NTK of Linear-only networks equals the generic per-sample-Jacobian path."""

from __future__ import annotations

import pytest
import torch

from compbench.theory import empirical_ntk
from compbench.theory.ntk_linear import NotLinearOnlyError, linear_ntk


def mlp(depth: int, bias: bool) -> torch.nn.Module:
    torch.manual_seed(depth + 10 * bias)
    layers: list[torch.nn.Module] = []
    d = 12
    for _ in range(depth):
        layers += [torch.nn.Linear(d, 32, bias=bias), torch.nn.ReLU()]
        d = 32
    return torch.nn.Sequential(*layers, torch.nn.Linear(d, 1, bias=bias), torch.nn.Flatten(0)).double()


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("bias", [True, False])
def test_structured_equals_generic(depth, bias):
    m = mlp(depth, bias)
    x, xb = torch.rand(30, 12, dtype=torch.float64), torch.rand(9, 12, dtype=torch.float64)
    generic = empirical_ntk(m, x, structured=False)
    fast = linear_ntk(m, x)
    assert float((fast - generic).norm() / generic.norm()) < 1e-12
    cross = empirical_ntk(m, x, xb, structured=False)
    assert float((linear_ntk(m, x, xb) - cross).norm() / cross.norm()) < 1e-12
    assert float((empirical_ntk(m, x, xb) - cross).norm() / cross.norm()) < 1e-12  # dispatch picks it


def test_structured_equals_brute_force_loop_on_three_samples():
    m = mlp(2, True)
    x = torch.rand(3, 12, dtype=torch.float64)
    rows = [torch.cat([g.reshape(-1) for g in torch.autograd.grad(m(x[i : i + 1]).sum(), list(m.parameters()))]) for i in range(3)]
    j = torch.stack(rows)
    torch.testing.assert_close(linear_ntk(m, x), j @ j.T, rtol=1e-12, atol=1e-12)


def test_non_linear_parameters_are_refused():
    conv = torch.nn.Sequential(torch.nn.Conv2d(1, 2, 3), torch.nn.Flatten(), torch.nn.Linear(2 * 4 * 4, 1), torch.nn.Flatten(0))
    with pytest.raises(NotLinearOnlyError):
        linear_ntk(conv, torch.rand(4, 1, 6, 6))
    # ...while the dispatcher falls back to the generic path for it.
    assert empirical_ntk(conv, torch.rand(4, 1, 6, 6)).shape == (4, 4)
