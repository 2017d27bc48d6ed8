"""The stacked MLP and the `mlp` adapter with K output units (K-output regression, K classes)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from compbench.adapters import get_adapter  # noqa: E402
from compbench.adapters.mlp import MLPParams  # noqa: E402
from compbench.losses import loss_problem  # noqa: E402
from compbench.encodings.batch import Batch  # noqa: E402
from compbench.encodings.onehot import onehot  # noqa: E402
from compbench.tasks import make_task  # noqa: E402
from compbench.theory import kernel_regression, standard_mlp_ntk  # noqa: E402
from compbench.theory.options import TheoryOptions  # noqa: E402
from compbench.training.batched_mlp import (  # noqa: E402
    init_stacked_mlp,
    loss_and_grads,
    member_module,
    stacked_forward,
    train_stacked,
)

K = 3
SEEDS = [3, 7, 11]


def grid() -> tuple[np.ndarray, tuple[int, ...], np.ndarray]:
    """The 9 × 9 grid of the additive task: cells, value counts, and the training mask (a cross)."""
    task = make_task("additive", anchors=[[4], [4]])
    return task.cells, task.n_values, task.train_mask


def data(kind: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """All inputs, training inputs and training targets: (n, K) floats or integer classes."""
    cells, n_values, mask = grid()
    x = torch.as_tensor(onehot(cells, n_values), dtype=torch.float64)
    if kind == "mse":
        y = torch.as_tensor(np.stack([cells[:, 0] - 4.0, cells[:, 1] - 4.0, (cells.sum(1) % 3) - 1.0], axis=1) / 4)
    else:
        y = torch.as_tensor((cells[:, 0] + 2 * cells[:, 1]) % K)
    m = torch.as_tensor(mask)
    return x, x[m], y[m]


def reference_loss(out: torch.Tensor, y: torch.Tensor, loss: str) -> torch.Tensor:
    """Per-member loss by plain torch, as the batched_mlp docstring defines it."""
    if loss == "mse":
        return ((out - y) ** 2).sum(-1).mean(-1)  # summed over outputs, averaged over samples
    if loss == "cross_entropy":
        return torch.stack([torch.nn.functional.cross_entropy(o, y) for o in out])
    return torch.nn.functional.softplus(-y * out).mean(-1)


# ------------------------------------------------------------------------------ stacked training


@pytest.mark.parametrize("optimizer", ["gd", "adam"])
@pytest.mark.parametrize("loss", ["mse", "cross_entropy"])
def test_k_output_stack_equals_each_seed_alone(loss, optimizer):
    x, xt, yt = data(loss)
    kw = dict(d_in=x.shape[1], width=32, depth=2, init_scale=1.0, dtype=torch.float64, d_out=K)
    together = init_stacked_mlp(SEEDS, **kw)
    # settings where every member stops early, at different steps (each on its own)
    lr, tol = (0.01, 0.05) if (loss, optimizer) == ("cross_entropy", "adam") else (0.05, 0.05 if loss == "mse" else 0.2)
    res = train_stacked(together, xt, yt, loss=loss, optimizer=optimizer, lr=lr, max_steps=300, loss_tol=tol)
    out = stacked_forward(together, x)
    assert out.shape == (3, len(x), K)
    assert all(res.converged) and len(set(res.steps)) > 1
    for i, seed in enumerate(SEEDS):
        alone = init_stacked_mlp([seed], **kw)
        r1 = train_stacked(alone, xt, yt, loss=loss, optimizer=optimizer, lr=lr, max_steps=300, loss_tol=tol)
        assert r1.steps[0] == res.steps[i] and r1.converged[0] == res.converged[i]
        np.testing.assert_allclose(stacked_forward(alone, x)[0], out[i], rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("optimizer", ["gd", "adam"])
@pytest.mark.parametrize("loss", ["mse", "cross_entropy"])
def test_k_output_member_equals_plain_torch_training(loss, optimizer):
    """A member of the stack trains exactly like its nn.Sequential under torch.optim and autograd."""
    x, xt, yt = data(loss)
    kw = dict(d_in=x.shape[1], width=24, depth=2, init_scale=1.0, dtype=torch.float64, d_out=K)
    stack = init_stacked_mlp(SEEDS, **kw)
    modules = [member_module(stack, i) for i in range(len(SEEDS))]
    steps, lr = 40, 0.05
    train_stacked(stack, xt, yt, loss=loss, optimizer=optimizer, lr=lr, max_steps=steps, loss_tol=0.0)
    for i, net in enumerate(modules):
        opt = torch.optim.SGD(net.parameters(), lr=lr) if optimizer == "gd" else torch.optim.Adam(net.parameters(), lr=lr)
        for _ in range(steps):
            opt.zero_grad()
            reference_loss(net(xt).unsqueeze(0), yt, loss)[0].backward()
            opt.step()
        with torch.no_grad():
            np.testing.assert_allclose(net(x), stacked_forward(stack, x)[i], rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize(("depth", "loss", "centred"), [(1, "mse", False), (2, "mse", True), (1, "cross_entropy", False), (3, "cross_entropy", True)])
def test_k_output_hand_written_backprop_equals_autograd(depth, loss, centred):
    x, xt, yt = data(loss)
    layers = init_stacked_mlp(SEEDS, d_in=x.shape[1], width=16, depth=depth, init_scale=1.0, dtype=torch.float64, d_out=K)
    offset = torch.randn(3, len(xt), K, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) if centred else None
    per_member, grads = loss_and_grads(layers, xt, yt, loss, offset)
    params = [p.clone().requires_grad_(True) for layer in layers for p in layer if p is not None]
    rebuilt = [(params[2 * i], params[2 * i + 1]) for i in range(len(layers))]
    out = stacked_forward(rebuilt, xt) - (0 if offset is None else offset)
    ref = reference_loss(out, yt, loss)
    ref_grads = torch.autograd.grad(ref.sum(), params)
    torch.testing.assert_close(per_member, ref.detach(), rtol=1e-12, atol=1e-14)
    assert len(grads) == len(ref_grads)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-12)


def test_k_output_mse_of_one_output_is_the_scalar_loss():
    """K = 1 with (n,) targets is the scalar network: the summed-over-outputs loss is its MSE."""
    x, xt, yt = data("mse")
    one = init_stacked_mlp(SEEDS, d_in=x.shape[1], width=16, depth=1, init_scale=1.0, dtype=torch.float64)
    per_member, _ = loss_and_grads(one, xt, yt[:, 0])
    out = stacked_forward(one, xt)
    assert out.shape == (3, len(xt))
    torch.testing.assert_close(per_member, ((out - yt[:, 0]) ** 2).mean(1), rtol=1e-14, atol=0)


def test_scalar_training_reproduces_the_scalar_only_code():
    """K = 1: the same numbers as before K outputs existed.

    tests/golden/batched_mlp_scalar.json was written by compbench/training/batched_mlp.py as of
    commit 02a6345 (scalar outputs only) for these three runs; the new code reproduced it bit for
    bit when it was written, and the tolerance here only leaves room for another BLAS's rounding.
    """
    golden = json.loads((Path(__file__).parent / "golden" / "batched_mlp_scalar.json").read_text())
    cells, n_values, mask = grid()
    task = make_task("additive", anchors=[[4], [4]])
    x = torch.as_tensor(onehot(cells, n_values), dtype=torch.float64)
    m = torch.as_tensor(mask)
    xt, yt = x[m], torch.as_tensor(task.y[mask], dtype=torch.float64)
    for name, c in golden["cases"].items():
        layers = init_stacked_mlp(golden["seeds"], d_in=x.shape[1], width=golden["width"], depth=golden["depth"], init_scale=1.0, dtype=torch.float64)
        y = yt if c["loss"] == "mse" else torch.where(yt >= 0, 1.0, -1.0).to(torch.float64)
        off = stacked_forward(layers, xt).clone() if c["centred"] else None
        res = train_stacked(layers, xt, y, loss=c["loss"], optimizer=c["optimizer"], lr=c["lr"], max_steps=c["max_steps"], loss_tol=1e-4, offset=off)
        assert res.steps == c["steps"], name
        np.testing.assert_allclose(res.final_loss, c["final_loss"], rtol=1e-10, err_msg=name)
        np.testing.assert_allclose(stacked_forward(layers, x).numpy(), np.array(c["outputs"]), rtol=1e-10, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("d_out", [1, K])
def test_member_module_is_the_member(d_out):
    x, _, _ = data("mse")
    layers = init_stacked_mlp(SEEDS, d_in=x.shape[1], width=16, depth=2, init_scale=1.0, dtype=torch.float64, d_out=d_out)
    out = stacked_forward(layers, x)
    assert out.shape == ((3, len(x)) if d_out == 1 else (3, len(x), d_out))
    for i in range(3):
        module = member_module(layers, i)
        assert isinstance(module, torch.nn.Sequential)
        with torch.no_grad():
            got = module(x)
        assert got.shape == out[i].shape
        torch.testing.assert_close(got, out[i], rtol=1e-12, atol=1e-12)


def test_the_readout_of_k_outputs_draws_after_the_hidden_layers():
    """The RNG stream is the scalar network's up to the readout: hidden layers are identical."""
    one = init_stacked_mlp([5], d_in=6, width=8, depth=2, init_scale=1.0, dtype=torch.float64)
    three = init_stacked_mlp([5], d_in=6, width=8, depth=2, init_scale=1.0, dtype=torch.float64, d_out=3)
    for (w1, b1), (w3, b3) in zip(one[:-1], three[:-1]):
        assert torch.equal(w1, w3) and torch.equal(b1, b3)
    assert three[-1][0].shape == (1, 8, 3) and three[-1][1].shape == (1, 1, 3)


@pytest.mark.parametrize(
    ("d_out", "loss", "y", "offset", "match"),
    [
        (3, "logistic", torch.ones(5, 3), None, "logistic.*3 outputs"),
        (1, "cross_entropy", torch.zeros(5, dtype=torch.int64), None, "≥ 2 output units"),
        (3, "cross_entropy", torch.zeros(5), None, "integer class targets"),
        (3, "cross_entropy", torch.tensor([0, 1, 2, 3, 0]), None, r"0\.\.2"),
        (3, "mse", torch.zeros(5), None, r"targets of shape \(5, 3\)"),
        (1, "mse", torch.zeros(5, 1), None, r"targets of shape \(5,\)"),
        (3, "mse", torch.zeros(5, 3), torch.zeros(2, 5), r"offset must have the outputs' shape \(2, 5, 3\)"),
        (3, "hinge", torch.zeros(5, 3), None, "unknown loss 'hinge'"),
    ],
)
def test_targets_that_do_not_fit_the_outputs_are_refused(d_out, loss, y, offset, match):
    layers = init_stacked_mlp([0, 1], d_in=4, width=8, depth=1, init_scale=1.0, dtype=torch.float64, d_out=d_out)
    x = torch.randn(5, 4, dtype=torch.float64)
    with pytest.raises(ValueError, match=match):
        train_stacked(layers, x, y.to(torch.float64) if y.is_floating_point() else y, loss=loss, max_steps=1, offset=offset)
    with pytest.raises(ValueError, match=match):
        loss_and_grads(layers, x, y.to(torch.float64) if y.is_floating_point() else y, loss, offset)


# ----------------------------------------------------------------------------------- the adapter


def batches(kind: str) -> tuple[Batch, Batch]:
    """Train / evaluate batches on the 9 × 9 grid: 'classes' (3 classes), 'vector' (3 outputs), 'scalar'."""
    cells, n_values, mask = grid()
    x = onehot(cells, n_values)
    if kind == "classes":
        y, n_classes = (cells[:, 0] + 2 * cells[:, 1]) % K, K
    elif kind == "vector":
        y, n_classes = np.stack([cells[:, 0] - 4.0, cells[:, 1] - 4.0, cells.sum(1) - 8.0], axis=1) / 4, 0
    else:
        y, n_classes = (cells[:, 0] - cells[:, 1]) / 4.0, 0
    ids = np.arange(len(cells))
    train = Batch(x[mask], cells[mask], ids[mask], n_values, y[mask], n_classes)
    evaluate = Batch(x, cells, ids, n_values, y, n_classes)
    return train, evaluate


def test_mlp_adapter_multiclass_mse_trains_the_stack_on_one_hot_targets():
    train, evaluate = batches("classes")
    params = dict(width=32, depth=1, lr=0.05, max_steps=200, dtype="float64")
    fits = get_adapter("mlp")(MLPParams(**params)).fit_seeds(train, evaluate, [0, 1])
    layers = init_stacked_mlp([0, 1], train.x.shape[1], 32, 1, 1.0, True, torch.float64, d_out=K)
    x_tr, x_ev = torch.as_tensor(train.x), torch.as_tensor(evaluate.x)
    f0_ev = stacked_forward(layers, x_ev).numpy()
    onehot_targets = torch.as_tensor(np.eye(K)[train.y])
    train_stacked(layers, x_tr, onehot_targets, lr=0.05, max_steps=200, loss_tol=1e-4)
    expected = stacked_forward(layers, x_ev).numpy()
    for i, fit in enumerate(fits):
        assert fit.predictions.shape == evaluate.prediction_shape == (81, K)
        assert fit.initial_train.shape == (len(train), K) and fit.initial_eval.shape == (81, K)
        np.testing.assert_allclose(fit.predictions, expected[i], rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(fit.initial_eval, f0_ev[i], rtol=1e-12, atol=1e-12)
        assert fit.info["ntk_outputs"] == "shared" and fit.kernels is None


def test_mlp_adapter_cross_entropy_fits_the_training_classes():
    train, evaluate = batches("classes")
    adapter = get_adapter("mlp")(MLPParams(width=64, loss="cross_entropy", optimizer="adam", lr=0.01, max_steps=2000, loss_tol=1e-2))
    assert adapter.theory_options() == TheoryOptions("min_norm")
    for fit in adapter.fit_seeds(train, evaluate, [0, 1]):
        assert fit.error is None and fit.info["converged"]
        assert fit.predictions.shape == (81, K)
        train_pred = fit.predictions[train.cell_ids].argmax(1)
        np.testing.assert_array_equal(train_pred, train.y)


def test_mlp_adapter_center_gives_zero_f0_with_k_outputs():
    train, evaluate = batches("vector")
    fits = get_adapter("mlp")(MLPParams(width=16, center=True, max_steps=5)).fit_seeds(train, evaluate, [0])
    assert fits[0].initial_train.shape == (len(train), K) and not fits[0].initial_train.any()
    assert fits[0].predictions.shape == (81, K)


@pytest.mark.parametrize("kind", ["classes", "vector"])
def test_mlp_adapter_empirical_kernels_trace_and_full(kind):
    train, evaluate = batches(kind)
    fit_t, = get_adapter("mlp")(MLPParams(width=32, max_steps=2, theory="empirical")).fit_seeds(train, evaluate, [4])
    adapter_f = get_adapter("mlp")(MLPParams(width=32, max_steps=2, theory="empirical", ntk_outputs="full"))
    fit_f, = adapter_f.fit_seeds(train, evaluate, [4])
    n, m = len(train), len(evaluate)
    assert fit_t.info["ntk_outputs"] == "trace" and fit_f.info["ntk_outputs"] == "full"
    assert fit_t.kernels[0].shape == (n, n) and fit_t.kernels[1].shape == (m, n)
    assert fit_f.kernels[0].shape == (n * K, n * K) and fit_f.kernels[1].shape == (m * K, n * K)
    assert adapter_f.theory_kernel_name() == "empirical_ntk_full"
    for full, trace in zip(fit_f.kernels, fit_t.kernels):  # the trace is the mean of the diagonal blocks
        np.testing.assert_allclose(sum(full[k::K, k::K] for k in range(K)) / K, trace, rtol=1e-10, atol=1e-10)


def test_mlp_adapter_scalar_task_keeps_scalar_shapes_and_info():
    train, evaluate = batches("scalar")
    fit, = get_adapter("mlp")(MLPParams(width=16, max_steps=3, theory="empirical", ntk_outputs="full")).fit_seeds(train, evaluate, [0])
    assert fit.predictions.shape == (81,) and fit.initial_train.shape == (len(train),)
    assert fit.kernels[0].shape == (len(train), len(train)) and "ntk_outputs" not in fit.info


def test_lazy_k_output_mlp_matches_the_shared_analytic_ntk_theory():
    """Wide and lazy: every output follows kernel regression on the scalar analytic NTK from f_0."""
    train, evaluate = batches("vector")
    params = MLPParams(width=1000, lr=0.01, max_steps=20000, loss_tol=1e-4)
    adapter = get_adapter("mlp")(params)
    fit, = adapter.fit_seeds(train, evaluate, [0])
    assert fit.info["converged"] and fit.info["ntk_outputs"] == "shared"
    K_tt, K_et = adapter.kernel(train, train), adapter.kernel(evaluate, train)
    theory = kernel_regression(K_tt, K_et, train.regression_targets(), f0_train=fit.initial_train, f0_cross=fit.initial_eval)
    test = np.setdiff1d(np.arange(len(evaluate)), train.cell_ids)
    resid = fit.predictions[test] - theory[test]
    spread = theory[test] - theory[test].mean(0)
    assert np.sum(resid**2) / np.sum(spread**2) < 0.05


def test_wrong_loss_for_the_task_is_a_clear_error():
    scalar_tr, scalar_ev = batches("scalar")
    with pytest.raises(ValueError, match="cross_entropy needs a multi-class task.*scalar targets"):
        get_adapter("mlp")(MLPParams(loss="cross_entropy", width=8)).fit_seeds(scalar_tr, scalar_ev, [0])
    vec_tr, vec_ev = batches("vector")
    with pytest.raises(ValueError, match="cross_entropy needs a multi-class task.*3-output targets"):
        get_adapter("mlp")(MLPParams(loss="cross_entropy", width=8)).fit_seeds(vec_tr, vec_ev, [0])
    cls_tr, cls_ev = batches("classes")
    with pytest.raises(ValueError, match="logistic needs a ±1 classification task.*multiclass.*cross_entropy"):
        get_adapter("mlp")(MLPParams(loss="logistic", width=8)).fit_seeds(cls_tr, cls_ev, [0])
    assert loss_problem("cross_entropy", "multiclass") is None
    assert loss_problem("mse", "multiclass") is None and loss_problem("mse", "regression") is None
    assert loss_problem("logistic", "classification") is None
    assert "multi-class" in loss_problem("cross_entropy", "classification")
    assert "±1" in loss_problem("logistic", "regression")


def test_full_ntk_outputs_needs_the_empirical_theory():
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="ntk_outputs: full needs theory: empirical"):
        MLPParams(ntk_outputs="full")
    assert MLPParams(theory="empirical", ntk_outputs="full").ntk_outputs == "full"


def test_analytic_ntk_unchanged_by_k_outputs():
    """kernel() is the scalar analytic NTK for any number of outputs (the network's is NTK ⊗ I)."""
    train, evaluate = batches("classes")
    got = get_adapter("mlp")(MLPParams(width=50, depth=2)).kernel(evaluate, train)
    ref, _ = standard_mlp_ntk(evaluate.x, train.x, width=50, depth=2)
    np.testing.assert_array_equal(got, ref)
