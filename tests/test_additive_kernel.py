"""The kernel adapter's additive kernel (`kernel: additive`): no conjunction term, so its predictions
are exactly module-additive (F_0(x) + Σ_m z_m F_m(x)) or slot-additive (Σ_s g_s(z_s))."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from compbench import theory
from compbench.adapters.base import InvalidModelError
from compbench.adapters.kernel import KernelAdapter, KernelParams
from compbench.encodings import encode
from compbench.encodings.batch import Batch
from compbench.tasks import make_task
from compbench.tasks.base import CellSamples, TaskData, validate_split

M, I, M_EVAL = 4, 2, 6
HELD_OUT = [(0, 2), (0, 3), (1, 3)]


def module_task() -> TaskData:
    """M = 4 modules: every 1-hot cell and the pairs {0,1}, {1,2}, {2,3} are trained; the teacher is
    not module-additive (tanh of the summed modules' linear maps, times a product of two inputs)."""
    rng = np.random.default_rng(0)
    eye = np.eye(M, dtype=np.int64)
    cells = np.array([eye[i] for i in range(M)] + [eye[a] + eye[b] for a, b in itertools.combinations(range(M), 2)])
    pairs = [tuple(int(i) for i in np.flatnonzero(c)) for c in cells]
    train = np.array([p not in HELD_OUT for p in pairs])
    w = rng.standard_normal((M, I))

    def teacher(z: np.ndarray, x: np.ndarray) -> np.ndarray:
        return np.tanh(x @ (z @ w)) * (1 + x[:, 0] * x[:, 1])

    tr_ids = np.repeat(np.flatnonzero(train), 8)
    x_tr = rng.uniform(-1, 1, (len(tr_ids), I))
    y_tr = np.concatenate([teacher(cells[c].astype(float), x[None]) for c, x in zip(tr_ids, x_tr)])
    x_ev = rng.uniform(-1, 1, (M_EVAL, I))
    y_ev = np.stack([teacher(c.astype(float), x_ev) for c in cells])
    task = TaskData("modules-test", cells, y_ev.mean(1), train, (2,) * M, "regression",
                    samples=CellSamples(x_tr, tr_ids, y_tr, x_ev, y_ev))
    validate_split(task)
    return task


def latent_batch(task: TaskData, latents: list[np.ndarray]) -> Batch:
    """Every latent in `latents` (including z = 0, no cell of the task) at the task's shared x_eval."""
    x_ev = task.samples.x_eval
    z = np.repeat(np.array(latents, dtype=np.int64), len(x_ev), axis=0)
    x = np.concatenate([z.astype(float), np.tile(x_ev, (len(latents), 1))], axis=1)
    return Batch(x, z, np.arange(len(x)), task.n_values, np.zeros(len(x)))


def predict(params: dict, train: Batch, evaluate: Batch) -> np.ndarray:
    return KernelAdapter(KernelParams(**params)).fit_seeds(train, evaluate, [0])[0].predictions


@pytest.mark.parametrize("extra", [{}, {"intercept": 0.3, "depth": 2, "sigma_b2": 0.5}, {"objective": "ridge", "ridge": 1e-2}])
def test_held_out_pairs_are_module_additive(extra: dict) -> None:
    task = module_task()
    train = encode("khot", task).train
    eye = np.eye(M, dtype=np.int64)
    latents = [np.zeros(M, dtype=np.int64)]
    for a, b in HELD_OUT:
        latents += [eye[a] + eye[b], eye[a], eye[b]]
    ev = latent_batch(task, latents)
    pred = predict({"kernel": "additive", **extra}, train, ev).reshape(len(latents), M_EVAL)
    empty = pred[0]
    for j in range(len(HELD_OUT)):
        pair, a, b = pred[1 + 3 * j : 4 + 3 * j]
        # F_0 + F_a + F_b = (F_0 + F_a) + (F_0 + F_b) − F_0, at every x
        np.testing.assert_allclose(pair, a + b - empty, rtol=0, atol=1e-8 * np.abs(pred).max())
    assert np.abs(pred).max() > 0.1
    # the control: a kernel with conjunction terms (ReLU NTK on (z, x)) is not module-additive here
    ntk = predict({"kernel": "relu_ntk"}, train, ev).reshape(len(latents), M_EVAL)
    gap = max(np.abs(ntk[1 + 3 * j] - ntk[2 + 3 * j] - ntk[3 + 3 * j] + ntk[0]).max() for j in range(len(HELD_OUT)))
    assert gap > 1e-2


def test_module_gram_closed_form() -> None:
    task = module_task()
    ev = encode("khot", task).evaluate
    a, b = ev.x[:9], ev.x[20:27]
    K = KernelAdapter(KernelParams(kernel="additive", intercept=0.5, depth=2, sigma_b2=0.1)).kernel(
        Batch(a, ev.cells[:9], ev.cell_ids[:9], ev.n_values), Batch(b, ev.cells[20:27], ev.cell_ids[20:27], ev.n_values)
    )
    shared = ev.cells[:9] @ ev.cells[20:27].T  # modules two cells share
    expect = (0.5 + shared) * theory.relu_ntk(a[:, M:], b[:, M:], depth=2, sigma_b2=0.1)
    np.testing.assert_allclose(K, expect, rtol=1e-12)


def test_one_sample_per_cell_is_the_additive_overlap_kernel() -> None:
    # One-hot cells with nothing after the latent: k = w_0 + (number of agreeing components).
    task = make_task("additive", values=[[0, 1, 2, 3], [0, 2, 4, 6]], anchors=[[1], [1]])
    ev = encode("onehot", task).evaluate
    K = KernelAdapter(KernelParams(kernel="additive", intercept=0.25)).kernel(ev, ev)
    expect = theory.overlap_kernel(task.cells, task.cells, {0: 0.25, 1: 1.25, 2: 2.25})
    np.testing.assert_allclose(K, expect, rtol=1e-12)
    # and its fit is additive over the components on the held-out cells: the interaction contrast is 0
    fit = KernelAdapter(KernelParams(kernel="additive")).fit_seeds(encode("onehot", task).train, ev, [0])[0]
    grid = fit.predictions.reshape(4, 4)
    np.testing.assert_allclose(grid - grid[:, :1] - grid[:1, :] + grid[:1, :1], 0.0, atol=1e-10)


def slot_task(side: int = 3) -> TaskData:
    """Two slots of (x, y) factors on a side×side grid; a non-additive scalar target; orthogonal support."""
    g = np.linspace(0.0, 1.0, side)
    feats = np.array(list(itertools.product(g, g)))
    n = len(feats)
    cells = np.array(list(itertools.product(range(n), range(n))))
    f1, f2 = feats[cells[:, 0]], feats[cells[:, 1]]
    y = np.sin(3 * f1[:, 0]) + f2[:, 1] ** 2 + f1[:, 1] * f2[:, 0]
    train = (cells[:, 0] == 0) | (cells[:, 1] == 0)
    task = TaskData("slots", cells, y, train, (n, n), "regression", value_features=(feats, feats))
    validate_split(task)
    return task


def test_slot_kernel_is_slot_additive_on_held_out_cells() -> None:
    task = slot_task()
    enc = encode("latents", task)
    n = task.n_values[0]
    params = {"kernel": "additive", "additive": "slots", "sigma_b2": 0.1}
    pred = predict(params, enc.train, enc.evaluate).reshape(n, n)
    # f(i, j) = g_1(i) + g_2(j): every interaction contrast against the anchor row/column vanishes
    contrast = pred - pred[:, :1] - pred[:1, :] + pred[:1, :1]
    np.testing.assert_allclose(contrast, 0.0, atol=1e-9 * np.abs(pred).max())
    assert np.abs(pred).max() > 0.1
    # control: the ReLU NTK on all four factors has conjunction terms
    ntk = predict({"kernel": "relu_ntk", "sigma_b2": 0.1}, enc.train, enc.evaluate).reshape(n, n)
    assert np.abs(ntk - ntk[:, :1] - ntk[:1, :] + ntk[:1, :1]).max() > 1e-2
    K = KernelAdapter(KernelParams(**params)).kernel(enc.evaluate, enc.train)
    xe, xt = enc.evaluate.x, enc.train.x
    expect = theory.relu_ntk(xe[:, :2], xt[:, :2], sigma_b2=0.1) + theory.relu_ntk(xe[:, 2:], xt[:, 2:], sigma_b2=0.1)
    np.testing.assert_allclose(K, expect, rtol=1e-12)


def test_bad_layouts_are_clear_errors() -> None:
    enc = encode("latents", slot_task())
    with pytest.raises(InvalidModelError, match="3 equal slots"):
        predict({"kernel": "additive", "additive": "slots", "slots": 3}, enc.train, enc.evaluate)
    # latents that are neither k-hot nor one-hot cell codes: the modules form needs latent_dim
    with pytest.raises(ValueError, match="set latent_dim"):
        predict({"kernel": "additive"}, enc.train, enc.evaluate)
    assert KernelAdapter(KernelParams(kernel="additive", additive="slots")).theory_kernel_name() == "additive_slots(relu_ntk, depth=1)"
