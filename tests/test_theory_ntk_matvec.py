"""Matrix-free NTK products and CG kernel regression against the dense empirical NTK and lstsq."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from compbench.theory import empirical_ntk, kernel_regression, ntk_cg_regression, ntk_matvec  # noqa: E402
from compbench.theory.ntk_matvec import NTKOperator, ntk_diagonal  # noqa: E402


def rel(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def randomise_bn(net: torch.nn.Module) -> None:
    """Non-trivial running statistics, so that eval mode matters."""
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=g) - 0.5)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 1.5 + 0.5)
                m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
                m.bias.copy_(torch.rand(m.bias.shape, generator=g) - 0.5)


def mlp() -> tuple[torch.nn.Module, tuple[int, ...]]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))
    return net.double(), (6,)


def convnet() -> tuple[torch.nn.Module, tuple[int, ...]]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(2, 6, 3, padding=1), torch.nn.ReLU(), torch.nn.BatchNorm2d(6),
        torch.nn.Conv2d(6, 6, 3), torch.nn.ReLU(), torch.nn.BatchNorm2d(6), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(6 * 2 * 2, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1), torch.nn.Flatten(0),
    ).double()
    randomise_bn(net)
    return net, (2, 6, 6)


def resnet() -> tuple[torch.nn.Module, tuple[int, ...]]:
    pytest.importorskip("torchvision")
    from compbench.adapters import get_adapter
    from compbench.adapters.deep import scalar_module

    adapter = get_adapter("resnet")
    torch.manual_seed(0)
    net = scalar_module(adapter(adapter.Params(channels=[4, 6], blocks=[1, 1])).build((1, 6, 6))).double()
    randomise_bn(net)
    return net, (1, 6, 6)


def vit() -> tuple[torch.nn.Module, tuple[int, ...]]:
    pytest.importorskip("timm")
    from compbench.adapters import get_adapter
    from compbench.adapters.deep import scalar_module

    adapter = get_adapter("vit")
    torch.manual_seed(0)
    net = scalar_module(adapter(adapter.Params(dim=8, depth=1, heads=2, mlp_dim=8, patch_size=4)).build((1, 8, 8))).double()
    for m in net.modules():  # the fused CPU attention kernel has no forward-mode or double-backward formula
        if hasattr(m, "fused_attn"):
            m.fused_attn = False
    return net, (1, 8, 8)


BUILDERS = {"mlp": mlp, "convnet": convnet, "resnet": resnet, "vit": vit}


def inputs(shape: tuple[int, ...], n: int, seed: int) -> torch.Tensor:
    return torch.randn((n,) + shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("jvp", ["forward", "reverse"])
@pytest.mark.parametrize("kind", list(BUILDERS))
def test_matvec_equals_dense_gram(kind, jvp):
    net, shape = BUILDERS[kind]()
    x, z = inputs(shape, 11, 1), inputs(shape, 5, 2)
    net.train()
    stats = {k: b.clone() for k, b in net.named_buffers()}
    K, Kc = empirical_ntk(net, x).numpy(), empirical_ntk(net, z, x).numpy()
    g = torch.Generator().manual_seed(3)
    v, V = torch.randn(11, dtype=torch.float64, generator=g), torch.randn(11, 3, dtype=torch.float64, generator=g)

    Kv = ntk_matvec(net, x, chunk=4, jvp=jvp)(v)
    assert Kv.dtype == torch.float64 and Kv.shape == (11,)
    assert rel(Kv, K @ v.numpy()) < 1e-10
    assert rel(ntk_matvec(net, x, chunk=4, jvp=jvp)(V), K @ V.numpy()) < 1e-10
    cross = ntk_matvec(net, z, x, chunk=2, jvp=jvp)(v)
    assert cross.shape == (5,) and rel(cross, Kc @ v.numpy()) < 1e-10
    # chunking changes only the summation order
    assert rel(ntk_matvec(net, x, chunk=1, jvp=jvp)(v), Kv) < 1e-12
    assert rel(ntk_matvec(net, x, chunk=64, jvp=jvp)(v), Kv) < 1e-12
    # modes restored, running statistics untouched (eval mode throughout)
    assert all(m.training for m in net.modules())
    assert all(torch.equal(b, stats[k]) for k, b in net.named_buffers())


def test_float32_module_precision():
    net = torch.nn.Sequential(torch.nn.Linear(6, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    x = torch.randn(20, 6, generator=torch.Generator().manual_seed(1))
    v = torch.randn(20, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    K = empirical_ntk(net, x).numpy()
    Kv = ntk_matvec(net, x, chunk=7)(v)
    assert Kv.dtype == torch.float64
    assert rel(Kv, K @ v.numpy()) < 1e-5  # float32 passes; see the module docstring
    # smooth network: a float64 evaluation of the same parameters agrees to float32 round-off
    assert rel(ntk_matvec(net, x, dtype=torch.float64)(v), K @ v.numpy()) < 1e-5


def test_snapshot_of_parameters_and_errors():
    net, shape = mlp()
    x = inputs(shape, 6, 1)
    v = torch.ones(6, dtype=torch.float64)
    matvec = ntk_matvec(net, x)
    before = matvec(v)
    with torch.no_grad():
        for p in net.parameters():
            p.mul_(2.0)  # training after the snapshot must not change the operator
    assert torch.equal(matvec(v), before)
    with pytest.raises(ValueError, match="shape"):
        matvec(torch.ones(5, dtype=torch.float64))
    with pytest.raises(ValueError, match="scalar output"):
        ntk_matvec(torch.nn.Linear(3, 2).double(), torch.randn(4, 3, dtype=torch.float64))(torch.ones(4))
    with pytest.raises(ValueError, match="chunk"):
        ntk_matvec(net, x, chunk=0)


def test_diagonal_matches_dense():
    net, shape = convnet()
    x = inputs(shape, 9, 1)
    np.testing.assert_allclose(ntk_diagonal(net, x, chunk=4), np.diag(empirical_ntk(net, x).numpy()), rtol=1e-12)
    op = NTKOperator(net)
    assert op.n_params == sum(p.numel() for p in net.parameters())


# ---------------------------------------------------------------------------- CG kernel regression


def problem(n: int = 24, n_eval: int = 7, duplicate: bool = False):
    net, shape = convnet()
    x = inputs(shape, n, 1)
    if duplicate:  # a consistent singular K: repeated samples with equal targets
        x = torch.cat([x, x[:6]])
    z = inputs(shape, n_eval, 2)
    rng = np.random.default_rng(0)
    y = rng.standard_normal(n)
    if duplicate:
        y = np.concatenate([y, y[:6]])
    with torch.no_grad():
        net.eval()
        f0_tr, f0_ev = net(x).numpy(), net(z).numpy()
    return net, x, z, y, f0_tr, f0_ev, empirical_ntk(net, x).numpy(), empirical_ntk(net, z, x).numpy()


@pytest.mark.parametrize("preconditioner", ["jacobi", "none"])
def test_cg_regression_matches_dense(preconditioner):
    net, x, z, y, f0_tr, f0_ev, K, Kc = problem()
    kw = {"preconditioner": preconditioner, "tol": 1e-12}
    pred, info = ntk_cg_regression(net, x, y, z, **kw)
    assert info.converged and info.relative_residual[0] <= 1e-12 and info.iterations[0] > 0
    assert rel(pred, kernel_regression(K, Kc, y)) < 1e-9
    pred, info = ntk_cg_regression(net, x, y, z, f0_train=f0_tr, f0_eval=f0_ev, **kw)
    assert rel(pred, kernel_regression(K, Kc, y, f0_train=f0_tr, f0_cross=f0_ev)) < 1e-9
    pred, info = ntk_cg_regression(net, x, y, z, ridge=0.3, f0_train=f0_tr, f0_eval=f0_ev, **kw)
    assert rel(pred, kernel_regression(K, Kc, y, ridge=0.3, f0_train=f0_tr, f0_cross=f0_ev)) < 1e-9
    Y = np.stack([y, -2 * y + 1], axis=1)  # several target columns
    pred, info = ntk_cg_regression(net, x, Y, z, **kw)
    assert pred.shape == (7, 2) and info.alpha.shape == (24, 2) and len(info.iterations) == 2
    assert rel(pred, kernel_regression(K, Kc, Y)) < 1e-9
    # warm start from the solution: nothing left to do
    _, again = ntk_cg_regression(net, x, Y, z, x0=info.alpha, **kw)
    assert again.iterations == [0, 0] and again.converged


def test_cg_regression_singular_gram_is_min_norm():
    net, x, z, y, f0_tr, f0_ev, K, Kc = problem(duplicate=True)
    assert np.linalg.matrix_rank(K, tol=1e-10 * np.linalg.norm(K, 2)) == 24 < K.shape[0]
    ref = kernel_regression(K, Kc, y, f0_train=f0_tr, f0_cross=f0_ev)
    alpha_min_norm = np.linalg.lstsq(K, y - f0_tr, rcond=1e-12)[0]
    pred, info = ntk_cg_regression(net, x, y, z, f0_train=f0_tr, f0_eval=f0_ev, tol=1e-11, preconditioner="none")
    assert info.converged
    assert rel(pred, ref) < 1e-8
    assert rel(info.alpha, alpha_min_norm) < 1e-6  # unpreconditioned CG from 0 stays in range(K)
    # Jacobi gives another solution of the same consistent system, hence the same predictions
    pred, info = ntk_cg_regression(net, x, y, z, f0_train=f0_tr, f0_eval=f0_ev, tol=1e-11, preconditioner="jacobi")
    assert info.converged and rel(pred, ref) < 1e-8


def test_cg_regression_reports_non_convergence():
    net, x, z, y, *_ = problem()
    with pytest.warns(RuntimeWarning, match="did not converge in max_iter=1"):
        pred, info = ntk_cg_regression(net, x, y, z, max_iter=1, tol=1e-10)
    assert not info.converged and info.iterations == [1] and info.relative_residual[0] > 1e-10
    assert "max_iter=1" in info.message and info.summary()["cg_converged"] is False
    assert np.all(np.isfinite(pred))


def test_cg_regression_inconsistent_system_is_not_hidden():
    net, x, z, y, *_ = problem()
    x2 = torch.cat([x, x[:1]])
    y2 = np.concatenate([y, [y[0] + 1.0]])  # the same input with two targets: no exact solution
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, info = ntk_cg_regression(net, x2, y2, z, max_iter=60, tol=1e-10, preconditioner="none")
    assert not info.converged and info.message
    assert any(issubclass(w.category, RuntimeWarning) for w in caught)


def test_cg_regression_float32_default_tolerance():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
    x = torch.randn(30, 6, generator=torch.Generator().manual_seed(1))
    z = torch.randn(5, 6, generator=torch.Generator().manual_seed(2))
    y = np.sign(np.random.default_rng(0).standard_normal(30))
    pred, info = ntk_cg_regression(net, x, y, z)
    assert info.converged and info.tol == 1e-3
    ref = kernel_regression(empirical_ntk(net, x).numpy(), empirical_ntk(net, z, x).numpy(), y)
    assert rel(pred, ref) < 1e-2


def test_cg_regression_validates_arguments():
    net, shape = mlp()
    x = inputs(shape, 4, 1)
    with pytest.raises(ValueError, match="y_train"):
        ntk_cg_regression(net, x, np.ones(3), x)
    with pytest.raises(ValueError, match="ridge"):
        ntk_cg_regression(net, x, np.ones(4), x, ridge=-1.0)
    with pytest.raises(ValueError, match="preconditioner"):
        ntk_cg_regression(net, x, np.ones(4), x, preconditioner="ilu")
    # zero targets: α = 0 exactly, predictions f0
    pred, info = ntk_cg_regression(net, x, np.zeros(4), x, f0_eval=np.full(4, 0.5))
    assert info.converged and info.iterations == [0] and np.all(pred == 0.5)


def test_forward_mode_gap_is_explained():
    net, shape = vit()
    for m in net.modules():
        if hasattr(m, "fused_attn"):
            m.fused_attn = True
    x = inputs(shape, 3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ntk_matvec(net, x)(torch.ones(3, dtype=torch.float64))
        except NotImplementedError as exc:
            assert "jvp='reverse'" in str(exc) and "fused_attn" in str(exc)
        else:  # a torch with a forward-mode formula for the fused kernel: nothing to explain
            pass
