"""The empirical NTK's symmetric Gram as a half product (#34 item 4): the same kernel, half the matrix products.

K(x, x) was computed as a whole block and then mirrored, so below ~7,000 samples (one chunk) its "one triangle"
saved no work. Each diagonal block is now halved recursively: only the blocks above the diagonal are multiplied.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from compbench.theory import empirical_ntk  # noqa: E402
from compbench.theory import ntk as ntk_module  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _mlp(n_out: int = 1) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 16), nn.Tanh(), nn.Linear(16, n_out)).double()


class _Tokens(nn.Module):
    """A Linear on T = 3 tokens (the structured engine's "positions" mode with T > 1), a LayerNorm, a mean readout."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.embed, self.norm, self.head = nn.Linear(4, 32), nn.LayerNorm(32), nn.Linear(32, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(torch.tanh(self.embed(x.reshape(x.shape[0], 3, 4))))).mean(1)


def _conv() -> nn.Module:
    torch.manual_seed(2)
    return nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                         nn.Linear(4 * 6 * 6, 1)).double()


def _brute(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """J Jᵀ from per-sample autograd gradients (the definition)."""
    rows = []
    params = [p for p in module.parameters() if p.requires_grad]
    module.eval()
    for i in range(x.shape[0]):
        out = module(x[i:i + 1]).reshape(-1)
        for k in range(out.numel()):
            grads = torch.autograd.grad(out[k], params, retain_graph=True)
            rows.append(torch.cat([g.reshape(-1) for g in grads]).double())
    J = torch.stack(rows)
    return J @ J.T


CASES = {
    "mlp": (_mlp, lambda n: torch.randn(n, 8, dtype=torch.float64, generator=_gen()), {}),
    "mlp-generic": (_mlp, lambda n: torch.randn(n, 8, dtype=torch.float64, generator=_gen()), {"structured": False}),
    "mlp-full": (lambda: _mlp(3), lambda n: torch.randn(n, 8, dtype=torch.float64, generator=_gen()), {"outputs": "full"}),
    "mlp-trace": (lambda: _mlp(3), lambda n: torch.randn(n, 8, dtype=torch.float64, generator=_gen()), {"outputs": "trace"}),
    "tokens": (lambda: _Tokens().double(), lambda n: torch.randn(n, 12, dtype=torch.float64, generator=_gen()), {}),
    "conv": (_conv, lambda n: torch.randn(n, 1, 6, 6, dtype=torch.float64, generator=_gen()), {}),
    "conv-chunked": (_conv, lambda n: torch.randn(n, 1, 6, 6, dtype=torch.float64, generator=_gen()), {"max_memory": 200_000}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_half_product_gives_the_whole_products_kernel(monkeypatch, case):
    build, inputs, kw = CASES[case]
    module, x = build(), inputs(37)
    if case == "conv":
        module[1].running_mean.uniform_(-0.5, 0.5, generator=_gen(3))
        module[1].running_var.uniform_(0.5, 2.0, generator=_gen(4))
    monkeypatch.setattr(ntk_module, "_HALF_LEAF", 10**9)  # every diagonal block whole, then mirrored: as before
    whole = empirical_ntk(module, x, **kw)
    monkeypatch.setattr(ntk_module, "_HALF_LEAF", 5)  # 37 rows halved down to leaves of 4 and 5 (odd splits included)
    half = empirical_ntk(module, x, **kw)
    assert torch.equal(half, half.T)
    scale = whole.abs().max()
    assert scale > 0 and ((half - whole).abs().max() / scale).item() <= 1e-12
    if kw.get("outputs") != "trace":
        truth = _brute(module, x)
        assert ((half - truth).abs().max() / truth.abs().max()).item() <= 1e-12


def _gram_flops(x: torch.Tensor, x_b: torch.Tensor | None) -> int:
    with FlopCounterMode(display=False) as counter:
        empirical_ntk(_mlp(), x, x_b)
    return counter.get_total_flops()


def test_the_symmetric_gram_does_about_half_the_work():
    """N = 1024 is one chunk: before, K(x, x) cost the products of K(x, x') (ratio ≈ 1); now (1 + 256/1024)/2."""
    x = torch.randn(1024, 8, dtype=torch.float64, generator=_gen())
    other = torch.randn(1024, 8, dtype=torch.float64, generator=_gen(1))
    ratio = _gram_flops(x, None) / _gram_flops(x, other)
    assert 0.55 <= ratio <= 0.65
