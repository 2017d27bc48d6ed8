"""The convnet's strided, padded convolutions: shapes by hand, the authors' VanillaCNN as a configuration
(Schott et al. 2022, bethgelab/InDomainGeneralizationBenchmark@8eefa96 model.py), receptive fields by hand,
PyTorch's default initialisation, and the validation of `stride` and `padding`."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from compbench.adapters.convnet import ConvNetAdapter, ConvNetParams, conv_side  # noqa: E402
from compbench.encodings.batch import Batch  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # tests/conftest.py

# The authors' layers at their 64×64; on 32×32 the last convolution is padded by 1 (the suite's vanilla-cnn).
VANILLA = dict(channels=[32, 32, 64, 64, 256], kernel_size=4, stride=[2, 2, 2, 2, 1], padding=[1, 1, 1, 1, 0],
               batchnorm=False, pool=False, hidden=[], init="torch")
VANILLA_32 = {**VANILLA, "padding": 1}


def build(params: dict, in_shape=(1, 64, 64), n_out: int = 7) -> torch.nn.Sequential:
    return ConvNetAdapter(ConvNetParams(**params, theory="none"), device="cpu").build(in_shape, n_out)


def sides(net: torch.nn.Sequential, in_shape) -> list[tuple[int, ...]]:
    """The output shape (C, H, W) of every convolution for one input."""
    out, h = [], torch.zeros(1, *in_shape)
    for m in net:
        h = m(h)
        if isinstance(m, torch.nn.Conv2d):
            out.append(tuple(h.shape[1:]))
    return out


def test_conv_side_by_hand():
    assert conv_side(64, 4, 2, 1) == 32  # (64 + 2 − 4) // 2 + 1
    assert conv_side(4, 4, 1, 0) == 1
    assert conv_side(2, 4, 1, 1) == 1  # (2 + 2 − 4) // 1 + 1
    assert conv_side(2, 4, 1, 0) == -1  # no output
    assert conv_side(7, 3, 2, 0) == 3  # (7 − 3) // 2 + 1
    assert conv_side(28, 5) == 24  # the reference ConvNet's valid 5×5


def test_vanilla_cnn_is_the_authors_layout_at_64():
    net = build(VANILLA, (1, 64, 64))
    convs = [m for m in net if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.stride, c.padding) for c in convs] == [
        (32, (4, 4), (2, 2), (1, 1)), (32, (4, 4), (2, 2), (1, 1)), (64, (4, 4), (2, 2), (1, 1)),
        (64, (4, 4), (2, 2), (1, 1)), (256, (4, 4), (1, 1), (0, 0))]
    assert sides(net, (1, 64, 64)) == [(32, 32, 32), (32, 16, 16), (64, 8, 8), (64, 4, 4), (256, 1, 1)]  # model.py's comments
    assert [type(m).__name__ for m in net] == ["Conv2d", "ReLU"] * 5 + ["Flatten", "Linear"]  # no BatchNorm, no pooling
    assert net[-1].in_features == 256 and net[-1].out_features == 7
    # Conv weights k·k·C_in·C_out + biases, then the 256 → 7 readout, by hand:
    by_hand = (16 * 1 * 32 + 32) + (16 * 32 * 32 + 32) + (16 * 32 * 64 + 64) + (16 * 64 * 64 + 64) + (16 * 64 * 256 + 256) + (256 * 7 + 7)
    assert sum(p.numel() for p in net.parameters()) == by_hand == 379_591
    assert net(torch.rand(3, 1, 64, 64)).shape == (3, 7)


def test_vanilla_cnn_at_32_pads_the_last_convolution():
    net = build(VANILLA_32, (1, 32, 32))
    assert sides(net, (1, 32, 32)) == [(32, 16, 16), (32, 8, 8), (64, 4, 4), (64, 2, 2), (256, 1, 1)]
    assert net(torch.rand(2, 1, 32, 32)).shape == (2, 7)
    # The last 4×4 kernel meets the 2×2 map (padded to 4×4) with its central 2×2 taps only: the outer taps
    # never touch data, so changing them changes nothing.
    x = torch.rand(4, 1, 32, 32)
    before = net(x)
    with torch.no_grad():
        w = net[8].weight
        inner = w[:, :, 1:3, 1:3].clone()
        w.normal_()
        w[:, :, 1:3, 1:3] = inner
    torch.testing.assert_close(net(x), before)
    # The authors' unpadded last convolution has no room at 32×32: a clear error naming it.
    with pytest.raises(ValueError, match=r"convolution 4 \(4×4, stride 1, padding 0\) has no output on its 2×2 input "
                                         r"\(the images are 32×32, 5 convolutions\)"):
        build(VANILLA, (1, 32, 32))


def test_receptive_fields_by_hand():
    """Convolution i's unit at row r sees input rows [r·J − P, r·J − P + R − 1] (clipped to the image), with jump
    J = 2^i and R = 1 + Σ 3·2^j, P = Σ 2^j over the layers j < i+1 (4×4, stride 2, padding 1): R = 4, 10, 22, 46."""
    net = build(VANILLA_32, (1, 32, 32))
    convs = [m for m in net if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():  # all-positive weights: the footprint is exactly where the gradient is non-zero
        for c in convs:
            c.weight.abs_().add_(0.01)
    for depth, (size, pad) in enumerate([(4, 1), (10, 3), (22, 7), (46, 15)]):
        x = torch.zeros(1, 1, 32, 32, requires_grad=True)
        h = x
        for c in convs[: depth + 1]:
            h = c(h)
        r = 1 if h.shape[2] > 1 else 0
        h[0, 0, r, r].backward()
        rows = torch.nonzero(x.grad[0, 0].abs().sum(1)).flatten().tolist()
        jump = 2 ** (depth + 1)
        first = r * jump - pad
        assert rows == list(range(max(0, first), min(32, first + size))), (depth, rows)


def test_torch_init_is_pytorchs_default():
    net = build(VANILLA_32, (1, 32, 32))
    for m in net:
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)):
            w, b = m.weight.detach(), m.bias.detach()
            bound = 1 / np.sqrt(w[0].numel())  # kaiming_uniform(a=√5): U(±1/√fan_in), biases the same
            assert float(w.abs().max()) <= bound and float(b.abs().max()) <= bound
            assert float(w.abs().max()) > 0.9 * bound  # uniform over the whole range, not a narrower draw
    kaiming = build({**VANILLA_32, "init": "kaiming"}, (1, 32, 32))
    assert float(kaiming[0].weight.detach().std()) > 2 * float(net[0].weight.detach().std())  # √(2/16) against 1/√48


@pytest.mark.parametrize(("params", "message"), [
    ({"stride": 0}, "stride 0 is not allowed: a stride is an integer ≥ 1"),
    ({"stride": [2, 2, 1]}, "stride lists 3 values for 2 convolutions \\(channels\\): give one per convolution"),
    ({"stride": [2, -1]}, "stride -1 is not allowed"),
    ({"padding": -1}, "padding -1 is not allowed: a padding is an integer ≥ 0"),
    ({"padding": [1]}, "padding lists 1 values for 2 convolutions"),
    ({"padding": "full"}, "padding"),
    ({"stride": 1.5}, "stride"),
])
def test_stride_and_padding_are_validated(params, message):
    with pytest.raises(ValueError, match=message):
        ConvNetParams(channels=[4, 8], **params)


def test_stride_one_keeps_the_old_shapes():
    for padding, side in (("valid", 32 - 2 * 4), ("same", 32), (2, 32)):
        net = build({"channels": [2, 2], "kernel_size": 5, "padding": padding, "pool": False, "hidden": []}, (1, 32, 32), 1)
        assert sides(net, (1, 32, 32))[-1] == (2, side, side)
    auto = build({"channels": [2, 2], "kernel_size": 5, "stride": 2, "pool": False, "hidden": []}, (1, 8, 8), 1)
    assert sides(auto, (1, 8, 8)) == [(2, 4, 4), (2, 2, 2)]  # auto: 8 → 2 → none unpadded, so 'same' (2 pixels)


def test_vanilla_cnn_trains_stacked_with_its_ntk():
    rng = np.random.default_rng(0)
    n = 12
    x = rng.random((n, 1, 32, 32)).astype(np.float32)
    ids = np.arange(n)
    batch = Batch(x, np.stack([ids, ids], 1), ids, (n, n), rng.standard_normal((n, 3)))
    model = ConvNetAdapter(ConvNetParams(**VANILLA_32, width=0.125, epochs=2, batch_size=4), device="cpu")
    fits = model.fit_seeds(batch, batch, [0, 1])
    assert all(f.error is None for f in fits)
    assert fits[0].predictions.shape == (n, 3) and fits[0].kernels[0].shape == (n, n)
    assert fits[0].info["stacked_seeds"] == 2
    assert not np.allclose(fits[0].predictions, fits[1].predictions)  # each seed its own network
