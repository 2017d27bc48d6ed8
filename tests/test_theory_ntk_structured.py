"""The structured empirical NTK (per-layer Grams) against the generic torch.func path and brute force.

Models: a small MLP with BatchNorm/LayerNorm, a token MLP (the "positions" mode), and the deep
adapters' own networks (convnet, resnet, vit) at tiny sizes; float64, non-trivial BatchNorm running
statistics and affine parameters, so eval mode and every normalisation layer matter.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")
pytest.importorskip("timm")
nn = torch.nn

from compbench.adapters import get_adapter  # noqa: E402
from compbench.theory import empirical_ntk  # noqa: E402
from compbench.theory import ntk as ntk_module  # noqa: E402
from compbench.theory.ntk import structured_coverage  # noqa: E402

IMAGE = (1, 8, 16)  # two 8×8 digits side by side
# The generic path runs timm's fused attention under vmap, which torch warns is slow: expected here.
pytestmark = [
    pytest.mark.filterwarnings("ignore:There is a performance drop:UserWarning"),
    pytest.mark.usefixtures("one_thread"),  # tests/conftest.py
]


class TokenMLP(nn.Module):
    """A Linear layer applied to T = 2 tokens per sample, then a LayerNorm and a mean readout."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(4, 64)
        self.norm = nn.LayerNorm(64)
        self.head = nn.Linear(64, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tokens = x.reshape(x.shape[0], 2, 4)
        return self.head(torch.tanh(self.norm(self.embed(tokens))).mean(1))


def adapter_net(name: str, **params) -> nn.Module:
    cls = get_adapter(name)
    return cls(cls.Params(**params)).build(IMAGE)


def build(kind: str) -> tuple[nn.Module, tuple[int, ...]]:
    torch.manual_seed(0)
    if kind == "mlp":
        net, shape = nn.Sequential(
            nn.Linear(6, 16), nn.BatchNorm1d(16), nn.Tanh(), nn.Linear(16, 16), nn.LayerNorm(16), nn.ReLU(), nn.Linear(16, 1)
        ), (6,)
    elif kind == "tokens":
        net, shape = TokenMLP(), (8,)
    elif kind == "convnet":
        net, shape = adapter_net("convnet", width=0.125, hidden=[128, 128]), IMAGE
    elif kind == "resnet":
        net, shape = adapter_net("resnet", channels=[4, 8], blocks=[1, 1]), IMAGE
    else:
        net, shape = adapter_net("vit", dim=8, depth=1, heads=2, mlp_dim=16), IMAGE
    net = net.double()
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in net.modules():
            if isinstance(m, nn.modules.batchnorm._BatchNorm):
                m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=gen, dtype=torch.float64) - 0.5)
                m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen, dtype=torch.float64) + 0.5)
            if isinstance(m, (nn.modules.batchnorm._BatchNorm, nn.LayerNorm)):
                m.weight.copy_(torch.rand(m.weight.shape, generator=gen, dtype=torch.float64) + 0.5)
                m.bias.copy_(torch.rand(m.bias.shape, generator=gen, dtype=torch.float64) - 0.5)
    return net, shape


def inputs(shape: tuple[int, ...], n: int, seed: int) -> torch.Tensor:
    return torch.randn(n, *shape, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def rel_err(K: torch.Tensor, ref: torch.Tensor) -> float:
    return float(torch.linalg.norm(K - ref) / torch.linalg.norm(ref))


def brute_force(net: nn.Module, xa: torch.Tensor, xb: torch.Tensor) -> torch.Tensor:
    """One backward per sample in eval mode (as the reference's get_ntk.py); restores the mode."""
    modes = [(m, m.training) for m in net.modules()]
    net.eval()
    params = [p for p in net.parameters() if p.requires_grad]

    def jac(x: torch.Tensor) -> torch.Tensor:
        rows = [torch.cat([g.reshape(-1) for g in torch.autograd.grad(net(x[i : i + 1]).sum(), params)]) for i in range(len(x))]
        return torch.stack(rows)

    K = (jac(xa) @ jac(xb).T).detach()
    for m, mode in modes:
        m.train(mode)
    return K


MODELS = ["mlp", "tokens", "convnet", "resnet", "vit"]


@pytest.mark.parametrize("kind", MODELS)
def test_structured_equals_generic_and_brute_force(kind):
    net, shape = build(kind)
    net.train()  # the NTK must be taken in eval mode whatever mode the module is in
    x, z = inputs(shape, 6, 2), inputs(shape, 4, 3)
    K = empirical_ntk(net, x)
    Kg = empirical_ntk(net, x, structured=False)
    assert K.shape == (6, 6) and K.dtype == torch.float64
    assert rel_err(K, Kg) < 1e-6
    assert torch.allclose(K, K.T, rtol=0, atol=1e-12 * float(K.abs().max()))
    Kc, Kcg = empirical_ntk(net, x, z), empirical_ntk(net, x, z, structured=False)
    assert Kc.shape == (6, 4)
    assert rel_err(Kc, Kcg) < 1e-6
    # Both engines against one backward per sample, on three samples.
    ref = brute_force(net, x[:3], z[:3])
    assert rel_err(empirical_ntk(net, x[:3], z[:3]), ref) < 1e-6
    assert rel_err(empirical_ntk(net, x[:3], z[:3], structured=False), ref) < 1e-6
    assert net.training


def test_every_parameter_structured_except_vit_embeddings():
    for kind in ("mlp", "tokens", "convnet", "resnet"):
        net, _ = build(kind)
        cov = structured_coverage(net)
        assert cov["generic"] == [], kind
        assert sorted(cov["structured"]) == sorted(n for n, _ in net.named_parameters()), kind
    vit, _ = build("vit")
    cov = structured_coverage(vit)
    assert sorted(cov["generic"]) == ["cls_token", "pos_embed"]
    assert {"patch_embed.proj.weight", "blocks.0.attn.qkv.weight", "blocks.0.norm1.weight", "head.weight"} <= set(cov["structured"])
    assert len(cov["structured"]) + 2 == len(list(vit.parameters()))


def test_tokens_take_the_positions_mode():
    """The token MLP's first layer is cheaper through position Grams: that path is the one tested above."""
    net, shape = build("tokens")
    layers, rest = ntk_module._structured_layers(net)
    ntk_module._plan(net, layers, inputs(shape, 2, 0))
    assert rest == []
    assert [(layer.kind, layer.mode) for layer in layers] == [("linear", "positions"), ("layernorm", "grad"), ("linear", "grad")]


# convnet: chunks of 2 with the second argument's factors cached; vit: chunks of 1, nothing cached.
@pytest.mark.parametrize(("kind", "max_memory"), [("convnet", 6_000_000), ("vit", 1 << 16)])
def test_small_max_memory_chunks_to_the_same_gram(kind, max_memory, monkeypatch):
    net, shape = build(kind)
    x, z = inputs(shape, 7, 4), inputs(shape, 5, 5)
    full, full_cross = empirical_ntk(net, x), empirical_ntk(net, x, z)
    seen: list[int] = []
    real = ntk_module._factors

    def spy(module, layers, xs, *rest):  # noqa: ANN001, ANN002, ANN202
        seen.append(xs.shape[0])
        return real(module, layers, xs, *rest)

    monkeypatch.setattr(ntk_module, "_factors", spy)
    small = empirical_ntk(net, x, max_memory=max_memory)
    small_cross = empirical_ntk(net, x, z, max_memory=max_memory)
    assert seen and max(seen) < 5  # the samples really were processed in chunks
    assert rel_err(small, full) < 1e-12
    assert rel_err(small_cross, full_cross) < 1e-12


def test_modes_and_running_statistics_restored():
    net, shape = build("resnet")
    net.train()
    net.stages[1].eval()  # a mixed state must come back as it was
    before = {n: m.training for n, m in net.named_modules()}
    stats = {n: b.clone() for n, b in net.named_buffers()}
    x = inputs(shape, 4, 6)
    for structured in (True, False):
        empirical_ntk(net, x, structured=structured)
        assert {n: m.training for n, m in net.named_modules()} == before
        # eval mode throughout: no BatchNorm statistic was updated by the NTK's forward passes
        for n, b in net.named_buffers():
            assert torch.equal(b, stats[n]), n


def test_float32_module_matches_float64_reference():
    """A float32 network (as the adapters train) gives the float64 Gram to float32 accuracy."""
    net, shape = build("convnet")
    x = inputs(shape, 5, 7)
    ref = empirical_ntk(net, x).numpy()
    K = empirical_ntk(net.float(), x.float())
    assert K.dtype == torch.float64
    assert np.linalg.norm(K.numpy() - ref) / np.linalg.norm(ref) < 1e-4


def test_timm_fused_batchnorm_activation_takes_the_structured_engine():
    """timm's BatchNormAct2d (EfficientNet, MobileNet, RegNet, ByobNet's ConvNormAct) overrides forward: its scale and shift
    went to the generic engine, a vmap(jacrev) of the whole network per chunk (#34 item 4). Its output is taken at
    the input of its `drop`, before the activation; the kernel is the generic engine's and brute force's."""
    import timm

    torch.manual_seed(0)
    net = timm.create_model("test_efficientnet", pretrained=False, num_classes=1, in_chans=1).double()
    fused = [m for m in net.modules() if type(m).__name__ == "BatchNormAct2d"]
    assert fused
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in fused:
            m.running_mean.copy_(torch.rand(m.running_mean.shape, generator=gen, dtype=torch.float64) - 0.5)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=gen, dtype=torch.float64) + 0.5)
            m.weight.copy_(torch.rand(m.weight.shape, generator=gen, dtype=torch.float64) + 0.5)
            m.bias.copy_(torch.rand(m.bias.shape, generator=gen, dtype=torch.float64) - 0.5)
    cov = structured_coverage(net)
    assert cov["generic"] == []  # before: the 26 scale and shift tensors of its BatchNormAct2d layers
    x, z = inputs((1, 32, 32), 5, 2), inputs((1, 32, 32), 3, 3)
    K, Kg = empirical_ntk(net, x), empirical_ntk(net, x, structured=False)
    assert rel_err(K, Kg) < 1e-12
    assert rel_err(empirical_ntk(net, x[:3], z), brute_force(net, x[:3], z)) < 1e-12


def test_timm_linear_takes_the_structured_engine():
    """timm.layers.Linear (MobileNetV3's classifier) computes F.linear: covered like nn.Linear, not by the generic engine."""
    from timm.layers import Linear

    torch.manual_seed(0)
    net = nn.Sequential(Linear(6, 8), nn.Tanh(), Linear(8, 1)).double()
    assert structured_coverage(net)["generic"] == []  # before: all four tensors
    x = inputs((6,), 5, 2)
    assert rel_err(empirical_ntk(net, x), brute_force(net, x, x)) < 1e-12
