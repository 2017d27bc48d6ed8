"""Empirical neural tangent kernel of a torch module at its current parameters.

K_ij = ⟨∂f(x_i)/∂θ, ∂f(x_j)/∂θ⟩ over every trainable parameter, in float64, the module in eval
mode (BatchNorm in train mode would couple samples, dropout would add noise).

Two engines, chosen automatically per parameter:

* **Structured** (no per-sample autograd Jacobians) for parameters of ``nn.Linear``, ``nn.Conv2d``,
  ``BatchNorm*d`` (eval mode, running statistics), ``nn.LayerNorm`` and ``nn.GroupNorm``. One
  forward and one backward pass of ``Σ_i f(x_i)`` over a chunk give, for every call of such a layer,
  its per-sample input a_i and output gradient g_i (in eval mode samples do not interact, so
  ∂Σf/∂out_i = ∂f_i/∂out_i). A Linear/conv layer applied at positions t (tokens, or the im2col
  patches of a convolution) has per-sample weight gradient Σ_t g_it a_itᵀ, so

      K_ij = Σ_{t,s} (a_it·a_js)(g_it·g_js)            (+ a constant 1 inside the first factor for the bias)

  computed either from the position Grams ("positions": cost T²(d_in + d_out) per pair; for
  T = 1 this is the Hadamard product (A Aᵀ) ⊙ (G Gᵀ)) or from the per-sample weight gradient
  J_i = Σ_t g_it a_itᵀ formed by one einsum ("grad": cost d_in·d_out per pair), whichever is
  cheaper for the layer. Normalisation layers contribute J_i = Σ_positions g_i ⊙ x̂_i (scale)
  and Σ_positions g_i (shift). All exact; a layer called several times (shared weights) sums its calls.
* **Generic** (``torch.func``: ``vmap(jacrev)`` per chunk) for every other parameter (a ViT's
  position embedding and class token, custom modules, subclasses that override ``forward``, a
  layer whose input is not batch-first), and for the whole network with ``structured=False``.

Memory is bounded by ``max_memory`` (bytes): samples are processed in chunks whose factors fit.

**Several outputs.** A module with outputs (n, K) has one Jacobian J_k per output. ``outputs="trace"``
gives the output-averaged kernel (1/K) Σ_k J_k J_kᵀ (n_a × n_b): both engines stack the K per-output
gradients of a sample into one longer feature (the structured engine widens G to K·d_out for a
position Gram, since Σ_k (a·a')(g_k·g'_k) = (a·a')(G·G')), take one Gram and divide by K.
``outputs="full"`` gives every pair of outputs, (n_a·K × n_b·K), sample-major (row i·K + k = sample
i, output k): each (sample, output) is one row of the factors. The structured engine needs one
backward pass per output (K passes over a retained graph); its factors, and the generic engine's
Jacobians, are K times larger, which the memory budget accounts for; for "trace", when even one
sample's K-fold factors exceed ``max_memory``, the K per-output kernels are summed one at a time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from compbench.errors import CompbenchError
from compbench.stage_progress import report
from compbench.thread_scope import one_thread

if TYPE_CHECKING:  # torch is imported lazily so that `import compbench.theory` stays light
    import torch

__all__ = ["DEFAULT_MAX_MEMORY", "empirical_ntk", "structured_coverage"]

# Cache per-sample Jacobians of the second argument when they fit in this many elements;
# otherwise they are recomputed for every chunk of the first argument.
_JAC_CACHE_ELEMENTS = 1 << 26
DEFAULT_MAX_MEMORY = 1 << 30  # bytes of factors / Jacobians held at once


@contextlib.contextmanager
def eval_mode(module: torch.nn.Module) -> Iterator[None]:
    """Eval mode for the duration (BatchNorm running stats, no dropout); every submodule's own mode
    restored afterwards (also mixed train/eval modes)."""
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        yield
    finally:
        for m, mode in modes:
            m.train(mode)


class _Unsupported(CompbenchError):
    """The structured engine cannot handle this module or call (the generic engine takes over)."""


# ---------------------------------------------------------------------------------- generic engine


def _jacobian_fn(module: torch.nn.Module, names: list[str], n_out: int = 1, layout: str = "scalar"):
    """A function (diff, const, buffers, x_chunk) -> per-sample flattened gradients, one per name:
    (n, P) for a scalar output, (n, K·P) for `layout` "trace" (the outputs' gradients side by side),
    (n·K, P) for "full" (one row per sample and output, sample-major)."""
    from torch.func import functional_call, jacrev, vmap

    def f_single(diff: dict[str, Any], const: dict[str, Any], buffers: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
        out = functional_call(module, (diff, const, buffers), (x.unsqueeze(0),))
        if out.numel() != n_out:
            if n_out == 1:
                raise ValueError(
                    f"empirical_ntk needs one scalar output per sample, got output shape {tuple(out.shape)} "
                    "for a batch of 1"
                )
            raise ValueError(f"empirical_ntk expected {n_out} outputs per sample, got output shape {tuple(out.shape)} for a batch of 1")
        return out.reshape(()) if n_out == 1 else out.reshape(n_out)

    per_sample = vmap(jacrev(f_single), in_dims=(None, None, None, 0))

    def jac(diff, const, buffers, x):
        grads = per_sample(diff, const, buffers, x)  # name -> (n, *param) or (n, K, *param)
        rows = x.shape[0] * (n_out if layout == "full" else 1)
        return [grads[name].reshape(rows, -1) for name in names]

    return jac


def trainable_parameters(module: torch.nn.Module) -> tuple[dict[str, torch.nn.Parameter], torch.nn.Parameter]:
    """The parameters an NTK differentiates (those that require grad), by name, and the first of them (its dtype and
    device are the kernel's); ValueError when there is none."""
    params = {k: v for k, v in module.named_parameters() if v.requires_grad}
    if not params:
        raise ValueError("the module has no trainable parameters")
    return params, next(iter(params.values()))


def _generic_ntk(
    module: torch.nn.Module,
    xa: torch.Tensor,
    xb: torch.Tensor | None,
    names: list[str],
    chunk_size: int | None,
    max_memory: int,
    n_out: int = 1,
    layout: str = "scalar",
) -> torch.Tensor:
    """The NTK restricted to the parameters `names`, from chunked per-sample Jacobians.

    With K outputs: "trace" gives Σ_k J_k J_kᵀ (the caller divides by K), "full" the (n·K)² kernel.
    """
    import torch

    all_params = {k: v.detach() for k, v in module.named_parameters()}
    diff = {k: all_params[k] for k in names}
    const = {k: v for k, v in all_params.items() if k not in diff}
    buffers = {k: v.detach() for k, v in module.named_buffers()}
    ref = next(iter(diff.values()))
    n_params = sum(p.numel() for p in diff.values())
    if chunk_size is None:
        # a chunk's Jacobian in the parameters' dtype plus its float64 copy, for both sides of a block
        per_sample = max(1, n_params) * n_out * (ref.element_size() + 8) * 2
        chunk_size = int(max(1, min(256, max_memory // per_sample)))
    jac = _jacobian_fn(module, names, n_out, layout)
    R = n_out if layout == "full" else 1  # kernel rows per sample

    def chunks(x: torch.Tensor) -> list[slice]:
        return [slice(i, min(i + chunk_size, x.shape[0])) for i in range(0, x.shape[0], chunk_size)]

    def as_features(js: list[torch.Tensor]) -> list[Any]:
        # Products in float64 so that summing many parameters loses nothing.
        return [("grad", g.to(torch.float64)) for g in js]

    symmetric = xb is None
    other = xa if symmetric else xb
    K = torch.zeros(xa.shape[0] * R, other.shape[0] * R, dtype=torch.float64, device=ref.device)
    slices_a, slices_b = chunks(xa), chunks(other)
    jac_elements = other.shape[0] * n_params * n_out
    cacheable = jac_elements <= _JAC_CACHE_ELEMENTS and jac_elements * ref.element_size() <= max_memory // 2
    cache: dict[int, list[torch.Tensor]] | None = {} if cacheable else None

    def jac_b(j: int) -> list[torch.Tensor]:
        if cache is not None and j in cache:
            return cache[j]
        value = jac(diff, const, buffers, other[slices_b[j]])
        if cache is not None:
            cache[j] = value
        return value

    def jac_a(i: int) -> list[Any]:
        ja = jac(diff, const, buffers, xa[slices_a[i]])
        if symmetric and cache is not None:
            cache[i] = ja
        return as_features(ja)

    _fill_gram(K, xa, xb, slices_a, slices_b, R, jac_a, lambda j: as_features(jac_b(j)), 0)
    return K


def _fill_gram(K: torch.Tensor, xa: torch.Tensor, xb: torch.Tensor | None, slices_a: list[slice], slices_b: list[slice],
               R: int, rows_a: Callable[[int], list[Any]], rows_b: Callable[[int], list[Any]], budget: int) -> None:
    """K's blocks, chunk pair by chunk pair, from each chunk's features (`rows_a(i)`, `rows_b(j)`), with progress; a
    symmetric Gram (`xb` None) on and below its diagonal only, mirrored, so it is exactly symmetric."""
    symmetric = xb is None
    other = xa if xb is None else xb
    stage, total, done = _stage(xa, other, len(slices_a), len(slices_b), symmetric)
    for i, sa in enumerate(slices_a):
        fa = rows_a(i)
        for j, sb in enumerate(slices_b):
            if symmetric and j > i:
                break
            ra, rb = _rows(sa, R), _rows(sb, R)
            if symmetric and j == i:
                block = _symmetric_block(fa, ra.stop - ra.start, budget, K.device)
            else:
                block = _block(fa, rows_b(j), ra.stop - ra.start, rb.stop - rb.start, budget, K.device)
            K[ra, rb] = block
            if symmetric and j < i:
                K[rb, ra] = block.T
            done += 1
            report(stage, done, total)
        del fa  # a chunk's features not cached for the columns are freed before the next chunk's are made


def _stage(xa: torch.Tensor, xb: torch.Tensor, n_a: int, n_b: int, symmetric: bool) -> tuple[str, int, int]:
    """(stage name, blocks in all, blocks done) of one NTK computation, for compbench.stage_progress."""
    total = n_a * (n_a + 1) // 2 if symmetric else n_a * n_b
    return f"eNTK {xa.shape[0]}×{xb.shape[0]}", total, 0


def _mirror_upper(block: torch.Tensor) -> torch.Tensor:
    """A diagonal block of a symmetric Gram from its upper triangle: exactly symmetric.

    A matrix product A·Aᵀ need not be bitwise symmetric (the two halves may be summed in other
    orders); the kernel of a sample pair must not depend on which comes first.
    """
    block.triu_()  # in place: a Gram of a few thousand rows is hundreds of MB, copied twice before
    return block.add_(block.triu(1).T)


def _rows(s: slice, r: int) -> slice:
    """The kernel rows of the samples in `s` when every sample has `r` rows (sample-major)."""
    return s if r == 1 else slice(s.start * r, s.stop * r)


# ------------------------------------------------------------------------------- structured engine


@dataclass
class _Layer:
    """A module whose own parameters the structured engine covers."""

    module: torch.nn.Module
    kind: str  # linear | conv2d | batchnorm | layernorm | groupnorm
    names: list[str]  # qualified names of the covered parameters
    use_weight: bool
    use_bias: bool
    mode: str = "grad"  # positions | grad (linear/conv2d); norms always grad
    bytes_per_sample: int = 0
    tap: Any = None  # a submodule whose input is this layer's output (a norm fused with its activation), or None


@dataclass
class _Calls:
    """What the forward hooks recorded for one layer over one chunk."""

    inputs: list[Any] = field(default_factory=list)  # per call: float64 factors derived from the input
    outputs: list[Any] = field(default_factory=list)  # per call: the (autograd-tracked) output


# Subclasses whose forward is known to compute exactly what the base class computes.
_EQUIVALENT_SUBCLASSES = {
    "timm.layers.norm.LayerNorm",  # F.layer_norm or an equal fused kernel
    "timm.layers.linear.Linear",  # F.linear (a dtype cast only when scripted): MobileNetV3's classifier
}


# Norms fused with an activation whose forward is the base class's, then `self.drop`, then `self.act` (submodules):
# the norm's own output, which its parameters' gradients need, is the input of `drop`.
_NORM_THEN_DROP = {"timm.layers.norm_act.BatchNormAct2d"}


def _qualname(m: torch.nn.Module) -> str:
    t = type(m)
    return f"{t.__module__}.{t.__qualname__}"


def _exact(m: torch.nn.Module, cls: type) -> bool:
    """`m` is a `cls` whose forward is the stock one (subclasses that change forward are not covered)."""
    if not isinstance(m, cls):
        return False
    return type(m).forward is cls.forward or _qualname(m) in _EQUIVALENT_SUBCLASSES


def _kind(m: torch.nn.Module) -> str | None:
    import torch.nn as nn

    if _exact(m, nn.Linear):
        return "linear"
    if _exact(m, nn.Conv2d):
        if m.padding_mode != "zeros":
            return None
        if isinstance(m.padding, str):
            if m.padding == "same" and any(d * (k - 1) % 2 for d, k in zip(m.dilation, m.kernel_size)):
                return None  # asymmetric 'same' padding: unfold cannot express it
        return "conv2d"
    if isinstance(m, nn.modules.batchnorm._BatchNorm) and (
        type(m).forward is nn.modules.batchnorm._BatchNorm.forward
        or (_qualname(m) in _NORM_THEN_DROP and isinstance(getattr(m, "drop", None), nn.Module))
    ):
        return "batchnorm"
    if _exact(m, nn.LayerNorm):
        return "layernorm"
    if _exact(m, nn.GroupNorm):
        return "groupnorm"
    return None


def _structured_layers(module: torch.nn.Module) -> tuple[list[_Layer], list[str]]:
    """Covered layers and the names of the trainable parameters left to the generic engine."""
    names = {id(p): n for n, p in module.named_parameters()}
    counts: dict[int, int] = {}
    for _, p in module.named_parameters(remove_duplicate=False):
        counts[id(p)] = counts.get(id(p), 0) + 1
    layers: list[_Layer] = []
    covered: set[int] = set()
    for m in module.modules():
        kind = _kind(m)
        if kind is None:
            continue
        own = dict(m.named_parameters(recurse=False))
        if set(own) - {"weight", "bias"}:
            continue
        w, b = own.get("weight"), own.get("bias")
        use_w = w is not None and w.requires_grad and counts[id(w)] == 1
        use_b = b is not None and b.requires_grad and counts[id(b)] == 1
        if not (use_w or use_b):
            continue
        if kind == "batchnorm" and (m.running_mean is None or m.running_var is None):
            raise _Unsupported("BatchNorm without running statistics couples samples even in eval mode")
        layer_names = []
        for p, use in ((w, use_w), (b, use_b)):
            if use:
                layer_names.append(names[id(p)])
                covered.add(id(p))
        layers.append(_Layer(m, kind, layer_names, use_w, use_b, tap=m.drop if _qualname(m) in _NORM_THEN_DROP else None))
    rest = [n for n, p in module.named_parameters() if p.requires_grad and id(p) not in covered]
    return layers, rest


def _conv_padding(m: torch.nn.Conv2d) -> tuple[int, int]:
    if isinstance(m.padding, str):
        if m.padding == "valid":
            return (0, 0)
        return tuple(d * (k - 1) // 2 for d, k in zip(m.dilation, m.kernel_size))  # type: ignore[return-value]
    return tuple(m.padding)  # type: ignore[return-value]


def _input_factor(layer: _Layer, x: torch.Tensor) -> torch.Tensor:
    """From a call's input: positions × features (linear/conv: a_t, with a 1 for the bias), or x̂ (norms)."""
    import torch
    import torch.nn.functional as F

    m = layer.module
    x = x.detach().to(torch.float64, copy=True)
    n = x.shape[0]
    if layer.kind in ("linear", "conv2d"):
        if layer.kind == "linear":
            a = x.reshape(n, -1, x.shape[-1])  # (n, T, d_in)
        else:
            if x.dim() != 4:
                raise _Unsupported("Conv2d on an unbatched input")
            cols = F.unfold(x, m.kernel_size, dilation=m.dilation, padding=_conv_padding(m), stride=m.stride)
            a = cols.transpose(1, 2)  # (n, L, C_in·kh·kw)
        parts = []
        if layer.use_weight:
            parts.append(a)
        if layer.use_bias:
            parts.append(torch.ones(a.shape[:-1] + (1,), dtype=a.dtype, device=a.device))
        return torch.cat(parts, dim=-1) if len(parts) > 1 else parts[0]
    if layer.kind == "batchnorm":
        shape = (1, -1) + (1,) * (x.dim() - 2)
        mean = m.running_mean.detach().to(torch.float64).reshape(shape)
        var = m.running_var.detach().to(torch.float64).reshape(shape)
        return (x - mean) / torch.sqrt(var + m.eps)
    if layer.kind == "layernorm":
        return F.layer_norm(x, m.normalized_shape, None, None, m.eps)
    return F.group_norm(x, m.num_groups, None, None, m.eps)


def _call_feature(layer: _Layer, a: torch.Tensor, g: torch.Tensor) -> Any:
    """One call's contribution: ('positions', A, G) or ('grad', J) with J (n, p)."""
    import torch

    m = layer.module
    n = g.shape[0]
    g = g.detach().to(torch.float64)
    if layer.kind == "linear":
        G = g.reshape(n, -1, g.shape[-1])
        return ("positions", a, G) if layer.mode == "positions" else ("grad", torch.einsum("ntd,nte->ned", a, G).reshape(n, -1))
    if layer.kind == "conv2d":
        G = g.reshape(n, g.shape[1], -1).transpose(1, 2)  # (n, L, C_out)
        if G.shape[1] != a.shape[1]:
            raise _Unsupported("conv output positions do not match the unfolded input")
        if layer.mode == "positions":
            return ("positions", a, G)
        groups = m.groups
        parts = []
        if layer.use_weight:
            d_in = a.shape[-1] - (1 if layer.use_bias else 0)
            A = a[..., :d_in].reshape(n, a.shape[1], groups, d_in // groups)
            Gg = G.reshape(n, G.shape[1], groups, G.shape[2] // groups)
            parts.append(torch.einsum("nlgi,nlgo->ngoi", A, Gg).reshape(n, -1))
        if layer.use_bias:
            parts.append(G.sum(1))
        return ("grad", torch.cat(parts, dim=1) if len(parts) > 1 else parts[0])
    # normalisation layers: x̂ = a
    if layer.kind == "layernorm":
        k = len(m.normalized_shape)
        dims = tuple(range(1, g.dim() - k))
    else:  # batchnorm, groupnorm: per channel (dim 1)
        dims = tuple(range(2, g.dim()))
    parts = []
    if layer.use_weight:
        parts.append((g * a).sum(dim=dims).reshape(n, -1) if dims else (g * a).reshape(n, -1))
    if layer.use_bias:
        parts.append(g.sum(dim=dims).reshape(n, -1) if dims else g.reshape(n, -1))
    return ("grad", torch.cat(parts, dim=1) if len(parts) > 1 else parts[0])


def _merge(feats: list[Any]) -> Any:
    """A layer's calls in one chunk combined: gradients add, positions concatenate."""
    import torch

    if len(feats) == 1:
        return feats[0]
    if feats[0][0] == "grad":
        return ("grad", sum(f[1] for f in feats[1:]) + feats[0][1])
    return ("positions", torch.cat([f[1] for f in feats], dim=1), torch.cat([f[2] for f in feats], dim=1))


class _OutputsFeature:
    """One call's features for the K outputs (same kind and shapes), gathered into one feature.

    "trace": the outputs' gradients side by side in one row per sample (J: (n, K·P); positions:
    G (n, T, K·d_out)), so that one Gram sums the K per-output Grams. "full": one row per sample
    and output, sample-major (J: (n·K, P); positions: A repeated per output, G (n·K, T, d_out)).
    Filled output by output into one buffer, so the K features are never held twice.
    """

    def __init__(self, first: Any, n_out: int, layout: str) -> None:
        import torch

        self.kind, self.layout, self.n_out = first[0], layout, n_out
        if self.kind == "grad":
            n, P = first[1].shape
            self.buf = torch.empty(n, n_out, P, dtype=first[1].dtype, device=first[1].device)
            self.A = None
        else:
            n, T, d_g = first[2].shape
            shape = (n, T, n_out, d_g) if layout == "trace" else (n, n_out, T, d_g)
            self.buf = torch.empty(shape, dtype=first[2].dtype, device=first[2].device)
            self.A = first[1]

    def fill(self, o: int, feat: Any) -> None:
        if self.kind == "grad":
            self.buf[:, o] = feat[1]
        elif self.layout == "trace":
            self.buf[:, :, o] = feat[2]
        else:
            self.buf[:, o] = feat[2]

    def feature(self) -> Any:
        b, K = self.buf, self.n_out
        if self.kind == "grad":
            return ("grad", b.reshape(b.shape[0], -1) if self.layout == "trace" else b.reshape(-1, b.shape[2]))
        if self.layout == "trace":
            return ("positions", self.A, b.reshape(b.shape[0], b.shape[1], -1))
        # A is repeated rather than shared: a T = 1 Gram then costs K² times the A·A' products,
        # no more than the G·G' products it is multiplied with.
        return ("positions", self.A.repeat_interleave(K, dim=0), b.reshape(-1, b.shape[2], b.shape[3]))


def _factors(module: torch.nn.Module, layers: list[_Layer], x: torch.Tensor, n_out: int = 1, layout: str = "scalar") -> list[Any]:
    """Per covered layer, its feature over the chunk x (None for a layer not used).

    With K outputs, one backward pass per output (over a retained graph) gives its per-sample
    output gradients; the K features of a call are then combined by `_outputs_feature`.
    """
    import torch

    n = x.shape[0]
    calls = [_Calls() for _ in layers]
    handles = []
    for layer, rec in zip(layers, calls):

        def hook(mod, inp, out, layer=layer, rec=rec):  # noqa: ANN001
            if not inp or not torch.is_tensor(inp[0]) or not torch.is_tensor(out) or inp[0].shape[0] != n or out.shape[0] != n:
                raise _Unsupported(f"a {type(mod).__name__} call is not batch-first")
            rec.inputs.append(_input_factor(layer, inp[0]))
            if layer.tap is not None:
                return None  # its output was taken at the tap, before the activation
            rec.outputs.append(out)
            return out.clone()  # later in-place ops (ReLU(inplace=True)) must not touch the recorded output

        def tap(mod, inp, rec=rec):  # noqa: ANN001
            if len(rec.outputs) != len(rec.inputs) or not inp or not torch.is_tensor(inp[0]) or inp[0].shape[0] != n:
                raise _Unsupported(f"the {type(mod).__name__} after a fused norm is called on its own")
            rec.outputs.append(inp[0])
            return (inp[0].clone(), *inp[1:])  # an in-place activation must not touch the recorded output

        handles.append(layer.module.register_forward_hook(hook))
        if layer.tap is not None:
            handles.append(layer.tap.register_forward_pre_hook(tap))
    try:
        with torch.enable_grad():
            f = module(x)
    finally:
        for h in handles:
            h.remove()
    if n_out == 1 and f.numel() != n:
        raise ValueError(f"empirical_ntk needs one scalar output per sample, got output shape {tuple(f.shape)} for {n} samples")
    if n_out > 1 and tuple(f.shape) != (n, n_out):
        raise ValueError(f"empirical_ntk expected outputs of shape ({n}, {n_out}) for {n} samples, got {tuple(f.shape)}")
    outs = [o for rec in calls for o in rec.outputs]

    def call_features(total: torch.Tensor, retain: bool) -> list[list[Any]]:
        """Per layer, per call: the feature of the gradient of `total` (Σ_i of one output)."""
        grads = list(torch.autograd.grad(total, outs, allow_unused=True, retain_graph=retain)) if outs else []
        per_layer = []
        k = 0
        for layer, rec in zip(layers, calls):
            feats = []
            for a, out in zip(rec.inputs, rec.outputs):
                g = grads[k]
                k += 1
                if g is None:
                    g = torch.zeros_like(out)
                feats.append(_call_feature(layer, a, g))
            per_layer.append(feats)
        return per_layer

    if n_out == 1:
        per_layer = call_features(f.sum(), False)
    else:
        gathered: list[list[_OutputsFeature]] = []
        for o in range(n_out):
            feats_o = call_features(f[:, o].sum(), o < n_out - 1)
            if o == 0:
                gathered = [[_OutputsFeature(feat, n_out, layout) for feat in feats] for feats in feats_o]
            for bufs, feats in zip(gathered, feats_o):
                for buf, feat in zip(bufs, feats):
                    buf.fill(o, feat)
            del feats_o
        per_layer = [[buf.feature() for buf in bufs] for bufs in gathered]
    return [_merge(feats) if feats else None for feats in per_layer]


def _plan(module: torch.nn.Module, layers: list[_Layer], x: torch.Tensor, n_out: int = 1, layout: str = "scalar") -> tuple[int, set[int]]:
    """Probe two samples: pick each layer's mode; bytes per sample of forward + factors, bad layers.

    With K outputs the factors are K times larger ("trace": G is K·d_out wide and J K·P long;
    "full": K rows per sample), and the mode is chosen for those sizes.

    A layer called on something that is not batch-first (e.g. windows folded into the batch) is
    "bad": its parameters go to the generic engine.
    """
    import torch

    probe = x[:2] if x.shape[0] >= 2 else torch.cat([x[:1], x[:1]])
    shapes: dict[int, list[tuple[int, int, int]]] = {i: [] for i in range(len(layers))}
    act = 0
    bad: set[int] = set()
    handles = []
    for i, layer in enumerate(layers):

        def hook(mod, inp, out, i=i, layer=layer):  # noqa: ANN001
            nonlocal act
            if not inp or not torch.is_tensor(inp[0]) or not torch.is_tensor(out) or inp[0].shape[0] != 2 or out.shape[0] != 2:
                bad.add(i)
                return
            try:
                a = _input_factor(layer, inp[0])
            except _Unsupported:
                bad.add(i)
                return
            t = a[0].numel() // a.shape[-1] if layer.kind in ("linear", "conv2d") else 1
            d_out = out[0].numel() // t if layer.kind in ("linear", "conv2d") else out[0].numel()
            shapes[i].append((t, a.shape[-1], d_out))
            act += (a[0].numel() * 8 + out[0].numel() * out.element_size() * 3)

        handles.append(layer.module.register_forward_hook(hook))
    try:
        with torch.no_grad():
            module(probe)
    finally:
        for h in handles:
            h.remove()
    total = act
    for i, layer in enumerate(layers):
        if not shapes[i] or i in bad:
            continue
        T = sum(s[0] for s in shapes[i])
        d_a, d_g = shapes[i][0][1], shapes[i][0][2]
        n_params = sum(p.numel() for p in layer.module.parameters(recurse=False) if p.requires_grad)
        wide = n_out if layout == "trace" else 1  # "trace" widens each row K-fold, "full" has K rows
        rows = n_out if layout == "full" else 1
        if layer.kind in ("linear", "conv2d"):
            grouped = layer.kind == "conv2d" and layer.module.groups > 1
            same_dims = all(s[1:] == (d_a, d_g) for s in shapes[i])
            if not grouped and same_dims and T * T * (d_a + wide * d_g) < wide * n_params:
                layer.mode = "positions"
                layer.bytes_per_sample = rows * T * (d_a + wide * d_g) * 8
            else:
                layer.mode = "grad"
                layer.bytes_per_sample = n_out * n_params * 8
        else:
            layer.bytes_per_sample = n_out * n_params * 8
        total += layer.bytes_per_sample
    return max(1, total), bad


def _pair_into(out: torch.Tensor, fa: Any, fb: Any, budget: int) -> None:
    """Add one layer's Gram block between two sets of rows to `out` (written in place, no block-sized temporary
    for a gradient feature)."""
    if fa[0] == "grad":
        out.addmm_(fa[1], fb[1].T)
        return
    _, Aa, Ga = fa
    _, Ab, Gb = fb
    na, T, da = Aa.shape
    nb, S, _ = Ab.shape
    if T == 1 and S == 1:
        out.addcmul_(Aa[:, 0] @ Ab[:, 0].T, Ga[:, 0] @ Gb[:, 0].T)
        return
    rows = max(1, budget // max(1, 2 * nb * T * S * 8))
    Ab2, Gb2 = Ab.reshape(nb * S, -1), Gb.reshape(nb * S, -1)
    for s in range(0, na, rows):
        e = min(na, s + rows)
        AA = (Aa[s:e].reshape((e - s) * T, -1) @ Ab2.T).reshape(e - s, T, nb, S)
        GG = (Ga[s:e].reshape((e - s) * T, -1) @ Gb2.T).reshape(e - s, T, nb, S)
        out[s:e] += (AA * GG).sum(dim=(1, 3))


def _feature_rows(f: Any, lo: int, hi: int) -> Any:
    """Rows lo..hi−1 of a feature (one row per kernel row, whichever its kind)."""
    return (f[0], *(t[lo:hi] for t in f[1:]))


def _block(fa: list[Any], fb: list[Any], rows: int, cols: int, budget: int, device: Any) -> torch.Tensor:
    """Σ over layers of the Gram block between two chunks' features (None: a layer not used)."""
    import torch

    out = torch.zeros(rows, cols, dtype=torch.float64, device=device)
    for la, lb in zip(fa, fb):
        if la is not None and lb is not None:
            _pair_into(out, la, lb, budget)
    return out


# A symmetric Gram's leaves: blocks of at most this many rows on its diagonal are computed whole (the rest of it by
# half products); below a few hundred rows a matrix product loses more to its shape than a triangle saves.
_HALF_LEAF = 256


def _symmetric_block(f: list[Any], rows: int, budget: int, device: Any) -> torch.Tensor:
    """Σ over layers of a chunk's Gram with itself, computed as a half product and mirrored: exactly symmetric.

    The rows are halved recursively: the two diagonal halves recurse, the block above the diagonal is one full
    product written in place, the block below it is never computed; at `_HALF_LEAF` rows or fewer a diagonal
    block is computed whole. The work is (1 + leaf/rows)/2 of the full product's, in products of large shapes.
    """
    import torch

    out = torch.zeros(rows, rows, dtype=torch.float64, device=device)
    live = [g for g in f if g is not None]

    def fill(lo: int, hi: int) -> None:
        if hi - lo <= _HALF_LEAF:
            for g in live:
                part = _feature_rows(g, lo, hi)
                _pair_into(out[lo:hi, lo:hi], part, part, budget)
            return
        mid = (lo + hi) // 2
        fill(lo, mid)
        for g in live:
            _pair_into(out[lo:mid, mid:hi], _feature_rows(g, lo, mid), _feature_rows(g, mid, hi), budget)
        fill(mid, hi)

    if rows:
        fill(0, rows)
    return _mirror_upper(out)


def _structured_ntk(
    module: torch.nn.Module,
    layers: list[_Layer],
    per_sample: int,
    xa: torch.Tensor,
    xb: torch.Tensor | None,
    max_memory: int,
    n_out: int = 1,
    layout: str = "scalar",
) -> torch.Tensor:
    import torch

    symmetric = xb is None
    other = xa if symmetric else xb
    R = n_out if layout == "full" else 1  # kernel rows per sample
    K = torch.zeros(xa.shape[0] * R, other.shape[0] * R, dtype=torch.float64, device=xa.device)
    factor_bytes = max(1, sum(layer.bytes_per_sample for layer in layers))
    cache_b = other.shape[0] * factor_bytes <= max_memory // 2
    chunk = int(max(1, (max_memory // (4 if cache_b else 3)) // per_sample))
    slices_a = [slice(i, min(i + chunk, xa.shape[0])) for i in range(0, xa.shape[0], chunk)]
    slices_b = [slice(i, min(i + chunk, other.shape[0])) for i in range(0, other.shape[0], chunk)]
    cache: dict[int, list[Any]] = {}
    pair_budget = max(1 << 20, max_memory // 4)

    def feats_b(j: int) -> list[Any]:
        if j in cache:
            return cache[j]
        value = _factors(module, layers, other[slices_b[j]], n_out, layout)
        if cache_b:
            cache[j] = value
        return value

    def feats_a(i: int) -> list[Any]:
        fa = _factors(module, layers, xa[slices_a[i]], n_out, layout)
        if symmetric and cache_b:
            cache[i] = fa
        return fa

    _fill_gram(K, xa, xb, slices_a, slices_b, R, feats_a, feats_b, pair_budget)
    return K


def structured_coverage(module: torch.nn.Module) -> dict[str, list[str]]:
    """Which trainable parameters the structured engine covers and which go to the generic one."""
    try:
        layers, rest = _structured_layers(module)
    except _Unsupported:
        return {"structured": [], "generic": [n for n, p in module.named_parameters() if p.requires_grad]}
    return {"structured": [n for layer in layers for n in layer.names], "generic": rest}


# ----------------------------------------------------------------------------------------- entry


def _output_width(module: torch.nn.Module, x: torch.Tensor | None) -> int:
    """K for a module with outputs (n, K); 1 for one scalar per sample (probed on ≤ 2 samples)."""
    import torch

    if x is None or x.shape[0] == 0:
        return 1  # nothing to probe on: the kernel has no rows either way
    probe = x[:2] if x.shape[0] >= 2 else torch.cat([x[:1], x[:1]])
    with torch.no_grad():
        out = module(probe)
    if not torch.is_tensor(out):
        raise ValueError(f"empirical_ntk needs a module returning a tensor, got {type(out).__name__}")
    if out.numel() == 2:
        return 1
    if out.dim() == 2 and out.shape[0] == 2:
        return int(out.shape[1])
    raise ValueError(
        f"empirical_ntk needs one scalar (n,) or a vector (n, K) of outputs per sample, got output shape "
        f"{tuple(out.shape)} for 2 samples"
    )


@one_thread
def empirical_ntk(
    module: torch.nn.Module,
    x_a: torch.Tensor,
    x_b: torch.Tensor | None = None,
    *,
    chunk_size: int | None = None,
    structured: bool = True,
    max_memory: int = DEFAULT_MAX_MEMORY,
    outputs: Literal["trace", "full"] = "trace",
) -> torch.Tensor:
    """K_ij = ⟨∂f(x_i)/∂θ, ∂f(x_j)/∂θ⟩ over trainable parameters, float64 (N_a × N_b).

    With `structured` (default) the parameters of Linear, Conv2d and normalisation layers take
    the structured path (no per-sample Jacobians; see the module docstring) and every other
    parameter the generic per-sample-Jacobian path; `structured=False` uses the generic path for
    everything. `max_memory` (bytes) bounds the factors/Jacobians held at once; `chunk_size` fixes
    the generic path's chunk instead. The module is put in eval mode and restored afterwards.

    A module with outputs (n, K): `outputs="trace"` gives the output-averaged kernel
    (1/K) Σ_k J_k J_kᵀ (N_a × N_b); `outputs="full"` every pair of outputs, (N_a·K × N_b·K),
    row i·K + k = sample i, output k. A module with one scalar per sample ignores `outputs`.

    K(x, x) (`x_b` None, or equal to `x_a`) is a symmetric Gram: only its blocks on one side of the
    diagonal are computed and the rest mirrored, so it is exactly symmetric.
    """
    import torch

    if chunk_size is not None and chunk_size < 1:
        raise ValueError(f"chunk_size must be ≥ 1, got {chunk_size}")
    if max_memory < 1:
        raise ValueError(f"max_memory must be ≥ 1 byte, got {max_memory}")
    if outputs not in ("trace", "full"):
        raise ValueError(f"outputs must be 'trace' or 'full', got {outputs!r}")
    params, ref = trainable_parameters(module)
    # Floating inputs follow the parameters' dtype (numpy gives float64); integer inputs such as
    # token ids are passed through untouched.
    xa = torch.as_tensor(x_a, device=ref.device)
    xb = None if x_b is None else torch.as_tensor(x_b, device=ref.device)
    if xa.is_floating_point():
        xa = xa.to(ref.dtype)
    if xb is not None and xb.is_floating_point():
        xb = xb.to(ref.dtype)
    if xb is not None and (xb is xa or (xb.shape == xa.shape and xb.dtype == xa.dtype and torch.equal(xb, xa))):
        xb = None  # K(x, x): a symmetric Gram, one triangle computed and mirrored

    with eval_mode(module):
        n_out = _output_width(module, xa if xa.shape[0] or xb is None else xb)
        layout = "scalar" if n_out == 1 else outputs
        K = _ntk(module, xa, xb, chunk_size, structured, max_memory, n_out, layout)
    if layout == "trace":
        K /= n_out  # both engines sum the K per-output Grams
    return K


def _output_of(module: torch.nn.Module, k: int) -> torch.nn.Module:
    """A module computing output column k of `module` (sharing its parameters)."""
    import torch

    class OutputOf(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.net = module

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)[:, k]

    return OutputOf()


def _generic_bytes(module: torch.nn.Module, names: list[str], n_out: int) -> int:
    """One sample's Jacobian bytes in the generic engine (as its chunk size counts them)."""
    params = dict(module.named_parameters())
    return sum(params[n].numel() * (params[n].element_size() + 8) * 2 for n in names) * n_out


def _ntk(
    module: torch.nn.Module,
    xa: torch.Tensor,
    xb: torch.Tensor | None,
    chunk_size: int | None,
    structured: bool,
    max_memory: int,
    n_out: int,
    layout: str,
) -> torch.Tensor:
    """The kernel from the structured engine where it applies and the generic one elsewhere.

    "trace" with K outputs holds K-fold factors per sample; when even one sample's would not fit
    `max_memory`, the K per-output kernels are computed one after the other instead (the same
    sum, K forward passes instead of one, the memory of a scalar output).
    """
    names = [n for n, p in module.named_parameters() if p.requires_grad]
    per_output = layout == "trace" and n_out > 1
    if structured:
        try:
            layers, rest = _structured_layers(module)
            if layers:
                per_sample, bad = _plan(module, layers, xa, n_out, layout)
                rest += [n for i in sorted(bad) for n in layers[i].names]
                layers = [layer for i, layer in enumerate(layers) if i not in bad]
            if layers:
                if per_output and (per_sample * 3 > max_memory or _generic_bytes(module, rest, n_out) > max_memory):
                    return _sum_of_outputs(module, xa, xb, chunk_size, structured, max_memory, n_out)
                K = _structured_ntk(module, layers, per_sample, xa, xb, max_memory, n_out, layout)
                if rest:
                    K += _generic_ntk(module, xa, xb, rest, chunk_size, max_memory, n_out, layout)
                return K
        except _Unsupported:
            pass  # fall through: everything by the generic path
    if per_output and _generic_bytes(module, names, n_out) > max_memory:
        return _sum_of_outputs(module, xa, xb, chunk_size, structured, max_memory, n_out)
    return _generic_ntk(module, xa, xb, names, chunk_size, max_memory, n_out, layout)


def _sum_of_outputs(
    module: torch.nn.Module, xa: torch.Tensor, xb: torch.Tensor | None, chunk_size: int | None, structured: bool, max_memory: int, n_out: int
) -> torch.Tensor:
    """Σ_k J_k J_kᵀ, one output at a time."""
    total = None
    for k in range(n_out):
        K = _ntk(_output_of(module, k), xa, xb, chunk_size, structured, max_memory, 1, "scalar")
        total = K if total is None else total.add_(K)
    return total
