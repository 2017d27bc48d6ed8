"""Benchmarks: achieved GFLOP/s of compbench's NTK path against torch.matmul's on the same machine.

The NTK's floating-point work is counted once with `torch.utils.flop_counter.FlopCounterMode`
(matrix products and convolutions, forward and backward; elementwise work is not counted), then
divided by the benchmark's median time. `torch.matmul` is timed on square matrices in float32 and
float64 (the structured NTK path accumulates its Grams in float64). Results go to `extra_info`,
which `tests/benchmarks/table.py` prints (`python tests/benchmarks/table.py -k gflops`, on an idle machine:
#34's target is every eNTK at ≥ 80% of the float64 matmul's rate on the cores it uses).
"""

from __future__ import annotations

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from compbench.theory import empirical_ntk

from test_bench_ntk import convnet, inputs, mlp  # noqa: E402  (same models as the NTK benchmarks)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_gflops(benchmark, dtype):
    n = 2048
    g = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=g, dtype=getattr(torch, dtype))
    b = torch.randn(n, n, generator=g, dtype=getattr(torch, dtype))
    benchmark.group = "gflops"
    benchmark.pedantic(torch.matmul, args=(a, b), rounds=5, warmup_rounds=1)
    benchmark.extra_info["gflop"] = 2 * n**3 / 1e9
    benchmark.extra_info["gflops"] = 2 * n**3 / 1e9 / benchmark.stats.stats.median


@pytest.mark.parametrize("kind, n", [("mlp", 1024), ("mlp", 2048), ("convnet", 1024)])
def test_ntk_gflops(benchmark, kind, n):
    """K(x, x)'s rate on the products it does (`gflops`) and on those of the whole Gram K(x, x′) of the same size
    (`useful_gflops`: the symmetric Gram is a half product, so this is the speed it gives against a full product).
    Both are to be read against `test_matmul_gflops[float64]` on the same machine (the Grams are float64)."""
    model = (mlp if kind == "mlp" else convnet)().eval()
    x = inputs(kind, n)
    other = torch.rand(x.shape, generator=torch.Generator().manual_seed(2))  # as many samples, not x: K(x, x′) whole
    with FlopCounterMode(display=False) as counter:
        empirical_ntk(model, x)
    flop = counter.get_total_flops()
    with FlopCounterMode(display=False) as whole:
        empirical_ntk(model, x, other)
    benchmark.group = "gflops"
    benchmark.pedantic(empirical_ntk, args=(model, x), rounds=3, warmup_rounds=1)
    benchmark.extra_info["gflop"] = flop / 1e9
    benchmark.extra_info["gflops"] = flop / 1e9 / benchmark.stats.stats.median
    benchmark.extra_info["useful_gflops"] = whole.get_total_flops() / 1e9 / benchmark.stats.stats.median
