"""Deep image adapters (convnet, resnet, vit, timm:<name>) on a 4-cell toy task, on the CPU."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytest.importorskip("timm")

from compbench.adapters import UnknownAdapterError, get_adapter  # noqa: E402
from compbench.cli import main  # noqa: E402
from compbench.encodings import encode  # noqa: E402
from compbench.runner.device import DeviceUnavailableError, resolve_device  # noqa: E402
from compbench.runner.run import run_suite  # noqa: E402
from compbench.suite import SuiteError, parse_suite  # noqa: E402
from compbench.tasks import make_task  # noqa: E402
from compbench.theory.options import TheoryOptions  # noqa: E402

TIMM = "timm:test_resnet"  # timm's own tiny test network (a few hundred thousand parameters)
TRAIN = {"optimizer": "adam", "lr": 1e-2, "epochs": 10}
ADAPTERS = {
    "convnet": {"width": 0.125, "hidden": [128, 128]},
    "resnet": {"channels": [4, 8], "blocks": [1, 1]},
    "vit": {"dim": 16, "depth": 1, "heads": 2, "mlp_dim": 16},
    TIMM: {},
}


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


@pytest.fixture(scope="module")
def toy():
    """Symmetry with partial exposure: 4 cells, 3 for training; two digit images per cell."""
    task = make_task("symmetry", variant="partial_exposure")
    return task, encode("digits", task, samples_per_cell=2)


def adapter(name: str, **params):
    cls = get_adapter(name)
    return cls(cls.Params(**{**ADAPTERS[name], **params}), device="cpu")


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_adapter_trains_predicts_and_gives_theory_inputs(name, toy):
    _, enc = toy
    tr, ev = enc.train, enc.evaluate
    assert tr.x.shape == (6, 1, 8, 16) and ev.x.shape == (8, 1, 8, 16)
    model = adapter(name, **TRAIN)
    fits = model.fit_seeds(tr, ev, [0, 1])
    assert len(fits) == 2
    for fit in fits:
        assert fit.error is None
        assert fit.predictions.shape == (8,) and np.all(np.isfinite(fit.predictions))
        assert fit.initial_train.shape == (6,) and fit.initial_eval.shape == (8,)
        assert np.all(np.isfinite(fit.initial_train)) and np.all(np.isfinite(fit.initial_eval))
        K_tt, K_et = fit.kernels
        assert K_tt.shape == (6, 6) and K_et.shape == (8, 6)
        assert np.allclose(K_tt, K_tt.T, rtol=1e-9, atol=0) and np.linalg.eigvalsh(K_tt)[0] > -1e-6 * K_tt.max()
        # it trained: the last epoch's loss is below the initial network's training error
        assert fit.info["train_loss"] < np.mean((fit.initial_train - tr.y) ** 2)
        assert fit.info["epochs"] == 10 and fit.info["n_params"] > 0
        assert not np.allclose(fit.predictions, fit.initial_eval)
    assert not np.allclose(fits[0].initial_eval, fits[1].initial_eval)  # seeds are different networks
    # determinism: the same call again (after other work in this process) gives bit-identical results.
    # (Not `[1]` alone: oneDNN's CPU convolutions can then differ from `[0, 1]` in the last float32 bit.)
    for fit, again in zip(fits, model.fit_seeds(tr, ev, [0, 1])):
        assert np.array_equal(again.predictions, fit.predictions)
        assert np.array_equal(again.initial_eval, fit.initial_eval)
        assert np.array_equal(again.kernels[0], fit.kernels[0]) and np.array_equal(again.kernels[1], fit.kernels[1])
    assert model.theory_options() == TheoryOptions("min_norm") and model.theory_kernel_name() == "empirical_ntk_at_init"


def test_center_starts_at_zero_with_the_same_ntk_and_scale_multiplies_it(toy):
    _, enc = toy
    plain = adapter("resnet", epochs=1).fit_seeds(enc.train, enc.evaluate, [3])[0]
    centred = adapter("resnet", epochs=3, center=True, **{k: TRAIN[k] for k in ("optimizer", "lr")})
    fit = centred.fit_seeds(enc.train, enc.evaluate, [3])[0]
    assert np.array_equal(fit.initial_train, np.zeros(6)) and np.array_equal(fit.initial_eval, np.zeros(8))
    assert np.any(fit.predictions != 0)
    # g(θ) − g(θ₀) has g's tangent kernel; the frozen copy's parameters are not counted or trained
    assert np.allclose(fit.kernels[0], plain.kernels[0], rtol=1e-6) and np.allclose(fit.kernels[1], plain.kernels[1], rtol=1e-6)
    assert fit.info["n_params"] == plain.info["n_params"] == sum(
        p.numel() for p in adapter("resnet").build((1, 8, 16)).parameters()
    )
    scaled = adapter("resnet", epochs=1, output_scale=2.0).fit_seeds(enc.train, enc.evaluate, [3])[0]
    assert np.allclose(scaled.kernels[0], 4 * plain.kernels[0], rtol=1e-6)
    assert np.allclose(scaled.initial_eval, 2 * plain.initial_eval, rtol=1e-6)


def test_dropout_is_seeded(toy):
    """Dropout draws from the global RNG: the same seed must still give the same network."""
    _, enc = toy
    model = adapter("vit", dropout=0.3, epochs=3, lr=1e-2, theory="none")
    first = model.fit_seeds(enc.train, enc.evaluate, [0, 1])
    torch.rand(5)  # move the global RNG on
    again = model.fit_seeds(enc.train, enc.evaluate, [1])[0]
    assert first[1].kernels is None
    assert np.array_equal(again.predictions, first[1].predictions)
    assert not np.array_equal(first[0].predictions, first[1].predictions)


def test_vit_mlp_width_is_exact():
    """timm takes int(dim · mlp_ratio): 7 · (61 / 7) rounds down to 60 unless the ratio is nudged."""
    net = get_adapter("vit")(get_adapter("vit").Params(dim=7, heads=1, depth=1, mlp_dim=61)).build((1, 8, 8))
    assert net.blocks[0].mlp.fc1.out_features == 61
    net = get_adapter("vit")(get_adapter("vit").Params(dim=16, heads=2, depth=1, mlp_dim=40)).build((1, 8, 8))
    assert net.blocks[0].mlp.fc1.out_features == 40


# ----------------------------------------------------------------------------------------- errors


def test_unknown_timm_model_is_a_clear_error():
    with pytest.raises(UnknownAdapterError, match=r"unknown timm model 'not_a_model'.*timm.list_models"):
        get_adapter("timm:not_a_model")
    with pytest.raises(UnknownAdapterError, match=r"Did you mean timm:resnet10t"):
        get_adapter("timm:resnet10")
    with pytest.raises(UnknownAdapterError, match="unknown timm model ''"):
        get_adapter("timm:")
    assert get_adapter(TIMM).model_name == "test_resnet"


def test_timm_weights_and_head_cannot_be_set():
    params = get_adapter(TIMM).Params
    for key in ("pretrained", "num_classes", "in_chans", "checkpoint_path"):
        with pytest.raises(ValueError, match=f"model_kwargs may not set {key}"):
            params(model_kwargs={key: 1})
    text = f"""\
name: weights
tasks:
  - {{id: sym, family: symmetry, params: {{variant: partial_exposure}}, encoding: digits}}
models:
  - id: t
    adapter: "{TIMM}"
    params: {{model_kwargs: {{pretrained: true}}}}
"""
    with pytest.raises(SuiteError, match=r"weights.yaml:7.*model_kwargs.*may not set pretrained"):
        parse_suite(text, "weights.yaml")


def test_deep_adapter_rejects_non_image_inputs(toy):
    task, _ = toy
    onehot = encode("onehot", task)
    with pytest.raises(ValueError, match=r"adapter 'convnet' needs image inputs .* got shape \(3, 4\).*encoding: \{name: digits\}"):
        adapter("convnet").fit_seeds(onehot.train, onehot.evaluate, [0])


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA is available here")
def test_cuda_without_cuda_is_an_error(tmp_path, capsys):
    with pytest.raises(DeviceUnavailableError, match="use --device cpu or --device auto"):
        resolve_device("cuda")
    assert resolve_device("auto") == "cpu" and resolve_device("cpu") == "cpu"
    with pytest.raises(ValueError, match="device must be auto, cpu or cuda"):
        resolve_device("gpu")
    suite = tmp_path / "k.yaml"
    suite.write_text(
        "name: k\ntasks:\n  - {id: sym, family: symmetry}\nmodels:\n"
        "  - {id: o, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}\n"
    )
    assert main(["run", "--suite", str(suite), "--out", str(tmp_path / "o"), "--device", "cuda", "--quiet"]) == 2
    assert "--device cuda was requested" in capsys.readouterr().err


# ---------------------------------------------------------------------------- a whole suite with timm

TIMM_SUITE = f"""\
name: timm-tiny
seeds: 2
tasks:
  - id: sym
    family: symmetry
    params: {{variant: partial_exposure}}
    encoding: {{name: digits, samples_per_cell: 2}}
models:
  - id: tiny
    adapter: "{TIMM}"
    params: {{epochs: 3, lr: 0.01}}
"""


def test_timm_model_runs_through_a_suite(tmp_path):
    summary = run_suite(parse_suite(TIMM_SUITE, "timm-tiny.yaml"), tmp_path, device="cpu", progress=False)
    records = sorted(summary.records, key=lambda r: r["seed"])
    assert [(r["model"], r["adapter"], r["seed"], r["status"]) for r in records] == [("tiny", TIMM, 0, "ok"), ("tiny", TIMM, 1, "ok")]
    for r in records:
        assert r["device"] == "cpu" and r["theory_kernel"] == "empirical_ntk_at_init" and r["theory_objective"] == "min_norm"
        assert len(r["predictions"]) == 4 and np.all(np.isfinite(r["predictions"]))
        assert len(r["theory_predictions"]) == 4 and np.all(np.isfinite(r["theory_predictions"]))
        assert 0.0 <= r["additivity"] <= 1.0 + 1e-9
        assert np.isfinite(r["theory_max_abs_diff"])
        assert r["n_train"] == 3 and r["n_test"] == 1
    assert records[0]["predictions"] != records[1]["predictions"]


def test_cg_theory_equals_dense_theory_per_sample():
    """ntk_solver: cg (no Gram kept) gives the dense path's lazy-limit prediction f_0 + K K_tt⁺ (y − f_0)."""
    from compbench.theory.predict import theory_predictions

    task = make_task("additive", anchors=[[4], [4]])
    enc = encode("digits", task, samples_per_cell=2)
    dense = adapter("convnet", **{**TRAIN, "epochs": 1}).fit_seeds(enc.train, enc.evaluate, [3])[0]
    cg = adapter("convnet", **{**TRAIN, "epochs": 1}, ntk_solver="cg", ntk_cg_tol=1e-5).fit_seeds(enc.train, enc.evaluate, [3])[0]
    assert dense.info["ntk_solver"] == "dense" and cg.info["ntk_solver"] == "cg"
    assert cg.kernels is None and cg.info["cg_converged"] and cg.info["cg_iterations"] > 1
    expected = theory_predictions(*dense.kernels, enc.train.y, f0_train=dense.initial_train, f0_eval=dense.initial_eval)
    assert np.linalg.norm(cg.theory_predictions - expected) / np.linalg.norm(expected) < 1e-3
    np.testing.assert_array_equal(cg.predictions, dense.predictions)  # the solver does not touch training


def test_auto_solver_switches_to_cg_when_the_grams_exceed_the_memory_bound():
    model = adapter("convnet", ntk_max_memory=1 << 20)  # 1 MiB: 8·n_tr·(n_tr + n_ev) bytes of Grams
    assert model._solver(100, 200) == "dense"  # 240 kB
    assert model._solver(200, 600) == "cg"  # 1.28 MB
    assert adapter("convnet", ntk_solver="dense", ntk_max_memory=1 << 20)._solver(200, 600) == "dense"


def test_lr_ntk_sets_the_learning_rate_from_the_ntk_and_lanczos_agrees_with_eigvalsh(toy):
    from compbench.adapters.deep import _largest_eigenvalue

    _, enc = toy
    model = adapter("convnet", optimizer="sgd", momentum=0.0, lr_ntk=0.5, epochs=2, batch_size=64)
    fit = model.fit_seeds(enc.train, enc.evaluate, [0])[0]
    lam = float(np.linalg.eigvalsh(fit.kernels[0])[-1])
    assert fit.info["lr"] == pytest.approx(0.5 * len(enc.train) / lam, rel=1e-12)
    net = model._init(0, (1, 8, 16))
    x = torch.as_tensor(enc.train.x)
    assert _largest_eigenvalue(net, x, chunk=4) == pytest.approx(lam, rel=1e-3)
    # several seeds with lr_ntk (stacked under SGD): each has its own learning rate
    two = model.fit_seeds(enc.train, enc.evaluate, [0, 1])
    assert two[0].info["lr"] == pytest.approx(fit.info["lr"], rel=1e-12) and two[0].info["lr"] != two[1].info["lr"]


@pytest.mark.parametrize(
    ("params", "message"),
    [({"lr_ntk": 1.0, "theory": "none"}, "lr_ntk needs theory: empirical"),
     ({"ntk_solver": "cg", "loss": "logistic"}, "SVM theory needs the Grams")],
)
def test_theory_settings_that_cannot_work_are_refused(params, message):
    cls = get_adapter("convnet")
    with pytest.raises(ValueError, match=message):
        cls.Params(**params)
