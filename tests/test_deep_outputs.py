"""Deep image adapters with K outputs: K-unit readouts, vector MSE, cross-entropy, the grouped
ConvNet with K outputs, step budgets, the trace/full empirical NTK theory, and the paper's small CNN."""

from __future__ import annotations

import copy

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytest.importorskip("timm")

import torch.nn.functional as F  # noqa: E402

from compbench.adapters import get_adapter  # noqa: E402
from compbench.adapters.convnet import ConvNetAdapter, ConvNetParams  # noqa: E402
from compbench.adapters.deep import output_module  # noqa: E402
from compbench.encodings.batch import Batch  # noqa: E402
from compbench.training.minibatch import TrainOptions, loss_fn, train_minibatch  # noqa: E402
from compbench.training.stacked_convnet import StackedConvNet, train_stacked_convnet  # noqa: E402
from compbench.theory.options import TheoryOptions  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

SHAPE = (1, 8, 16)
K = 3
SEEDS = [0, 1, 2]
# The CNN of "Gradient Descent Resists Compositionality" (BCDLSG@efb6c20 mnist.py), as a convnet configuration.
PAPER_CNN = dict(
    channels=[32, 64], hidden=[64, 64], kernel_size=3, padding="valid", pool=[0], batchnorm=False,
    init="glorot", optimizer="adam", lr=1e-3, batch_size=64,
)
REFERENCE_SMALL = dict(width=0.125, hidden=[64, 64])  # the reference ConvNet's layout (BatchNorm, pool at the end), small
PAPER_SMALL = dict(channels=[4, 8], hidden=[16, 16], kernel_size=3, padding="valid", pool=[0], batchnorm=False, init="glorot")


def classes_batch(n_per_class: int, seed: int, n_classes: int = K) -> Batch:
    """Separable K-class images: class c lights a 4×4 patch at column 5c (plus noise)."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(n_classes), n_per_class)
    x = 0.1 * rng.standard_normal((len(y), *SHAPE))
    for i, c in enumerate(y):
        x[i, 0, 2:6, 5 * c : 5 * c + 4] += 1.0
    cells = np.stack([y, np.zeros_like(y)], axis=1)
    return Batch(x.astype(np.float32), cells, y.copy(), (n_classes, 1), y, n_classes=n_classes)


def vector_batch(n: int, seed: int) -> Batch:
    """K real targets per image."""
    rng = np.random.default_rng(seed)
    x = rng.random((n, *SHAPE)).astype(np.float32)
    ids = np.arange(n)
    return Batch(x, np.stack([ids, ids], 1), ids, (n, n), rng.standard_normal((n, K)))


def convnet(**params) -> ConvNetAdapter:
    return ConvNetAdapter(ConvNetParams(**params), device="cpu")


# ------------------------------------------------------------------------------------ the losses


def test_cross_entropy_matches_torch_also_per_member_under_vmap():
    g = torch.Generator().manual_seed(0)
    out = torch.randn(5, 7, 4, generator=g, dtype=torch.float64) * 3  # 5 members, batch 7, 4 classes
    y = torch.randint(0, 4, (5, 7), generator=g)
    for m in range(5):
        got = loss_fn("cross_entropy", out[m], y[m])
        torch.testing.assert_close(got, F.cross_entropy(out[m], y[m]), rtol=1e-14, atol=0)
        # classes held as floats (exact integers) give the same loss
        torch.testing.assert_close(loss_fn("cross_entropy", out[m], y[m].double()), got, rtol=0, atol=0)
    per = torch.vmap(lambda o, t: loss_fn("cross_entropy", o, t))(out, y)
    want = torch.stack([F.cross_entropy(out[m], y[m]) for m in range(5)])
    torch.testing.assert_close(per, want, rtol=1e-14, atol=0)
    # vector MSE: summed over the outputs, averaged over the samples (as the stacked MLP)
    t = torch.randn(7, 4, generator=g, dtype=torch.float64)
    torch.testing.assert_close(loss_fn("mse", out[0], t), 4 * F.mse_loss(out[0], t), rtol=1e-14, atol=0)
    torch.testing.assert_close(loss_fn("mse", out[0, :, 0], t[:, 0]), F.mse_loss(out[0, :, 0], t[:, 0]), rtol=0, atol=0)


def test_categorical_hinge_is_keras_categorical_hinge():
    """tf.keras.losses.categorical_hinge: max(0, max_j (1 − t_j)·f_j − f_y + 1), the true class entering as 0."""
    out = torch.tensor([[2.0, 1.0, -1.0], [-1.0, -2.0, -3.0], [0.5, 0.2, 0.9]], dtype=torch.float64)
    y = torch.tensor([0, 0, 1])
    # 0: max(0, 1 − 2 + 1) = 0; 1: the floor max(0, −2, −3) = 0 gives 0 + 1 + 1 = 2; 2: 0.9 − 0.2 + 1 = 1.7
    assert float(loss_fn("categorical_hinge", out, y)) == pytest.approx((0 + 2 + 1.7) / 3, rel=1e-15)
    per = torch.vmap(lambda o, t: loss_fn("categorical_hinge", o, t))(out.unsqueeze(1), y.unsqueeze(1))
    np.testing.assert_allclose(per.numpy(), [0.0, 2.0, 1.7], rtol=1e-15)


def test_trainers_refuse_targets_that_do_not_fit_the_loss():
    net = output_module(convnet(**REFERENCE_SMALL).build(SHAPE, n_out=K), outputs=K)
    x = torch.rand(6, *SHAPE)
    with pytest.raises(ValueError, match="cross_entropy needs integer class targets, got non-integer"):
        train_minibatch(net, x, torch.tensor([0.5, 1, 2, 0, 1, 2]), TrainOptions(loss="cross_entropy", epochs=1))
    with pytest.raises(ValueError, match=r"cross_entropy needs integer class targets of shape \(n,\)"):
        train_minibatch(net, x, torch.zeros(6, K), TrainOptions(loss="cross_entropy", epochs=1))
    with pytest.raises(ValueError, match=r"the logistic loss needs ±1 labels of shape \(n,\)"):
        train_minibatch(net, x, torch.ones(6, K), TrainOptions(loss="logistic", epochs=1))
    with pytest.raises(ValueError, match=r"outputs \(6, 3\) do not match the targets \(6,\)"):
        train_minibatch(net, x, torch.ones(6), TrainOptions(loss="mse", epochs=1, batch_size=6))
    with pytest.raises(ValueError, match="categorical_hinge needs integer class targets of shape"):
        train_minibatch(net, x, torch.zeros(6, K), TrainOptions(loss="categorical_hinge", epochs=1))
    with pytest.raises(ValueError, match="unknown loss 'hinge'"):
        train_minibatch(net, x, torch.ones(6), TrainOptions(loss="hinge", epochs=1))


# ------------------------------------------------------------- the grouped ConvNet with K outputs


def _data(loss: str, n: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(123)
    x = torch.rand(n, *SHAPE, generator=g, dtype=torch.float64)
    y = torch.randint(0, K, (n,), generator=g) if loss != "mse" else torch.randn(n, K, generator=g, dtype=torch.float64)
    return x, y


def _rel(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(
        float((a[k].detach().double() - b[k].double()).abs().max() / b[k].double().abs().max().clamp_min(1e-30))
        for k in b if b[k].is_floating_point()
    )


@pytest.mark.parametrize("arch", ["reference", "paper"])
@pytest.mark.parametrize("loss", ["mse", "cross_entropy", "categorical_hinge"])
@pytest.mark.parametrize("budget", [dict(epochs=3), dict(steps=7)], ids=["epochs", "steps"])
def test_grouped_members_with_k_outputs_equal_solo_runs(arch, loss, budget):
    """Each member of the grouped model is its seed trained alone, for K outputs, vector MSE and
    cross-entropy, with an epoch or a step budget (7 steps: two epochs of 3 batches and one of 1)."""
    adapter = convnet(**(REFERENCE_SMALL if arch == "reference" else PAPER_SMALL))
    x, y = _data(loss)
    kw = dict(optimizer="adam", lr=1e-2, batch_size=8, weight_decay=1e-3, amp=False, loss=loss, **budget)
    nets = [adapter._init(s, SHAPE, outputs=K).net.double() for s in SEEDS]
    stacked = StackedConvNet(nets)
    with torch.no_grad():
        assert stacked.eval()(x).shape == (len(SEEDS), len(x), K)
    results = train_stacked_convnet(stacked, x, y, seeds=SEEDS, options=TrainOptions(**kw))
    for i, seed in enumerate(SEEDS):
        solo = copy.deepcopy(nets[i])
        want = train_minibatch(solo, x, y, seed=seed, options=TrainOptions(**kw))
        assert _rel(stacked.member_state_dict(i), solo.state_dict()) < 1e-9
        got = results[i]
        assert (got.epochs, got.steps, got.converged, got.diverged) == (want.epochs, want.steps, False, False)
        assert got.steps == budget.get("steps", 9) and got.epochs == 3
        np.testing.assert_allclose(got.loss_history, want.loss_history, rtol=1e-6)
        with torch.no_grad():
            np.testing.assert_allclose(stacked.member_module(i).eval()(x).numpy(), solo.eval()(x).numpy(), rtol=1e-9, atol=1e-9)
    assert results[0].loss_history[-1] < results[0].loss_history[0]  # it trained


def test_a_step_budget_of_whole_epochs_is_the_epoch_budget():
    adapter = convnet(**REFERENCE_SMALL)
    x, y = _data("mse")
    kw = dict(optimizer="sgd", lr=1e-3, momentum=0.9, batch_size=8, amp=False)
    a, b = (adapter._init(0, SHAPE, outputs=K).net.double() for _ in range(2))
    ra = train_minibatch(a, x, y, seed=0, options=TrainOptions(epochs=2, **kw))
    rb = train_minibatch(b, x, y, seed=0, options=TrainOptions(epochs=100, steps=6, **kw))  # steps replace epochs
    assert (ra.epochs, ra.steps) == (rb.epochs, rb.steps) == (2, 6) and ra.loss_history == rb.loss_history
    assert all(torch.equal(v, b.state_dict()[k]) for k, v in a.state_dict().items())


# ------------------------------------------------------------------------------- the adapters


@pytest.mark.parametrize("vectorize", [True, False])
@pytest.mark.parametrize("loss", ["cross_entropy", "categorical_hinge"])
def test_class_losses_train_a_separable_problem(loss, vectorize):
    train, evaluate = classes_batch(8, seed=0), classes_batch(4, seed=1)
    model = convnet(**PAPER_SMALL, lr=1e-2, batch_size=8, steps=40, loss=loss, vectorize=vectorize, theory="none")
    fits = model.fit_seeds(train, evaluate, [0, 1])
    for fit in fits:
        assert fit.error is None and fit.kernels is None
        assert fit.predictions.shape == (12, K) and fit.initial_eval.shape == (12, K) and fit.initial_train.shape == (24, K)
        before = np.mean(fit.initial_eval.argmax(1) == evaluate.y)
        after = np.mean(fit.predictions.argmax(1) == evaluate.y)
        assert before < 0.75 and after == 1.0
        assert fit.info["steps"] == 40 and fit.info["epochs"] == 14  # 3 batches per epoch
        assert fit.info["train_loss"] < 0.1  # at f = 0 both losses are ≥ 1 (log 3, and 1)
    assert model.theory_options() == TheoryOptions("min_norm")  # the MSE-on-one-hot network's theory


@pytest.mark.parametrize("loss", ["mse", "cross_entropy", "categorical_hinge"])
def test_the_loss_compares_outputs_with_one_hot_rows_or_classes(loss):
    """At a learning rate of ~0 the first epoch's loss is the loss of f_0 (no BatchNorm: train = eval
    mode): MSE against the one-hot rows, or cross-entropy against the classes."""
    train = classes_batch(4, seed=0)
    fit = convnet(**PAPER_SMALL, optimizer="sgd", lr=1e-30, epochs=1, batch_size=12, loss=loss, theory="none").fit_seeds(train, train, [5])[0]
    f0 = fit.initial_train
    onehot = np.eye(K)[train.y]
    if loss == "mse":
        want = np.mean(np.sum((f0 - onehot) ** 2, axis=1))
    elif loss == "cross_entropy":
        want = float(F.cross_entropy(torch.as_tensor(f0), torch.as_tensor(train.y)))
    else:
        want = np.mean(np.maximum(0, ((1 - onehot) * f0).max(1) - (onehot * f0).sum(1) + 1))
    assert fit.info["train_loss"] == pytest.approx(want, rel=1e-5)


def test_grouped_adapter_equals_one_by_one_for_k_outputs():
    train, evaluate = classes_batch(6, seed=0), classes_batch(2, seed=1)
    common = dict(**REFERENCE_SMALL, optimizer="adam", lr=1e-3, batch_size=8, epochs=2, loss="cross_entropy", ntk_solver="dense")
    one = convnet(**common, vectorize=False).fit_seeds(train, evaluate, SEEDS)
    many = convnet(**common, seeds_per_batch=2).fit_seeds(train, evaluate, SEEDS)
    for a, b in zip(one, many):
        np.testing.assert_array_equal(a.initial_eval, b.initial_eval)
        np.testing.assert_array_equal(a.kernels[0], b.kernels[0])
        np.testing.assert_allclose(b.predictions, a.predictions, rtol=1e-4, atol=1e-4 * np.abs(a.predictions).max())
        assert b.info["ntk_outputs"] == a.info["ntk_outputs"] == "trace"
        assert (b.info["steps"], b.info["epochs"]) == (a.info["steps"], a.info["epochs"]) == (6, 2)


def test_vector_regression_shapes_and_centring_starts_at_zero():
    train, evaluate = vector_batch(10, seed=0), vector_batch(4, seed=1)
    fit = convnet(**REFERENCE_SMALL, epochs=2, batch_size=5, center=True, output_scale=2.0).fit_seeds(train, evaluate, [0])[0]
    assert fit.error is None
    assert np.array_equal(fit.initial_train, np.zeros((10, K))) and np.array_equal(fit.initial_eval, np.zeros((4, K)))
    assert fit.predictions.shape == (4, K) and np.any(fit.predictions != 0)
    assert fit.kernels[0].shape == (10, 10) and fit.kernels[1].shape == (4, 10)


def test_lr_ntk_with_k_outputs_scales_by_the_samples_over_the_kernels_top_eigenvalue():
    """The MSE sums over outputs, so GD on the linearised model is stable below lr = n / λ_max as for one output."""
    train = vector_batch(8, seed=0)
    for outputs in ("trace", "full"):
        fit = convnet(**REFERENCE_SMALL, optimizer="sgd", momentum=0.0, lr_ntk=0.5, epochs=1, ntk_outputs=outputs).fit_seeds(train, train, [0])[0]
        assert fit.info["lr"] == pytest.approx(0.5 * 8 / np.linalg.eigvalsh(fit.kernels[0])[-1], rel=1e-12)


@pytest.mark.parametrize("name", ["resnet", "vit", "timm:test_resnet"])
def test_other_adapters_have_k_unit_readouts(name):
    small = {"resnet": {"channels": [4, 8], "blocks": [1, 1]}, "vit": {"dim": 16, "depth": 1, "heads": 2, "mlp_dim": 16}}
    cls = get_adapter(name)
    train, evaluate = classes_batch(2, seed=0), classes_batch(1, seed=1)
    fit = cls(cls.Params(**small.get(name, {}), epochs=1, loss="cross_entropy", theory="none")).fit_seeds(train, evaluate, [0])[0]
    assert fit.error is None and fit.predictions.shape == (3, K) and fit.initial_train.shape == (6, K)
    assert cls(cls.Params(**small.get(name, {}))).build(SHAPE, n_out=K)(torch.rand(2, *SHAPE)).shape == (2, K)


def test_a_build_without_n_out_is_a_clear_error_for_k_outputs():
    class Old(ConvNetAdapter):
        name = "old-style"

        def build(self, in_shape):  # noqa: ANN001, ANN202 — written before n_out existed
            return super().build(in_shape)

    model = Old(ConvNetParams(**REFERENCE_SMALL, epochs=1, theory="none"))
    assert model._init(0, SHAPE).net[-1].out_features == 1  # a scalar task still works
    with pytest.raises(TypeError, match="'old-style': its build\\(in_shape\\) has no n_out parameter.*3-output"):
        model.fit_seeds(classes_batch(2, 0), classes_batch(1, 1), [0])


# ----------------------------------------------------------------------------------- the errors


def test_losses_and_solvers_that_do_not_fit_the_task_are_clear_errors():
    scalar = Batch(np.zeros((4, *SHAPE), np.float32), np.zeros((4, 2), int), np.arange(4), (2, 2), np.array([1.0, -1, 1, -1]))
    classes = classes_batch(2, seed=0)
    with pytest.raises(ValueError, match="loss: cross_entropy needs a multi-class task; this task has scalar targets"):
        convnet(loss="cross_entropy").fit_seeds(scalar, scalar, [0])
    with pytest.raises(ValueError, match="K-output regression targets"):
        convnet(loss="cross_entropy").fit_seeds(vector_batch(4, 0), vector_batch(4, 0), [0])
    with pytest.raises(ValueError, match="loss: logistic trains one output on ±1 labels; this task has 3 outputs"):
        convnet(loss="logistic").fit_seeds(classes, classes, [0])
    with pytest.raises(ValueError, match="ntk_solver: cg handles one output; this task's network has 3"):
        convnet(**REFERENCE_SMALL, ntk_solver="cg").fit_seeds(classes, classes, [0])
    with pytest.raises(ValueError, match="Grams of this 3-output network need .* more than ntk_max_memory"):
        convnet(**REFERENCE_SMALL, ntk_outputs="full", ntk_max_memory=1 << 20)._solver(100, 100, 3)
    assert convnet(ntk_max_memory=1 << 20)._solver(100, 100, 3) == "dense"  # the trace Grams fit: 160 kB
    for params, message in (
        ({"ntk_solver": "cg", "ntk_outputs": "full"}, "ntk_outputs: full needs the dense solver"),
        ({"ntk_solver": "cg", "loss": "cross_entropy"}, "ntk_solver: cg handles one output"),
        ({"ntk_solver": "cg", "loss": "categorical_hinge"}, "ntk_solver: cg handles one output; categorical_hinge"),
        ({"pool": [2]}, r"pool positions \[2\] are not convolutions 0..1"),
        ({"pool": [0, 0]}, "pool lists a convolution twice"),
        ({"steps": 0}, "greater than or equal to 1"),
    ):
        with pytest.raises(ValueError, match=message):
            ConvNetParams(**{"channels": [4, 8], **params})


# -------------------------------------------------------------------- the K-output NTK theory


def _column(net: torch.nn.Module, k: int) -> torch.nn.Module:
    class Column(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = net

        def forward(self, x):  # noqa: ANN001, ANN202
            return self.net(x)[:, k]

    return Column()


def test_trace_and_full_empirical_ntk_theory_for_k_outputs():
    """The adapter's trace kernel is the mean of the per-output eNTKs of its seed's network, the full
    kernel holds them on its diagonal blocks, and the lazy-limit theory on it interpolates the
    one-hot training targets."""
    from compbench.theory import empirical_ntk
    from compbench.theory.predict import theory_predictions

    train, evaluate = classes_batch(3, seed=0), classes_batch(1, seed=1)
    model = convnet(**REFERENCE_SMALL, epochs=1, batch_size=9, loss="cross_entropy")
    trace = model.fit_seeds(train, evaluate, [4])[0]
    full = convnet(**REFERENCE_SMALL, epochs=1, batch_size=9, loss="cross_entropy", ntk_outputs="full").fit_seeds(train, evaluate, [4])[0]
    assert trace.info["ntk_outputs"] == "trace" and full.info["ntk_outputs"] == "full"
    assert trace.kernels[0].shape == (9, 9) and trace.kernels[1].shape == (3, 9)
    assert full.kernels[0].shape == (27, 27) and full.kernels[1].shape == (9, 27)

    net = model._init(4, SHAPE, outputs=K).double()
    x_tr = torch.as_tensor(train.x, dtype=torch.float64)
    per_output = [empirical_ntk(_column(net, k), x_tr).numpy() for k in range(K)]
    np.testing.assert_allclose(trace.kernels[0], np.mean(per_output, axis=0), rtol=1e-4)
    for k in range(K):
        np.testing.assert_allclose(full.kernels[0][k::K, k::K], per_output[k], rtol=1e-4)

    # The trace theory on the training samples gives back the one-hot targets (K_train is well
    # conditioned here; this small network's full kernel has a null direction, so only run it).
    onehot = train.target_matrix()
    got = theory_predictions(trace.kernels[0], trace.kernels[0], onehot, f0_train=trace.initial_train, f0_eval=trace.initial_train)
    np.testing.assert_allclose(got, onehot, atol=1e-8)
    ev = theory_predictions(trace.kernels[0], trace.kernels[1], onehot, f0_train=trace.initial_train, f0_eval=trace.initial_eval)
    flat = theory_predictions(full.kernels[0], full.kernels[1], onehot.reshape(-1),
                              f0_train=full.initial_train.reshape(-1), f0_eval=full.initial_eval.reshape(-1))
    assert ev.shape == (3, K) and flat.shape == (3 * K,) and np.all(np.isfinite(ev)) and np.all(np.isfinite(flat))
    assert np.array_equal(trace.initial_eval, full.initial_eval)  # the same seed's network


# -------------------------------------------------------------------------------- K = 1 as before


def test_scalar_outputs_are_unchanged():
    """Numbers the code gave before K outputs existed (one thread, seed 0, the symmetry toy task)."""
    from compbench.encodings import encode
    from compbench.tasks import make_task

    enc = encode("digits", make_task("symmetry", variant="partial_exposure"), samples_per_cell=2)
    train = {"optimizer": "adam", "lr": 1e-2, "epochs": 3}
    conv = convnet(**train, width=0.125, hidden=[32, 32]).fit_seeds(enc.train, enc.evaluate, [0, 1])[0]
    assert conv.predictions.shape == (8,) and conv.initial_eval.shape == (8,) and conv.kernels[0].shape == (6, 6)
    assert "ntk_outputs" not in conv.info
    np.testing.assert_allclose(conv.predictions[:4], BEFORE["convnet"]["pred"], rtol=1e-5)
    np.testing.assert_allclose(conv.initial_eval[:4], BEFORE["convnet"]["f0"], rtol=1e-5)
    np.testing.assert_allclose(conv.kernels[0][0, :3], BEFORE["convnet"]["k"], rtol=1e-5)
    res = get_adapter("resnet")(get_adapter("resnet").Params(**train, channels=[4, 8], blocks=[1, 1])).fit_seeds(enc.train, enc.evaluate, [0, 1])[0]
    np.testing.assert_allclose(res.predictions[:4], BEFORE["resnet"]["pred"], rtol=1e-5)
    np.testing.assert_allclose(res.initial_eval[:4], BEFORE["resnet"]["f0"], rtol=1e-5)


# ------------------------------------------------------------------------- the paper's small CNN


def test_paper_cnn_is_a_convnet_configuration():
    """BCDLSG@efb6c20 mnist.py: Conv2D(32, 3×3, relu) → MaxPooling2D(2) → Conv2D(64, 3×3, relu) →
    Flatten → Dense(64, relu) → Dense(64, relu) → Dense(10); Keras' Glorot-uniform weights, zero biases."""
    nn = torch.nn
    net = convnet(**PAPER_CNN).build(SHAPE, n_out=10)
    assert [type(m) for m in net] == [
        nn.Conv2d, nn.ReLU, nn.MaxPool2d, nn.Conv2d, nn.ReLU, nn.Flatten,
        nn.Linear, nn.ReLU, nn.Linear, nn.ReLU, nn.Linear,
    ]
    assert (net[0].in_channels, net[0].out_channels, net[0].kernel_size, net[0].padding) == (1, 32, (3, 3), (0, 0))
    assert (net[3].in_channels, net[3].out_channels, net[3].kernel_size, net[3].padding) == (32, 64, (3, 3), (0, 0))
    # 8×16 → conv 6×14 → pool 3×7 → conv 1×5: 64·5 features
    assert [(m.in_features, m.out_features) for m in net if isinstance(m, nn.Linear)] == [(320, 64), (64, 64), (64, 10)]
    assert sum(p.numel() for p in net.parameters()) == 320 + 18496 + 20544 + 4160 + 650
    for m in net:
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            assert torch.count_nonzero(m.bias) == 0
            fan_in, fan_out = m.weight[0].numel(), m.weight.shape[0] * m.weight[0, 0].numel()
            assert float(m.weight.detach().abs().max()) <= np.sqrt(6 / (fan_in + fan_out))
    # 28×56 MNIST pairs, as in the paper: 26×54 → 13×27 → 11×25
    assert convnet(**PAPER_CNN).build((1, 28, 56), n_out=10)[6].in_features == 64 * 11 * 25


BEFORE = {  # from the code before K outputs existed (see test_scalar_outputs_are_unchanged)
    "convnet": {
        "pred": [-0.6683838367462158, -0.7049376964569092, -0.9708682298660278, -0.7179876565933228],
        "f0": [-0.5738328695297241, -0.6236453652381897, -0.642225980758667, -0.6236560940742493],
        "k": [12.89566204962935, 7.234192277286863, 8.13782631889773],
    },
    "resnet": {
        "pred": [0.2507985234260559, 0.22546745836734772, 0.2966585159301758, 0.22650519013404846],
        "f0": [0.3795968294143677, 0.3646405339241028, 0.4231726825237274, 0.3672674894332886],
    },
}
