"""The `slot_decoder` adapter: f(z) = Σ_s φ(z_s); slot-additivity, shapes, seeding, stacked
multi-seed training equal to each seed alone, and its output-averaged empirical NTK."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from compbench.adapters import get_adapter  # noqa: E402
from compbench.adapters.slot_decoder import SlotDecoderAdapter, SlotDecoderParams, slot_decoder_module  # noqa: E402
from compbench.encodings import encode  # noqa: E402
from compbench.tasks.base import TaskData, validate_split  # noqa: E402
from compbench.testing import check_adapter  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

SMALL = dict(width=16, depth=2, steps=40, lr=3e-3, batch_size=8)
PIX = 4  # a 2 × 2 "image"


def slot_task(side: int = 3, pixels: int = PIX) -> TaskData:
    """Two slots of (x, y) factors on a side×side grid each; targets: two additive bumps on a tiny image.

    Orthogonal support: a cell is trained when either slot sits at value 0.
    """
    g = np.linspace(0.0, 1.0, side)
    feats = np.array(list(itertools.product(g, g)))
    n = len(feats)
    cells = np.array(list(itertools.product(range(n), range(n))))
    centres = np.linspace(0, 1, pixels)

    def render(f: np.ndarray) -> np.ndarray:
        return np.exp(-((centres - f[0]) ** 2) / 0.2) * (1 + f[1])

    y = np.stack([render(feats[a]) + render(feats[b]) for a, b in cells])
    train = (cells[:, 0] == 0) | (cells[:, 1] == 0)
    task = TaskData("slots-test", cells, y, train, (n, n), "regression", value_features=(feats, feats))
    validate_split(task)
    return task


def fit(task: TaskData, seeds: list[int], **params: object) -> list:
    enc = encode("latents", task)
    return SlotDecoderAdapter(SlotDecoderParams(**{**SMALL, **params})).fit_seeds(enc.train, enc.evaluate, seeds)


def test_registered() -> None:
    assert get_adapter("slot_decoder") is SlotDecoderAdapter


@pytest.mark.parametrize("share", [True, False])
def test_module_is_slot_additive(share: bool) -> None:
    net = slot_decoder_module(3, 2, 16, 2, 5, share, flat=False).double()
    net.init_(0, 1.0)
    rng = np.random.default_rng(0)
    s1, s1b, s2, s2b = (torch.as_tensor(rng.uniform(-1, 1, (7, 3))) for _ in range(4))

    def f(a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
        return net(torch.cat([a, b], dim=1)).detach().numpy()

    contrast = f(s1, s2) - f(s1, s2b) - f(s1b, s2) + f(s1b, s2b)
    np.testing.assert_allclose(contrast, 0.0, atol=1e-12)
    assert np.abs(f(s1, s2)).max() > 1e-2  # not trivially zero
    swapped = np.abs(f(s1, s2) - f(s2, s1)).max()
    if share:  # one φ for both slots: swapping the slots changes nothing
        assert swapped < 1e-12
    else:  # one φ per slot
        assert swapped > 1e-3


@pytest.mark.parametrize("share", [True, False])
def test_stacked_forward_equals_each_member(share: bool) -> None:
    from compbench.training.stacked_modules import ModuleStack

    members = []
    for s in (0, 1):
        m = slot_decoder_module(2, 3, 8, 2, 4, share, flat=False).double()
        m.init_(s, 1.0)
        members.append(m)
    stack = ModuleStack(members)
    x = torch.as_tensor(np.random.default_rng(2).uniform(-1, 1, (5, 6)))
    with torch.no_grad():
        out = stack(x)
    assert out.shape == (2, 5, 4)
    for i, m in enumerate(members):
        np.testing.assert_allclose(out[i].numpy(), m(x).detach().numpy(), rtol=1e-12, atol=1e-13)


def test_shapes_vector_and_scalar() -> None:
    task = slot_task()
    enc = encode("latents", task)
    fitted = fit(task, [0, 1], theory="empirical")
    for f in fitted:
        assert f.error is None
        assert f.predictions.shape == enc.evaluate.prediction_shape == (len(task.cells), PIX)
        assert f.initial_train.shape == (len(enc.train), PIX)
        assert f.kernels[0].shape == (len(enc.train), len(enc.train))
        assert f.kernels[1].shape == (len(enc.evaluate), len(enc.train))
        assert f.info["ntk_outputs"] == "trace"
    scalar = TaskData("s", task.cells, task.y[:, 0], task.train_mask, task.n_values, "regression", value_features=task.value_features)
    f = fit(scalar, [0])[0]
    assert f.predictions.shape == (len(task.cells),)
    assert f.kernels is None  # theory: none by default


def test_predictions_are_slot_additive_on_held_out_cells() -> None:
    task = slot_task()
    f = fit(task, [0], steps=100)[0]
    n = task.n_values[0]
    pred = f.predictions.reshape(n, n, PIX)
    contrast = pred - pred[:, :1] - pred[:1, :] + pred[:1, :1]
    assert np.abs(contrast).max() < 1e-5 * np.abs(pred).max()


def test_seeding_same_seed_same_result_different_seeds_differ() -> None:
    task = slot_task()
    a, b = fit(task, [1, 2]), fit(task, [1, 2])
    for fa, fb in zip(a, b):
        np.testing.assert_array_equal(fa.predictions, fb.predictions)
    assert np.abs(a[0].predictions - a[1].predictions).max() > 1e-3


@pytest.mark.parametrize("share", [True, False])
def test_stacked_seeds_equal_each_seed_alone(share: bool) -> None:
    task = slot_task()
    together = fit(task, [4, 8], share=share, dtype="float64")
    for seed, f in zip([4, 8], together):
        alone = fit(task, [seed], share=share, dtype="float64")[0]
        np.testing.assert_allclose(f.predictions, alone.predictions, rtol=1e-9, atol=1e-11)
    enc = encode("latents", task)
    f0_loss = np.mean((together[0].initial_train - enc.train.y) ** 2)
    assert together[0].info["train_loss"] < 0.5 * f0_loss


def test_empirical_ntk_is_the_output_averaged_gradient_gram() -> None:
    task = slot_task()
    enc = encode("latents", task)
    f = fit(task, [3], theory="empirical", dtype="float64")[0]
    net = slot_decoder_module(2, 2, SMALL["width"], SMALL["depth"], PIX, True, flat=False).double()
    net.init_(3, 1.0)
    x = torch.as_tensor(enc.train.x[:3])
    params = dict(net.named_parameters())
    jac = torch.func.jacrev(lambda p: torch.func.functional_call(net, p, (x,)))(params)  # (3, K, *shape)
    J = torch.cat([j.reshape(3, PIX, -1) for j in jac.values()], dim=2).detach().numpy()
    expect = np.einsum("ikp,jkp->ij", J, J) / PIX
    np.testing.assert_allclose(f.kernels[0][:3, :3], expect, rtol=1e-10)


def test_columns_must_split_into_slots() -> None:
    task = slot_task()
    enc = encode("latents", task)
    with pytest.raises(ValueError, match="3 equal slots"):
        SlotDecoderAdapter(SlotDecoderParams(slots=3, **SMALL)).fit_seeds(enc.train, enc.evaluate, [0])


def test_theory_kernel_name() -> None:
    assert SlotDecoderAdapter(SlotDecoderParams()).theory_kernel_name() == "none"  # theory is off by default
    assert SlotDecoderAdapter(SlotDecoderParams(theory="empirical")).theory_kernel_name() == "empirical_ntk"


def test_training_settings_keep_their_bounds_and_defaults() -> None:
    # Declared once (stacked.py) with their bounds; each adapter gives only its defaults.
    assert (SlotDecoderParams().lr, SlotDecoderParams().steps, SlotDecoderParams().batch_size) == (1e-3, 3000, 256)
    for bad in ({"lr": 0}, {"steps": 0}, {"batch_size": 0}, {"init_scale": -1.0}, {"theory": "analytic"}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SlotDecoderParams(**bad)


def test_conformance_kit() -> None:
    # The kit's one-hot tasks have two components of equal size: the slots are the components' blocks.
    report = check_adapter(SlotDecoderAdapter, {"width": 8, "steps": 30})
    assert report.ok, str(report)
