"""The `hypernet` adapter: the latent generates the hidden weights linearly; shapes, seeding,
stacked multi-seed training equal to each seed alone, its empirical NTK, and where z ends."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from compbench.adapters import get_adapter  # noqa: E402
from compbench.adapters.hypernet import HypernetAdapter, HypernetParams, hypernet_module, latent_width  # noqa: E402
from compbench.encodings import encode  # noqa: E402
from compbench.encodings.batch import Batch  # noqa: E402
from compbench.encodings.onehot import onehot  # noqa: E402
from compbench.tasks.base import CellSamples, TaskData, validate_split  # noqa: E402
from compbench.testing import check_adapter  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

M, I = 4, 3  # modules, teacher inputs
SMALL = dict(width=8, steps=40, lr=1e-2)


def khot_task(outputs: int = 1, n_per: int = 6, m_eval: int = 5, seed: int = 0) -> TaskData:
    """M = 4 modules, cells = 1-hot and 2-hot sets; train all 1-hot cells and pairs {0,1}, {1,2}, {2,3}."""
    rng = np.random.default_rng(seed)
    cells = np.array([np.eye(M, dtype=np.int64)[i] for i in range(M)]
                     + [np.eye(M, dtype=np.int64)[a] + np.eye(M, dtype=np.int64)[b] for a in range(M) for b in range(a + 1, M)])
    pairs = [tuple(np.flatnonzero(c)) for c in cells]
    train = np.array([len(p) == 1 or p in {(0, 1), (1, 2), (2, 3)} for p in pairs])
    w = rng.standard_normal((M, I, outputs))

    def teacher(z: np.ndarray, x: np.ndarray) -> np.ndarray:
        y = np.tanh(x @ np.einsum("m,mio->io", z.astype(float), w))
        return y[:, 0] if outputs == 1 else y

    tr_ids = np.repeat(np.flatnonzero(train), n_per)
    x_tr = rng.uniform(-1, 1, (len(tr_ids), I))
    y_tr = np.concatenate([teacher(cells[c], x[None]) for c, x in zip(tr_ids, x_tr)])
    x_ev = rng.uniform(-1, 1, (m_eval, I))
    y_ev = np.stack([teacher(c, x_ev) for c in cells])
    samples = CellSamples(x_tr, tr_ids, y_tr, x_ev, y_ev)
    y_cells = y_ev.mean(axis=1)
    task = TaskData("khot-test", cells, y_cells, train, (2,) * M, "regression", samples=samples)
    validate_split(task)
    return task


def fit(task: TaskData, seeds: list[int], **params: object) -> list:
    enc = encode("khot", task)
    return HypernetAdapter(HypernetParams(**{**SMALL, **params})).fit_seeds(enc.train, enc.evaluate, seeds)


def test_registered() -> None:
    assert get_adapter("hypernet") is HypernetAdapter


def test_forward_is_the_linear_hypernetwork() -> None:
    # Each generated layer's weights and biases are Θ_0 + Σ_m z_m Θ_m, read back from the module's
    # own weight layout; the forward must equal that network written out by hand.
    L, W, K = 3, 5, 2
    net = hypernet_module(L, I, W, 2, K, flat=False).double()
    net.init_(7, 1.0)
    rng = np.random.default_rng(0)
    z = rng.uniform(-1, 1, (6, L))
    x = rng.uniform(-1, 1, (6, I))
    out = net(torch.as_tensor(np.concatenate([z, x], axis=1))).detach().numpy()
    for row in range(6):
        zt = np.concatenate([[1.0], z[row]])
        h = x[row]
        for lin in net.generated:
            theta = lin.weight.detach().numpy().reshape(W, L + 1, -1)  # (H, templates, fan_in + 1)
            w_z = np.einsum("m,hmi->hi", zt, theta)
            h = np.maximum(w_z[:, :-1] @ h + w_z[:, -1], 0.0)
        expect = net.readout.weight.detach().numpy() @ h + net.readout.bias.detach().numpy()
        np.testing.assert_allclose(out[row], expect, rtol=1e-12, atol=1e-12)


def test_init_scales_each_template_like_an_mlp_layer() -> None:
    net = hypernet_module(8, 50, 400, 1, 1, flat=True).double()
    net.init_(0, 0.5)
    theta = net.generated[0].weight.detach().numpy().reshape(400, 9, 51)
    assert np.std(theta[:, :, :50]) == pytest.approx(0.5 * np.sqrt(2 / 50), rel=0.02)
    assert np.abs(theta[:, :, 50]).max() <= 0.5 / np.sqrt(50)


def test_stacked_forward_equals_each_member() -> None:
    from compbench.training.stacked_modules import ModuleStack

    members = []
    for s in (0, 1, 2):
        m = hypernet_module(M, I, 6, 2, 1, flat=True).double()
        m.init_(s, 1.0)
        members.append(m)
    stack = ModuleStack(members)
    x = torch.as_tensor(np.random.default_rng(1).uniform(-1, 1, (9, M + I)))
    with torch.no_grad():
        out = stack(x)
        per = stack(torch.stack([x, x.flip(0), x]), per_member=True)
    for i, m in enumerate(members):
        np.testing.assert_allclose(out[i].numpy(), m(x).detach().numpy(), rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(per[1].numpy(), members[1](x.flip(0)).detach().numpy(), rtol=1e-12, atol=1e-13)


def test_shapes_scalar_and_vector() -> None:
    task = khot_task()
    enc = encode("khot", task)
    fitted = fit(task, [0, 1])
    assert len(fitted) == 2
    for f in fitted:
        assert f.error is None
        assert f.predictions.shape == enc.evaluate.prediction_shape == (len(task.cells) * 5,)
        assert f.initial_train.shape == (len(enc.train),) and f.initial_eval.shape == (len(enc.evaluate),)
        assert f.kernels[0].shape == (len(enc.train), len(enc.train))
        assert f.kernels[1].shape == (len(enc.evaluate), len(enc.train))
        assert f.info["latent_dim"] == M
    vec = khot_task(outputs=3)
    venc = encode("khot", vec)
    vf = fit(vec, [0])[0]
    assert vf.predictions.shape == venc.evaluate.prediction_shape == (len(vec.cells) * 5, 3)
    assert vf.initial_eval.shape == (len(venc.evaluate), 3)
    assert vf.kernels[0].shape == (len(venc.train), len(venc.train))  # output-averaged
    assert vf.info["ntk_outputs"] == "trace"
    full = fit(vec, [0], ntk_outputs="full")[0]
    assert full.kernels[0].shape == (3 * len(venc.train), 3 * len(venc.train))


def test_seeding_same_seed_same_result_different_seeds_differ() -> None:
    task = khot_task()
    a, b = fit(task, [3, 4]), fit(task, [3, 4])
    for fa, fb in zip(a, b):
        np.testing.assert_array_equal(fa.predictions, fb.predictions)
        np.testing.assert_array_equal(fa.kernels[0], fb.kernels[0])
    assert np.max(np.abs(a[0].predictions - a[1].predictions)) > 1e-3
    assert np.max(np.abs(a[0].initial_eval - a[1].initial_eval)) > 1e-3


@pytest.mark.parametrize("batch_size", [None, 8])
def test_stacked_seeds_equal_each_seed_alone(batch_size: int | None) -> None:
    # Full batch and minibatches (each member its own seeded order): a seed's trajectory must not
    # depend on the seeds training beside it.
    task = khot_task()
    together = fit(task, [5, 9], batch_size=batch_size, dtype="float64", theory="none")
    for seed, f in zip([5, 9], together):
        alone = fit(task, [seed], batch_size=batch_size, dtype="float64", theory="none")[0]
        np.testing.assert_allclose(f.predictions, alone.predictions, rtol=1e-9, atol=1e-11)
        assert f.info["train_loss"] == pytest.approx(alone.info["train_loss"], rel=1e-9)
    # and training did something: the loss fell well below the initial one
    enc = encode("khot", task)
    f0_loss = np.mean((together[0].initial_train - enc.train.y) ** 2)
    assert together[0].info["train_loss"] < 0.5 * f0_loss


def test_empirical_ntk_is_the_gradient_gram_at_init() -> None:
    task = khot_task()
    enc = encode("khot", task)
    f = fit(task, [2], dtype="float64")[0]
    net = hypernet_module(M, I, SMALL["width"], 1, 1, flat=True).double()
    net.init_(2, HypernetParams().init_scale)
    x = torch.as_tensor(enc.train.x)
    grads = []
    for i in (0, 7, 20):
        net.zero_grad()
        net(x[i : i + 1]).sum().backward()
        grads.append(torch.cat([p.grad.flatten() for p in net.parameters()]).numpy())
    g = np.stack(grads)
    np.testing.assert_allclose(f.kernels[0][np.ix_([0, 7, 20], [0, 7, 20])], g @ g.T, rtol=1e-10)
    np.testing.assert_allclose(f.initial_train, net(x).detach().numpy(), rtol=1e-12)


def test_theory_none_gives_no_kernels() -> None:
    f = fit(khot_task(), [0], theory="none")[0]
    assert f.kernels is None and f.initial_train is not None
    assert HypernetAdapter(HypernetParams(theory="none")).theory_kernel_name() == "none"


def test_theory_kernel_name_follows_ntk_outputs() -> None:
    # One rule in StackedModuleAdapter: the hypernet's ntk_outputs picks the full K-output kernel's name.
    assert HypernetAdapter(HypernetParams()).theory_kernel_name() == "empirical_ntk"
    assert HypernetAdapter(HypernetParams(ntk_outputs="full")).theory_kernel_name() == "empirical_ntk_full"


def test_evaluation_inputs_narrower_than_the_latent_are_named_as_such() -> None:
    # The inputs are checked before the module is sized: a narrower evaluation batch is an input mismatch, not a
    # latent_dim the user never set.
    enc = encode("khot", khot_task())
    narrow = Batch(enc.evaluate.x[:, :2], enc.evaluate.cells, enc.evaluate.cell_ids, enc.evaluate.n_values)
    with pytest.raises(ValueError, match=r"evaluation inputs \(2,\) differ from training inputs \(7,\)"):
        HypernetAdapter(HypernetParams(**SMALL)).fit_seeds(enc.train, narrow, [0])


def test_latent_width_reads_khot_and_onehot_codes() -> None:
    cells = np.array([[1, 0, 1], [0, 1, 0]])
    x = np.ones((2, 2))
    khot = Batch(np.concatenate([cells, x], axis=1), cells, np.arange(2), (2, 2, 2))
    assert latent_width(khot) == 3
    one = Batch(np.concatenate([onehot(cells, (2, 2, 2)), x], axis=1), cells, np.arange(2), (2, 2, 2))
    assert latent_width(one) == 6
    grid = np.array([[0, 2], [1, 0]])
    plain = Batch(onehot(grid, (2, 3)), grid, np.arange(2), (2, 3))
    assert latent_width(plain) == 5  # one sample per cell: everything is the latent
    assert latent_width(khot, 4) == 4
    with pytest.raises(ValueError, match="set latent_dim"):
        latent_width(Batch(np.zeros((2, 4)) + 0.5, cells, np.arange(2), (2, 2, 2)))
    with pytest.raises(ValueError, match="outside"):
        latent_width(khot, 9)


def test_conformance_kit() -> None:
    # The kit's tiny one-hot tasks (one sample per cell): the latent is the whole one-hot input.
    report = check_adapter(HypernetAdapter, {"width": 8, "steps": 30})
    assert report.ok, str(report)
