"""Stacked multi-seed ConvNet training: every member equals its seed trained alone with train_minibatch."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from compbench.adapters.convnet import ConvNetAdapter, ConvNetParams
from compbench.adapters.deep import scalar_module
from compbench.training.minibatch import TrainOptions, train_minibatch
from compbench.training.stacked_convnet import StackedConvNet, train_stacked_convnet

SHAPE = (1, 8, 16)  # digit-like: two 8×8 digits side by side
ADAPTER = ConvNetAdapter(ConvNetParams(width=0.125))  # channels 4, 4, 8, 8; dense 64, 128
SEEDS = [0, 1, 2]
# n = 24 in batches of 8: three batches per epoch, each member with its own order.
BASE = dict(epochs=3, batch_size=8, weight_decay=1e-3, amp=False)
SGD = dict(BASE, optimizer="sgd", lr=1e-3, momentum=0.9)
ADAM = dict(BASE, optimizer="adam", lr=1e-3)


pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py


def data(dtype: torch.dtype, n: int = 24) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(123)
    return torch.rand(n, *SHAPE, generator=g, dtype=dtype), torch.randn(n, generator=g, dtype=dtype)


def nets(seeds: list[int], dtype: torch.dtype) -> list[torch.nn.Sequential]:
    """Each seed's ConvNet exactly as the adapter initialises it."""
    return [ADAPTER._init(s, SHAPE).net.to(dtype) for s in seeds]


def rel(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    """Largest relative difference over the floating-point tensors of two state dicts."""
    assert a.keys() == b.keys()
    return max(
        float((a[k].detach().double() - b[k].double()).abs().max() / b[k].double().abs().max().clamp_min(1e-30))
        for k in b if b[k].is_floating_point()
    )


def solo_runs(seeds, dtype, x, y, init=None, **kw):
    """Each seed alone through train_minibatch: (trained net, result) per seed."""
    out = []
    for seed, net in zip(seeds, init or nets(seeds, dtype)):
        net = copy.deepcopy(net)
        out.append((net, train_minibatch(net, x, y, seed=seed, options=TrainOptions(**kw))))
    return out


def check_members(stacked, solo, x, tol, loss_tol=1e-6):
    for i, (net, res) in enumerate(solo):
        assert rel(stacked.member_state_dict(i), net.state_dict()) < tol  # parameters and BN buffers
        member = stacked.member_module(i).eval()
        with torch.no_grad():
            want = net.eval()(x).reshape(-1)
            got = member(x).reshape(-1)
        assert float((got - want).abs().max() / want.abs().max()) < tol


@pytest.mark.parametrize("kw", [SGD, ADAM], ids=["sgd-momentum", "adam"])
def test_members_equal_solo_runs_float64(kw):
    x, y = data(torch.float64)
    stacked = StackedConvNet(nets(SEEDS, torch.float64))
    results = train_stacked_convnet(stacked, x, y, seeds=SEEDS, options=TrainOptions(**kw))
    solo = solo_runs(SEEDS, torch.float64, x, y, **kw)
    check_members(stacked, solo, x, tol=1e-9)
    for got, (_, want) in zip(results, solo):
        assert (got.epochs, got.steps, got.converged, got.diverged) == (3, 9, False, False)
        assert (want.epochs, want.steps) == (3, 9)
        # train_minibatch's loss is float32 (loss_fn casts), summed in another order here.
        np.testing.assert_allclose(got.loss_history, want.loss_history, rtol=1e-6)


def test_members_equal_solo_runs_float32():
    x, y = data(torch.float32)
    stacked = StackedConvNet(nets(SEEDS, torch.float32))
    train_stacked_convnet(stacked, x, y, seeds=SEEDS, options=TrainOptions(**SGD))
    check_members(stacked, solo_runs(SEEDS, torch.float32, x, y, **SGD), x, tol=1e-4)


def test_stacked_forward_and_round_trip_at_init():
    x, _ = data(torch.float64)
    members = nets(SEEDS, torch.float64)
    stacked = StackedConvNet(members)
    for i, net in enumerate(members):
        assert all(torch.equal(v, net.state_dict()[k]) for k, v in stacked.member_state_dict(i).items())
        assert all(torch.equal(v, net.state_dict()[k]) for k, v in stacked.member_module(i).state_dict().items())
    for mode in ("eval", "train"):  # train: BatchNorm with per-member batch statistics (and updates)
        stacked.train(mode == "train")
        with torch.no_grad():
            out = stacked(x)  # shared inputs
            sub = stacked(x.unsqueeze(0).expand(2, *x.shape), torch.tensor([2, 0]))
        for i, net in enumerate(copy.deepcopy(members)):
            want = net.train(mode == "train")(x).reshape(-1)
            torch.testing.assert_close(out[i], want, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(sub, out[[2, 0]], rtol=1e-12, atol=1e-12)


def staggered_tol(curves: list[list[float]]) -> tuple[float, list[int | None]]:
    """A loss_tol at which runs with these loss curves stop at three different epochs (None: never)."""

    def stops(tol):
        return [next((e + 1 for e, v in enumerate(c) if v < tol), None) for c in curves]

    tol = next(t * (1 + 1e-4) for t in sorted(v for c in curves for v in c) if len(set(stops(t * (1 + 1e-4)))) == 3)
    return tol, stops(tol)


def test_per_member_early_stopping():
    x, y = data(torch.float64)
    kw = dict(SGD, epochs=5)
    # The solo loss curves (loss_tol 0) decide a loss_tol at which the members stop at different epochs.
    tol, expected = staggered_tol([res.loss_history for _, res in solo_runs(SEEDS, torch.float64, x, y, **kw)])
    stacked = StackedConvNet(nets(SEEDS, torch.float64))
    results = train_stacked_convnet(stacked, x, y, seeds=SEEDS, options=TrainOptions(**dict(kw, loss_tol=tol)))
    solo = solo_runs(SEEDS, torch.float64, x, y, **dict(kw, loss_tol=tol))
    assert [r.epochs if r.converged else None for r in results] == expected
    assert [r.epochs if r.converged else None for _, r in solo] == expected
    assert [r.steps for r in results] == [r.steps for _, r in solo]
    # A stopped member is its solo run stopped at that epoch, though the shared optimizer's momentum
    # and weight decay went on moving its rows while the others trained.
    check_members(stacked, solo, x, tol=1e-9)


def test_a_seed_does_not_depend_on_the_others_on_one_thread():
    # float32, where the CPU's grouped and ungrouped convolution kernels round differently: a
    # member running alone (the cell's only seed, or the last one still training) runs beside a
    # ghost copy of itself, so it gets the same numbers as in any larger stack.
    x, y = data(torch.float32)
    kw = dict(ADAM, epochs=5)
    probe = StackedConvNet(nets(SEEDS, torch.float32))
    tol, expected = staggered_tol([r.loss_history for r in train_stacked_convnet(probe, x, y, seeds=SEEDS, options=TrainOptions(**kw))])
    kw["loss_tol"] = tol
    together = StackedConvNet(nets(SEEDS, torch.float32))
    results = train_stacked_convnet(together, x, y, seeds=SEEDS, options=TrainOptions(**kw))
    assert [r.epochs if r.converged else None for r in results] == expected
    for i, seed in enumerate(SEEDS):
        alone = StackedConvNet(nets([seed], torch.float32))
        (result,) = train_stacked_convnet(alone, x, y, seeds=[seed], options=TrainOptions(**kw))
        assert result.loss_history == results[i].loss_history
        a, b = together.member_state_dict(i), alone.member_state_dict(0)
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_diverging_member_leaves_the_others_alone():
    x, y = data(torch.float64)
    kw = SGD
    init = nets(SEEDS, torch.float64)
    with torch.no_grad():  # seed 1's output layer ×30: it blows up in its eighth step (mid-epoch)
        init[1][-1].weight.mul_(30.0)
    stacked = StackedConvNet(init)
    results = train_stacked_convnet(stacked, x, y, seeds=SEEDS, options=TrainOptions(**kw))
    solo = solo_runs(SEEDS, torch.float64, x, y, init=init, **kw)
    assert [r.diverged for r in results] == [r.diverged for _, r in solo] == [False, True, False]
    bad, want = results[1], solo[1][1]
    assert (bad.epochs, bad.steps, bad.converged) == (want.epochs, want.steps, False)
    assert bad.steps % 3 != 0 and np.isnan(bad.final_loss)  # it stopped mid-epoch, the others went on
    for i in (0, 2):
        assert rel(stacked.member_state_dict(i), solo[i][0].state_dict()) < 1e-9
    # Its state on the way out (values up to 1e159) is not reproducible across summation orders,
    # so what is compared is its loss history up to the divergence, which solo and stack share.
    np.testing.assert_allclose(bad.loss_history[:-1], want.loss_history[:-1], rtol=1e-9)


def test_nan_member_changes_nothing_for_the_others():
    x, y = data(torch.float64)
    init = nets(SEEDS, torch.float64)
    with torch.no_grad():
        init[1][2].weight[0] = float("nan")  # a BatchNorm scale
    with_nan = StackedConvNet(init)
    res = train_stacked_convnet(with_nan, x, y, seeds=SEEDS, options=TrainOptions(**ADAM))
    without = StackedConvNet([init[0], init[2]])
    train_stacked_convnet(without, x, y, seeds=[0, 2], options=TrainOptions(**ADAM))
    assert [r.diverged for r in res] == [False, True, False] and res[1].steps == 0
    for i, j in ((0, 0), (2, 1)):  # float64 grouped kernels do not depend on the group count: bitwise
        a, b = with_nan.member_state_dict(i), without.member_state_dict(j)
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_centred_scaled_members_equal_solo():
    x, y = data(torch.float64)
    members = [scalar_module(net, center=True, scale=2.0) for net in nets(SEEDS[:2], torch.float64)]
    stacked = StackedConvNet([m.net for m in members], reference=[m.net0 for m in members], scale=2.0)
    with torch.no_grad():
        assert float(stacked.eval()(x).abs().max()) == 0.0  # starts at exactly 0
    train_stacked_convnet(stacked, x, y, seeds=SEEDS[:2], options=TrainOptions(**ADAM))
    for i, m in enumerate(members):
        train_minibatch(m, x, y, seed=SEEDS[i], options=TrainOptions(**ADAM))
        assert rel(stacked.member_state_dict(i), m.net.state_dict()) < 1e-9


def test_unsupported_layers_are_refused():
    with pytest.raises(ValueError, match="unsupported layer 1"):
        nn = torch.nn
        StackedConvNet([nn.Sequential(nn.Conv2d(1, 2, 3), nn.Dropout(), nn.Flatten(), nn.Linear(2, 1))])
    a, b = nets([0], torch.float64)[0], ConvNetAdapter(ConvNetParams(width=0.25))._init(0, SHAPE).net.double()
    with pytest.raises(ValueError, match="members differ in Conv2d.out_channels"):
        StackedConvNet([a, b])


def test_adapter_vectorised_equals_one_by_one():
    from compbench.encodings import encode
    from compbench.tasks import make_task

    enc = encode("digits", make_task("additive", anchors=[[0, 4], [0, 4]]), samples_per_cell=1)
    common = dict(width=0.125, epochs=2, batch_size=16, lr=1e-3, optimizer="adam")
    seeds = [0, 1, 2]
    one = ConvNetAdapter(ConvNetParams(**common, vectorize=False)).fit_seeds(enc.train, enc.evaluate, seeds)
    many = ConvNetAdapter(ConvNetParams(**common, seeds_per_batch=2)).fit_seeds(enc.train, enc.evaluate, seeds)
    for a, b in zip(one, many):
        np.testing.assert_array_equal(a.initial_train, b.initial_train)
        np.testing.assert_array_equal(a.initial_eval, b.initial_eval)
        np.testing.assert_array_equal(a.kernels[0], b.kernels[0])
        np.testing.assert_array_equal(a.kernels[1], b.kernels[1])
        np.testing.assert_allclose(b.predictions, a.predictions, rtol=1e-4, atol=1e-4 * np.abs(a.predictions).max())
        assert b.error is None and a.error is None
        assert {k: b.info[k] for k in ("epochs", "steps", "converged", "n_params")} == {
            k: a.info[k] for k in ("epochs", "steps", "converged", "n_params")
        }
        assert b.info["stacked_seeds"] in (1, 2)
        assert set(a.info) <= set(b.info)


def test_members_with_their_own_learning_rates_equal_solo_runs():
    # SGD with momentum and weight decay: member i at lr_i is its seed trained alone at lr_i.
    x, y = data(torch.float64)
    lrs = [1e-3, 4e-3, 2.5e-4]
    stacked = StackedConvNet(nets(SEEDS, torch.float64))
    train_stacked_convnet(stacked, x, y, seeds=SEEDS, lrs=lrs, options=TrainOptions(**SGD))
    solo = [solo_runs([s], torch.float64, x, y, **dict(SGD, lr=lr))[0] for s, lr in zip(SEEDS, lrs)]
    check_members(stacked, solo, x, tol=1e-9)
    # and not what one shared rate gives: the rates reach the members
    shared = solo_runs(SEEDS, torch.float64, x, y, **SGD)
    assert rel(stacked.member_state_dict(1), shared[1][0].state_dict()) > 1e-3


@pytest.mark.parametrize(
    ("lrs", "kw", "message"),
    [([1e-3, 1e-3], SGD, "3 members but 2 learning rates"),
     ([1e-3, 0.0, 1e-3], SGD, "positive and finite"),
     ([1e-3] * 3, ADAM, "need optimizer sgd")],
)
def test_per_member_learning_rates_are_checked(lrs, kw, message):
    x, y = data(torch.float64)
    with pytest.raises(ValueError, match=message):
        train_stacked_convnet(StackedConvNet(nets(SEEDS, torch.float64)), x, y, seeds=SEEDS, lrs=lrs, options=TrainOptions(**kw))


def test_lr_ntk_seeds_train_stacked_and_equal_one_by_one():
    from compbench.encodings import encode
    from compbench.tasks import make_task

    enc = encode("digits", make_task("additive", anchors=[[0, 4], [0, 4]]), samples_per_cell=1)
    common = dict(width=0.125, epochs=3, batch_size=4096, optimizer="sgd", momentum=0.9, lr_ntk=0.5,
                  batchnorm=False, center=True, output_scale=10.0)
    one = ConvNetAdapter(ConvNetParams(**common, vectorize=False)).fit_seeds(enc.train, enc.evaluate, SEEDS)
    many = ConvNetAdapter(ConvNetParams(**common)).fit_seeds(enc.train, enc.evaluate, SEEDS)
    assert len({a.info["lr"] for a in one}) == 3  # each seed its own rate, from its own NTK
    for a, b in zip(one, many):
        assert b.info["stacked_seeds"] == 3 and "stacked_seeds" not in a.info
        assert b.info["lr"] == a.info["lr"]
        np.testing.assert_array_equal(a.kernels[0], b.kernels[0])
        np.testing.assert_allclose(b.predictions, a.predictions, rtol=1e-4, atol=1e-4 * np.abs(a.predictions).max())
        assert np.abs(a.predictions - a.initial_eval).max() > 1e-2  # it trained


def test_lr_ntk_with_adam_trains_one_by_one():
    from compbench.encodings import encode
    from compbench.tasks import make_task

    enc = encode("digits", make_task("additive", anchors=[[0, 4], [0, 4]]), samples_per_cell=1)
    fits = ConvNetAdapter(ConvNetParams(width=0.125, epochs=1, optimizer="adam", lr_ntk=0.5)).fit_seeds(enc.train, enc.evaluate, [0, 1])
    assert all("stacked_seeds" not in f.info for f in fits) and fits[0].info["lr"] != fits[1].info["lr"]


def test_centred_members_without_batchnorm_reuse_the_references_outputs_and_equal_solo():
    # No BatchNorm: the frozen reference's output on a sample never changes, so the stack computes
    # it once; minibatches in each member's own order and a member stopping early still match solo.
    x, y = data(torch.float64)
    plain = ConvNetAdapter(ConvNetParams(width=0.125, batchnorm=False))
    members = [scalar_module(plain._init(s, SHAPE).net.double(), center=True, scale=3.0) for s in SEEDS]
    stacked = StackedConvNet([m.net for m in members], reference=[m.net0 for m in members], scale=3.0)
    assert stacked.static_reference
    calls = []
    stacked.reference.register_forward_hook(lambda *_: calls.append(1))
    kw = dict(SGD, epochs=4)
    tol, expected = staggered_tol([r.loss_history for _, r in solo_runs(SEEDS, torch.float64, x, y, init=[copy.deepcopy(m) for m in members], **kw)])
    results = train_stacked_convnet(stacked, x, y, seeds=SEEDS, options=TrainOptions(**dict(kw, loss_tol=tol)))
    assert len(calls) == 3  # once per sample: 24 in chunks of the batch size 8, not once per step (≥ 9 steps)
    solo = solo_runs(SEEDS, torch.float64, x, y, init=members, **dict(kw, loss_tol=tol))
    assert [r.epochs if r.converged else None for r in results] == expected
    for i, (m, _) in enumerate(solo):
        assert rel(stacked.member_state_dict(i), m.net.state_dict()) < 1e-9


def test_a_reference_with_batchnorm_is_run_every_step():
    members = [scalar_module(net, center=True) for net in nets(SEEDS[:2], torch.float64)]
    stacked = StackedConvNet([m.net for m in members], reference=[m.net0 for m in members])
    assert not stacked.static_reference
    with pytest.raises(ValueError, match="BatchNorm"):
        stacked.reference_outputs(data(torch.float64)[0], 8)


def test_own_learning_rates_with_members_stopping_and_diverging_equal_solo():
    # Member 1 at a rate that blows up, the others stopping early at their own epochs: each is its
    # solo run, though the shared optimizer's momentum and weight decay go on moving stopped rows.
    x, y = data(torch.float64)
    lrs = [1e-3, 50.0, 2.5e-3]
    kw = dict(SGD, epochs=8)
    solo_free = [solo_runs([s], torch.float64, x, y, **dict(kw, lr=lr))[0] for s, lr in zip(SEEDS, lrs)]
    assert [r.diverged for _, r in solo_free] == [False, True, False]
    finite = [r.loss_history for i, (_, r) in enumerate(solo_free) if i != 1]
    tol = min(c[4] for c in finite) * (1 + 1e-6)  # someone stops after epoch 5 at the latest
    stacked = StackedConvNet(nets(SEEDS, torch.float64))
    results = train_stacked_convnet(stacked, x, y, seeds=SEEDS, lrs=lrs, options=TrainOptions(**dict(kw, loss_tol=tol)))
    solo = [solo_runs([s], torch.float64, x, y, **dict(kw, lr=lr, loss_tol=tol))[0] for s, lr in zip(SEEDS, lrs)]
    assert [(r.steps, r.converged, r.diverged) for r in results] == [(r.steps, r.converged, r.diverged) for _, r in solo]
    assert any(r.converged for r in results) and results[1].diverged
    for i in (0, 2):
        assert rel(stacked.member_state_dict(i), solo[i][0].state_dict()) < 1e-9


def test_a_single_centred_member_without_batchnorm_equals_solo():
    # One seed runs beside a ghost copy of itself; its precomputed reference rows must follow it.
    x, y = data(torch.float64)
    plain = ConvNetAdapter(ConvNetParams(width=0.125, batchnorm=False))
    member = scalar_module(plain._init(5, SHAPE).net.double(), center=True, scale=2.0)
    stacked = StackedConvNet([member.net], reference=[member.net0], scale=2.0)
    assert stacked.static_reference
    train_stacked_convnet(stacked, x, y, seeds=[5], options=TrainOptions(**SGD))
    (net, _), = solo_runs([5], torch.float64, x, y, init=[member], **SGD)
    assert rel(stacked.member_state_dict(0), net.net.state_dict()) < 1e-9
