"""Empirical NTK of modules with K outputs: the output-averaged ("trace") and the full kernel."""

from __future__ import annotations

from itertools import product

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from compbench.theory import empirical_ntk, kernel_regression, standard_mlp_ntk  # noqa: E402
from compbench.theory import ntk as ntk_module  # noqa: E402
from compbench.training.batched_mlp import init_stacked_mlp, member_module  # noqa: E402

K = 3


class Output(torch.nn.Module):
    """Output k of a (n, K) module: the per-output network whose eNTK is J_k J_kᵀ."""

    def __init__(self, k: int) -> None:
        super().__init__()
        self.k = k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x[:, self.k]


class Scaled(torch.nn.Module):
    """A parameter outside any covered layer (the generic engine's part of a mixed module)."""

    def __init__(self, n: int) -> None:
        super().__init__()
        self.scale = torch.nn.Parameter(torch.linspace(0.5, 1.5, n, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.scale


def rel_err(a, b) -> float:
    a, b = np.asarray(a), np.asarray(b)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def onehot_inputs(n: tuple[int, ...], stride: int, count: int) -> np.ndarray:
    cells = np.array(list(product(*(range(k) for k in n))))[::stride][:count]
    return np.concatenate([np.eye(k)[cells[:, c]] for c, k in enumerate(n)], axis=1)


def mlp(seed: int = 0, width: int = 24, depth: int = 2) -> torch.nn.Module:
    return member_module(init_stacked_mlp([seed], 6, width, depth, 1.0, dtype=torch.float64, d_out=K), 0)


def convnet() -> torch.nn.Module:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(2, 4, 3, padding=1),
        torch.nn.BatchNorm2d(4),
        torch.nn.ReLU(),
        torch.nn.Conv2d(4, 4, 3, stride=2),
        torch.nn.GroupNorm(2, 4),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(4 * 2 * 2, 8),
        Scaled(8),
        torch.nn.LayerNorm(8),
        torch.nn.Linear(8, K),
    ).double()
    with torch.no_grad():  # non-trivial running statistics, used in eval mode
        net[1].running_mean.uniform_(-0.5, 0.5)
        net[1].running_var.uniform_(0.5, 2.0)
    return net


def inputs(kind: str, n: int, seed: int) -> torch.Tensor:
    shape = (n, 6) if kind == "mlp" else (n, 2, 6, 6)
    return torch.randn(*shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def build(kind: str) -> torch.nn.Module:
    return mlp() if kind == "mlp" else convnet()


def brute_force_full(net: torch.nn.Module, xa: torch.Tensor, xb: torch.Tensor) -> torch.Tensor:
    """(n_a·K × n_b·K) from the whole-batch Jacobian of the outputs (eval mode), by torch.func."""
    from torch.func import functional_call, jacrev

    params = {k: v.detach() for k, v in net.named_parameters()}
    buffers = {k: v.detach() for k, v in net.named_buffers()}
    net.eval()

    def jac(x):
        J = jacrev(lambda p: functional_call(net, (p, buffers), (x,)))(params)  # name -> (n, K, *shape)
        return torch.cat([j.reshape(x.shape[0] * K, -1) for j in J.values()], dim=1)

    return jac(xa) @ jac(xb).T


# ---------------------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("structured", [True, False])
@pytest.mark.parametrize("kind", ["mlp", "convnet"])
def test_trace_is_the_mean_of_the_per_output_kernels(kind, structured):
    net = build(kind)
    x, z = inputs(kind, 7, 1), inputs(kind, 5, 2)
    for xb in (None, z):
        trace = empirical_ntk(net, x, xb, structured=structured)
        per = [empirical_ntk(torch.nn.Sequential(net, Output(k)), x, xb, structured=structured) for k in range(K)]
        assert trace.shape == (7, 7 if xb is None else 5) and trace.dtype == torch.float64
        torch.testing.assert_close(trace, sum(per) / K, rtol=1e-11, atol=1e-12)
        assert rel_err(per[0], per[1]) > 1e-3  # the outputs' kernels really differ


@pytest.mark.parametrize("structured", [True, False])
@pytest.mark.parametrize("kind", ["mlp", "convnet"])
def test_full_kernel_is_every_pair_of_outputs_sample_major(kind, structured):
    net = build(kind)
    x, z = inputs(kind, 6, 3), inputs(kind, 4, 4)
    full = empirical_ntk(net, x, z, structured=structured, outputs="full")
    assert full.shape == (6 * K, 4 * K)
    torch.testing.assert_close(full, brute_force_full(net, x, z), rtol=1e-10, atol=1e-11)
    for k in range(K):  # diagonal blocks: the per-output kernels
        per = empirical_ntk(torch.nn.Sequential(net, Output(k)), x, z, structured=structured)
        torch.testing.assert_close(full[k::K, k::K], per, rtol=1e-11, atol=1e-12)
    assert full[0::K, 1::K].abs().max() > 1e-3  # off-diagonal blocks are not zero at finite width
    sym = empirical_ntk(net, x, structured=structured, outputs="full")
    torch.testing.assert_close(sym, brute_force_full(net, x, x), rtol=1e-10, atol=1e-11)
    torch.testing.assert_close(sym, sym.T, rtol=1e-12, atol=1e-12)


# max_memory with K-fold factors in chunks smaller than the batch, and one below a single sample's
# K-fold factors (the trace is then summed output by output); per sample (trace): mlp 3360 bytes,
# convnet 22960 (both engines together; the chunk takes a third or a quarter of max_memory).
@pytest.mark.parametrize(("kind", "chunked", "split"), [("mlp", 30_000, 8_000), ("convnet", 100_000, 20_000)])
def test_memory_bounded_multi_output_kernels_equal_the_unbounded(kind, chunked, split, monkeypatch):
    net = build(kind)
    x, z = inputs(kind, 7, 5), inputs(kind, 5, 6)
    ref = {o: (empirical_ntk(net, x, outputs=o), empirical_ntk(net, x, z, outputs=o)) for o in ("trace", "full")}
    calls: list[tuple[int, int]] = []  # (samples, outputs per factor) of every _factors call
    real_factors, real_split = ntk_module._factors, ntk_module._sum_of_outputs
    splits: list[int] = []

    def spy(module, layers, xs, n_out=1, *rest):  # noqa: ANN001, ANN002, ANN202
        calls.append((xs.shape[0], n_out))
        return real_factors(module, layers, xs, n_out, *rest)

    def spy_split(*args):  # noqa: ANN002, ANN202
        splits.append(1)
        return real_split(*args)

    monkeypatch.setattr(ntk_module, "_factors", spy)
    monkeypatch.setattr(ntk_module, "_sum_of_outputs", spy_split)
    monkeypatch.setattr(ntk_module, "_JAC_CACHE_ELEMENTS", 0)  # the generic part recomputes, uncached
    for o, (sym, cross) in ref.items():
        torch.testing.assert_close(empirical_ntk(net, x, outputs=o, max_memory=chunked, chunk_size=2), sym, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(empirical_ntk(net, x, z, outputs=o, max_memory=chunked, chunk_size=2), cross, rtol=1e-12, atol=1e-12)
        assert calls and max(c[0] for c in calls) < 5 and {c[1] for c in calls} == {K}  # K-fold factors, in chunks
        calls.clear()
    assert not splits
    for xb, want in ((None, ref["trace"][0]), (z, ref["trace"][1])):
        torch.testing.assert_close(empirical_ntk(net, x, xb, max_memory=split), want, rtol=1e-12, atol=1e-12)
        assert calls and {c[1] for c in calls} == {1} and len(splits) == 1  # one output at a time
        calls.clear(), splits.clear()
        # the generic engine alone: K-fold Jacobians, or one output at a time below their size
        torch.testing.assert_close(empirical_ntk(net, x, xb, structured=False, chunk_size=2), want, rtol=1e-11, atol=1e-12)
        assert not splits
        torch.testing.assert_close(empirical_ntk(net, x, xb, structured=False, max_memory=40_000), want, rtol=1e-11, atol=1e-12)
        assert len(splits) == 1
        splits.clear()


def test_scalar_modules_ignore_outputs():
    net = member_module(init_stacked_mlp([2], 6, 16, 2, 1.0, dtype=torch.float64), 0)  # output (n,)
    column = torch.nn.Sequential(*list(net)[:-1])  # the same network with output (n, 1)
    x, z = inputs("mlp", 6, 7), inputs("mlp", 4, 8)
    ref = empirical_ntk(net, x, z)
    for module in (net, column):
        for structured in (True, False):
            base = empirical_ntk(module, x, z, structured=structured)
            assert base.shape == (6, 4)
            assert torch.equal(empirical_ntk(module, x, z, structured=structured, outputs="full"), base)
            torch.testing.assert_close(base, ref, rtol=1e-12, atol=1e-12)


def test_empty_inputs_and_bad_outputs_argument():
    net = mlp()
    x = inputs("mlp", 4, 9)
    assert empirical_ntk(net, x[:0], x, outputs="full").shape == (0, 4 * K)
    assert empirical_ntk(net, x, x[:0], outputs="full").shape == (4 * K, 0)
    assert empirical_ntk(net, x[:0], outputs="trace").shape == (0, 0)
    with pytest.raises(ValueError, match="outputs must be 'trace' or 'full', got 'diag'"):
        empirical_ntk(net, x, outputs="diag")


def test_one_sample_probe_and_float32_module():
    net = mlp().float()
    x = inputs("mlp", 1, 10).float()
    full = empirical_ntk(net, x, outputs="full")
    assert full.shape == (K, K) and full.dtype == torch.float64
    torch.testing.assert_close(full, empirical_ntk(mlp(), x.double(), outputs="full"), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------- wide limit


@pytest.mark.slow
@pytest.mark.parametrize("depth", [1, 2])
def test_wide_k_output_mlp_agrees_with_the_analytic_ntk(depth):
    """Width 4096, K = 3: the trace eNTK and every output's eNTK are the scalar analytic NTK.

    Tolerance: each entry of Θ is a sum over H hidden units of i.i.d. terms, dominated by the
    readout term a·a'/H; its relative std is √(E[relu⁴]/E[relu²]² − 1)/√H = √5/√H ≈ 3.5% at
    H = 4096 (measured single draws: 3.3–5.8%). One draw must be within 0.1 (≈ 3 std), the
    mean of three draws within 0.05 (as the scalar test_standard_mlp_ntk_matches_empirical). A
    wrong normalisation (summing the outputs rather than averaging: ×3) would be off by 200%.
    """
    x = onehot_inputs((9, 9), stride=8, count=10)
    theory, _ = standard_mlp_ntk(x, width=4096, depth=depth)
    xt = torch.tensor(x)
    traces = []
    for seed in range(3):
        net = member_module(init_stacked_mlp([seed], 18, 4096, depth, 1.0, dtype=torch.float64, d_out=K), 0)
        trace = empirical_ntk(net, xt).numpy()
        traces.append(trace)
        assert rel_err(trace, theory) < 0.1
        if seed == 0:  # (the trace is exactly the outputs' mean: test_trace_is_the_mean_of_...)
            for k in range(K):
                assert rel_err(empirical_ntk(torch.nn.Sequential(net, Output(k)), xt).numpy(), theory) < 0.1
    assert rel_err(np.mean(traces, axis=0), theory) < 0.05


def test_full_and_trace_kernel_regression_agree_as_width_grows():
    """Θ_full → Θ ⊗ I: regressing (n, K) targets on the trace kernel and the flattened targets on
    the full kernel converge. For two hidden layers the cross-output blocks and the spread of the
    diagonal blocks shrink as 1/√H (measured per-seed gaps: 0.50–0.53, 0.14–0.17, 0.055–0.065 at
    H = 32, 256, 2048)."""
    x = onehot_inputs((9, 9), stride=1, count=81)
    rng = np.random.default_rng(0)
    tr = rng.choice(81, 20, replace=False)
    ev = np.setdiff1d(np.arange(81), tr)
    xtr, xev = torch.tensor(x[tr]), torch.tensor(x[ev])
    Y = rng.standard_normal((20, K))
    gaps = []
    for width in (32, 256, 2048):
        per_seed = []
        for seed in range(2):
            net = member_module(init_stacked_mlp([seed], 18, width, 2, 1.0, dtype=torch.float64, d_out=K), 0)
            trace = kernel_regression(empirical_ntk(net, xtr).numpy(), empirical_ntk(net, xev, xtr).numpy(), Y)
            full = kernel_regression(
                empirical_ntk(net, xtr, outputs="full").numpy(), empirical_ntk(net, xev, xtr, outputs="full").numpy(), Y.reshape(-1)
            ).reshape(len(ev), K)
            per_seed.append(rel_err(full, trace))
        gaps.append(float(np.mean(per_seed)))
    assert gaps[0] > gaps[1] > gaps[2]
    assert gaps[2] < 0.1 and gaps[2] < gaps[0] / 4  # 1/√H predicts a factor 8 over 32 → 2048
