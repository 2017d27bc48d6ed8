"""Adapters: registry, kernel machine, and the MLP's lazy (kernel) and rich regimes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from compbench.adapters import UnknownAdapterError, get_adapter
from compbench.adapters.kernel import KernelParams
from compbench.adapters.mlp import MLPParams
from compbench.encodings import encode
from compbench.encodings.onehot import onehot
from compbench.scoring.metrics import r2, sign_accuracy
from compbench.tasks import make_task
from compbench.theory import kernel_regression, overlap_kernel
from compbench.theory.predict import theory_predictions
from compbench.training.batched_mlp import init_stacked_mlp, stacked_forward, train_stacked


def fit(adapter, task, seeds=(0,)):
    enc = encode("onehot", task)
    return adapter.fit_seeds(enc.train, enc.evaluate, list(seeds))


def test_unknown_adapter_suggests_closest():
    with pytest.raises(UnknownAdapterError, match=r"unknown adapter 'kernal'; did you mean 'kernel'\? known: .*mlp"):
        get_adapter("kernal")


def test_onehot_inner_product_counts_agreeing_components():
    cells = np.array([[0, 1, 2], [0, 2, 2], [1, 0, 0]])
    x = onehot(cells, (2, 3, 3))
    assert x.shape == (3, 8)
    np.testing.assert_array_equal(x @ x.T, [[3, 2, 0], [2, 3, 0], [0, 0, 3]])


def test_kernel_adapter_matches_closed_form_memorization_leak():
    # Overlap kernel with salience S = 0.4 on extrapolation (p = 1): slope m = S/(1-S) = 2/3 exactly.
    task = make_task("additive", anchors=[[4], [4]])
    adapter = get_adapter("kernel")(KernelParams(kernel="overlap", weights=[0.0, 0.4, 1.0]))
    (fitted,) = fit(adapter, task)
    test = ~task.train_mask
    np.testing.assert_allclose(fitted.predictions[test], (2 / 3) * task.y[test], atol=1e-9)


def test_kernel_adapter_rejects_non_psd_weights():
    from compbench.adapters import InvalidModelError

    task = make_task("additive", anchors=[[4], [4]])
    adapter = get_adapter("kernel")(KernelParams(kernel="overlap", weights=[0.0, 0.9, 0.1]))
    with pytest.raises(InvalidModelError, match="not positive semi-definite"):
        fit(adapter, task)


def test_stacked_training_equals_training_each_seed_alone():
    task = make_task("additive", anchors=[[4], [4]])
    x = torch.as_tensor(onehot(task.cells, task.n_values), dtype=torch.float64)
    xt, yt = x[torch.as_tensor(task.train_mask)], torch.as_tensor(task.y[task.train_mask])
    kw = dict(d_in=x.shape[1], width=64, depth=2, init_scale=1.0, dtype=torch.float64)
    together = init_stacked_mlp([3, 7, 11], **kw)
    res = train_stacked(together, xt, yt, lr=0.01, max_steps=300, loss_tol=1e-3)
    for i, seed in enumerate([3, 7, 11]):
        alone = init_stacked_mlp([seed], **kw)
        res1 = train_stacked(alone, xt, yt, lr=0.01, max_steps=300, loss_tol=1e-3)
        assert res1.steps[0] == res.steps[i]
        np.testing.assert_allclose(stacked_forward(alone, x)[0], stacked_forward(together, x)[i], rtol=1e-9, atol=1e-9)


def test_minibatch_training_of_stacked_seeds_equals_each_seed_alone_and_uses_the_batches():
    task = make_task("additive", anchors=[[4], [4]])
    x = torch.as_tensor(onehot(task.cells, task.n_values), dtype=torch.float64)
    xt, yt = x[torch.as_tensor(task.train_mask)], torch.as_tensor(task.y[task.train_mask])
    kw = dict(d_in=x.shape[1], width=16, depth=3, init_scale=1.0, dtype=torch.float64)
    run = dict(lr=0.01, max_steps=50, loss_tol=1e-12, batch_size=5)
    together = init_stacked_mlp([3, 7], **kw)
    res = train_stacked(together, xt, yt, **run)
    for i, seed in enumerate([3, 7]):
        alone = init_stacked_mlp([seed], **kw)
        train_stacked(alone, xt, yt, **run)
        np.testing.assert_allclose(stacked_forward(alone, x)[0], stacked_forward(together, x)[i], rtol=1e-9, atol=1e-9)
        # final_loss is the loss on every training sample, not on the last batch
        full = float(((stacked_forward(together, xt)[i] - yt) ** 2).mean())
        assert res.final_loss[i] == pytest.approx(full, rel=1e-9)
    # Batches of 5 of the 17 training cells are not full-batch steps; a batch as large as the data is.
    full_batch = init_stacked_mlp([3], **kw)
    train_stacked(full_batch, xt, yt, lr=0.01, max_steps=50, loss_tol=1e-12)
    assert not torch.allclose(stacked_forward(full_batch, x)[0], stacked_forward(together, x)[0])
    whole = init_stacked_mlp([3], **kw)
    train_stacked(whole, xt, yt, lr=0.01, max_steps=50, loss_tol=1e-12, batch_size=len(xt))
    np.testing.assert_allclose(stacked_forward(whole, x)[0], stacked_forward(full_batch, x)[0], rtol=1e-12)


def test_each_member_stops_early_on_its_own():
    task = make_task("transitive_equivalence")
    x = torch.as_tensor(onehot(task.cells, task.n_values), dtype=torch.float64)
    xt, yt = x[torch.as_tensor(task.train_mask)], torch.as_tensor(task.y[task.train_mask])
    layers = init_stacked_mlp([0, 1], d_in=x.shape[1], width=32, depth=1, init_scale=1.0, dtype=torch.float64)
    # Member 1 gets a diverging copy: NaN weights make its loss non-finite at step 0.
    with torch.no_grad():
        layers[0][0][1].fill_(float("nan"))
    res = train_stacked(layers, xt, yt, lr=0.05, max_steps=5000, loss_tol=1e-3)
    assert res.diverged == [False, True] and res.steps[1] == 0
    assert res.converged[0] and res.final_loss[0] < 1e-3


def _mlp_fit(task, **params):
    adapter = get_adapter("mlp")(MLPParams(**params))
    enc = encode("onehot", task)
    fits = adapter.fit_seeds(enc.train, enc.evaluate, [0, 1])
    K_tt, K_et = adapter.kernel(enc.train, enc.train), adapter.kernel(enc.evaluate, enc.train)
    theory = [theory_predictions(K_tt, K_et, enc.train.y, f0_train=f.initial_train, f0_eval=f.initial_eval) for f in fits]
    return fits, theory


def test_lazy_mlp_matches_its_analytic_ntk_prediction_on_addition():
    task = make_task("additive", anchors=[[0, 8], [0, 8]])
    fits, theory = _mlp_fit(task, width=1000, init_scale=1.0, lr=0.01, max_steps=20000, loss_tol=1e-4)
    test = ~task.train_mask
    for fit, th in zip(fits, theory):
        assert fit.info["converged"]
        assert r2(th[test], fit.predictions[test]) > 0.95
        # memorization leak: held-out slope clearly below 1 (theory with S ≈ 0.43, p = 2: ≈ 0.85)
        slope = np.polyfit(task.y[test], fit.predictions[test], 1)[0]
        assert 0.75 < slope < 0.95


def test_rich_mlp_beats_kernel_on_transitive_equivalence():
    task = make_task("transitive_equivalence")
    fits, theory = _mlp_fit(task, width=1000, init_scale=1e-3, lr=0.1, max_steps=20000, loss_tol=1e-4)
    test = ~task.train_mask
    K = overlap_kernel(task.cells, task.cells, [0.0, 0.3, 1.0])
    kernel_pred = kernel_regression(K[np.ix_(task.train_mask, task.train_mask)], K[:, task.train_mask], task.y[task.train_mask])
    kernel_acc = sign_accuracy(kernel_pred[test], task.y[test])
    assert kernel_acc == 0.5  # all held-out predictions are 0: a tie on every pair
    for fit in fits:
        assert sign_accuracy(fit.predictions[test], task.y[test]) == 1.0


@pytest.mark.parametrize(("depth", "loss", "centred"), [(1, "mse", False), (2, "mse", True), (3, "logistic", False)])
def test_hand_written_backprop_equals_autograd(depth, loss, centred):
    from compbench.training.batched_mlp import loss_and_grads

    task = make_task("transitive_equivalence")
    x = torch.as_tensor(onehot(task.cells, task.n_values), dtype=torch.float64)
    y = torch.as_tensor(task.y)
    layers = init_stacked_mlp([0, 5, 9], d_in=x.shape[1], width=16, depth=depth, init_scale=1.0, dtype=torch.float64)
    offset = torch.randn(3, len(y), dtype=torch.float64) if centred else None
    per_member, grads = loss_and_grads(layers, x, y, loss, offset)
    params = [p.clone().requires_grad_(True) for layer in layers for p in layer if p is not None]
    rebuilt = [(params[2 * i], params[2 * i + 1]) for i in range(len(layers))]
    out = stacked_forward(rebuilt, x) - (0 if offset is None else offset)
    ref = ((out - y) ** 2).mean(1) if loss == "mse" else torch.nn.functional.softplus(-y * out).mean(1)
    ref_grads = torch.autograd.grad(ref.sum(), params)
    torch.testing.assert_close(per_member, ref.detach())
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("depth", [1, 2])
def test_fused_gd_step_equals_step_from_gradients_and_frozen_members_stay_exact(depth):
    from compbench.training.batched_mlp import _backward, _forward_loss, loss_and_grads

    task = make_task("additive", anchors=[[4], [4]])
    x = torch.as_tensor(onehot(task.cells, task.n_values), dtype=torch.float64)
    y = torch.as_tensor(task.y)
    kw = dict(d_in=x.shape[1], width=24, depth=depth, init_scale=1.0, dtype=torch.float64)
    fused, plain = init_stacked_mlp([1, 2, 3], **kw), init_stacked_mlp([1, 2, 3], **kw)
    frozen_before = [p[1].clone() for layer in fused for p in layer if p is not None]
    acts, _, dout = _forward_loss(fused, x, y, "mse", None)
    active = torch.tensor([True, False, True])
    _backward(fused, acts, torch.where(active.unsqueeze(1), dout, 0.0), 0.05)
    _, grads = loss_and_grads(plain, x, y)
    params = [p for layer in plain for p in layer if p is not None]
    for p, g in zip(params, grads):
        p.sub_(0.05 * g * active.to(p.dtype).view(3, *([1] * (p.dim() - 1))))
    for pf, pp, before in zip([p for layer in fused for p in layer if p is not None], params, frozen_before):
        torch.testing.assert_close(pf, pp, rtol=1e-12, atol=1e-14)
        assert torch.equal(pf[1], before)  # the stopped member is untouched, bit for bit
    assert not torch.equal(fused[0][0][0], init_stacked_mlp([1], **kw)[0][0][0])  # active members moved
