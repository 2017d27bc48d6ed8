"""Exact empirical NTK of networks whose parameters all live in `nn.Linear` layers, without Jacobians.

For a Linear layer with per-sample input a_i and output gradient g_i = ∂f_i/∂(W a_i + b), the
per-sample weight gradient is g_i a_iᵀ, so its contribution to the NTK is
(a_i·a_j + 1[bias]) · (g_i·g_j): one forward and one backward pass give every a_i and g_i (samples
do not interact in eval mode, so ∂Σf/∂out_i = ∂f_i/∂out_i), and the Gram is a sum of Hadamard
products of small Gram matrices. No per-sample gradient is ever materialised.
"""

from __future__ import annotations

import torch


class NotLinearOnlyError(ValueError):
    """The module has parameters outside nn.Linear layers (use the generic empirical NTK)."""


def is_linear_only(module: torch.nn.Module) -> bool:
    """Whether every trainable parameter belongs to an nn.Linear layer."""
    linear = {id(p) for m in module.modules() if isinstance(m, torch.nn.Linear) for p in m.parameters(recurse=False)}
    return all(id(p) in linear for p in module.parameters() if p.requires_grad)


def _factors(module: torch.nn.Module, x: torch.Tensor, chunk: int) -> list[tuple[torch.Tensor, torch.Tensor, bool]]:
    layers = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    acts: dict[int, list[torch.Tensor]] = {i: [] for i in range(len(layers))}
    grads: dict[int, list[torch.Tensor]] = {i: [] for i in range(len(layers))}
    for start in range(0, len(x), chunk):
        xb = x[start : start + chunk]
        outs: list[torch.Tensor] = [None] * len(layers)  # type: ignore[list-item]
        handles = []
        for i, layer in enumerate(layers):
            def hook(mod, inp, out, i=i):  # noqa: ANN001
                if inp[0].dim() != 2:
                    raise NotLinearOnlyError("a Linear layer sees more than one vector per sample (e.g. tokens)")
                acts[i].append(inp[0].detach().double())
                outs[i] = out
            handles.append(layer.register_forward_hook(hook))
        try:
            f = module(xb).reshape(-1)
        finally:
            for h in handles:
                h.remove()
        if f.numel() != len(xb):
            raise ValueError(f"empirical_ntk needs one scalar output per sample, got output shape {tuple(module(xb).shape)}")
        used = [o for o in outs if o is not None]
        if len(used) != len(layers):
            raise NotLinearOnlyError("a Linear layer was not used exactly once in the forward pass")
        for i, g in enumerate(torch.autograd.grad(f.sum(), used)):
            grads[i].append(g.detach().double())
    return [(torch.cat(acts[i]), torch.cat(grads[i]), layers[i].bias is not None) for i in range(len(layers))]


def linear_ntk(module: torch.nn.Module, x_a: torch.Tensor, x_b: torch.Tensor | None = None, *, chunk: int = 1024) -> torch.Tensor:
    """Empirical NTK (N_a × N_b, float64) of a Linear-only network at its current parameters."""
    if not is_linear_only(module):
        raise NotLinearOnlyError("the module has parameters outside nn.Linear layers")
    was_training = module.training
    module.eval()
    try:
        fa = _factors(module, x_a, chunk)
        fb = fa if x_b is None else _factors(module, x_b, chunk)
    finally:
        module.train(was_training)
    K = torch.zeros(len(fa[0][0]), len(fb[0][0]), dtype=torch.float64, device=fa[0][0].device)
    for (a_a, g_a, bias), (a_b, g_b, _) in zip(fa, fb):
        inner = a_a @ a_b.T
        if bias:
            inner += 1.0
        K += inner * (g_a @ g_b.T)
    return K
