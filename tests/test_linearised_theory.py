"""The finite-time lazy theory (compbench.theory.linearised): the linearised network after the steps it trained."""

from __future__ import annotations

import numpy as np
import pytest

from compbench.theory.linearised import linearised_gd
from compbench.theory.regression import kernel_regression
from compbench.theory.options import TheoryOptions


def _sgd_in_parameter_space(phi, phi_e, y, lr, momentum, steps):
    """Full-batch SGD with torch's momentum on the linear model f = φ·θ, loss (1/n) Σ ‖f − y‖², θ₀ = 0."""
    n = len(phi)
    theta = np.zeros((phi.shape[1],) + y.shape[1:])
    buf = np.zeros_like(theta)
    for t in range(steps):
        grad = (2.0 / n) * phi.T @ (phi @ theta - y)
        buf = grad if t == 0 else momentum * buf + grad
        theta = theta - lr * buf
    return phi_e @ theta


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("outputs", [None, 3])
def test_it_is_gradient_descent_on_a_linear_model(momentum, outputs):
    # A linear model is its own linearisation: its NTK is φφᵀ, and the theory must be its training, exactly.
    rng = np.random.default_rng(0)
    phi, phi_e = rng.normal(size=(12, 30)), rng.normal(size=(7, 30))
    y = rng.normal(size=(12,) if outputs is None else (12, outputs))
    K, Ke = phi @ phi.T, phi_e @ phi.T
    lr = 0.5 * 12 / np.linalg.eigvalsh(K)[-1]
    for steps in (0, 1, 2, 37):
        want = _sgd_in_parameter_space(phi, phi_e, y, lr, momentum, steps)
        got = linearised_gd(K, Ke, y, lr=lr, steps=steps, momentum=momentum)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_f0_enters_as_the_starting_function():
    rng = np.random.default_rng(1)
    phi, phi_e = rng.normal(size=(8, 20)), rng.normal(size=(5, 20))
    theta0 = rng.normal(size=20)
    y = rng.normal(size=8)
    K, Ke = phi @ phi.T, phi_e @ phi.T
    lr = 0.3 * 8 / np.linalg.eigvalsh(K)[-1]
    # f = φ·θ from θ₀: the same as f₀ + a model from zero fitting y − f₀.
    want = phi_e @ theta0 + _sgd_in_parameter_space(phi, phi_e, y - phi @ theta0, lr, 0.5, 25)
    got = linearised_gd(K, Ke, y, lr=lr, steps=25, momentum=0.5, f0_train=phi @ theta0, f0_eval=phi_e @ theta0)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_many_steps_of_plain_descent_are_kernel_regression():
    rng = np.random.default_rng(2)
    phi, phi_e = rng.normal(size=(6, 40)), rng.normal(size=(4, 40))
    y, f0, f0e = rng.normal(size=6), rng.normal(size=6), rng.normal(size=4)
    K, Ke = phi @ phi.T, phi_e @ phi.T
    lam = np.linalg.eigvalsh(K)
    lr = 0.9 * 6 / lam[-1]
    steps = int(40 * lam[-1] / lam[0]) + 100  # ≈ e^{-70} of the slowest mode left
    got = linearised_gd(K, Ke, y, lr=lr, steps=steps, f0_train=f0, f0_eval=f0e)
    np.testing.assert_allclose(got, kernel_regression(K, Ke, y, f0_train=f0, f0_cross=f0e), rtol=1e-8, atol=1e-8)
    # Stopped early, it is not: the slow modes are still far from their targets.
    early = linearised_gd(K, Ke, y, lr=lr, steps=3, f0_train=f0, f0_eval=f0e)
    assert np.max(np.abs(early - kernel_regression(K, Ke, y, f0_train=f0, f0_cross=f0e))) > 1e-2


def test_bad_arguments_are_refused():
    K = np.eye(3)
    with pytest.raises(ValueError, match="do not agree"):
        linearised_gd(K, np.ones((2, 4)), np.ones(3), lr=0.1, steps=1)
    with pytest.raises(ValueError, match="momentum"):
        linearised_gd(K, np.ones((2, 3)), np.ones(3), lr=0.1, steps=1, momentum=1.0)


def _linear(in_shape, n_out):
    import torch

    torch.manual_seed(0)
    return torch.nn.Linear(int(np.prod(in_shape)), n_out, dtype=torch.float32)


def _fit(ntk_time, **params):
    from compbench.adapters.module import ModuleAdapter
    from compbench.encodings import encode
    from compbench.tasks import make_task

    class Linear(ModuleAdapter):
        factory = staticmethod(_linear)

    enc = encode("onehot", make_task("additive", values=[[0, 1, 2, 3], [0, 2, 4, 6]], anchors=[[1], [1]]))
    settings = {"optimizer": "sgd", "momentum": 0.9, "lr_ntk": 0.5, "epochs": 40, "batch_size": 1024, "loss": "mse",
                "ntk_time": ntk_time, **params}
    p = Linear.Params(**settings)
    return Linear(p).fit_seeds(enc.train, enc.evaluate, [0])[0], Linear(p).theory_options()


def test_a_network_trained_full_batch_gets_its_own_steps_as_theory():
    # nn.Linear is linear in its parameters: its trained outputs are the finite-time theory (float32 training).
    fit, options = _fit("trained")
    assert options == TheoryOptions("linearised_gd")
    assert fit.info["ntk_time"] == "trained (40 steps)"
    np.testing.assert_allclose(fit.theory_predictions, fit.predictions, atol=2e-4)
    # 40 steps are not convergence here: kernel regression from f₀ is a different prediction.
    K, Ke = fit.kernels
    from compbench.encodings import encode
    from compbench.tasks import make_task

    y = encode("onehot", make_task("additive", values=[[0, 1, 2, 3], [0, 2, 4, 6]], anchors=[[1], [1]])).train.y
    converged = kernel_regression(K, Ke, y, f0_train=fit.initial_train, f0_cross=fit.initial_eval)
    assert np.max(np.abs(converged - fit.predictions)) > 1e-2


def test_the_converged_theory_is_still_the_default():
    fit, options = _fit("converged")
    assert options == TheoryOptions("min_norm") and fit.theory_predictions is None


@pytest.mark.parametrize("change, named", [({"optimizer": "adam"}, "optimizer: adam"), ({"loss": "logistic"}, "loss: logistic"),
                                           ({"weight_decay": 0.1}, "weight_decay: 0.1")])
def test_the_trained_theory_needs_full_batch_sgd_on_the_mse(change, named):
    from compbench.adapters.module import ModuleParams

    with pytest.raises(ValueError, match=named):
        ModuleParams(**{"optimizer": "sgd", "ntk_time": "trained", **change})


def test_minibatches_are_refused_when_fitting():
    with pytest.raises(ValueError, match="full-batch training"):
        _fit("trained", **{"batch_size": 4})
