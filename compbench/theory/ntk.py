"""Empirical neural tangent kernel of a torch module at its current parameters."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # torch is imported lazily so that `import compbench.theory` stays light
    import torch

__all__ = ["empirical_ntk"]

# Cache per-sample Jacobians of the second argument when they fit in this many elements;
# otherwise they are recomputed for every chunk of the first argument.
_JAC_CACHE_ELEMENTS = 1 << 26


def _jacobian_fn(module: torch.nn.Module, names: list[str]):
    """A function (params, x_chunk) -> per-sample flattened gradients, one (n, P_k) per parameter."""
    from torch.func import functional_call, jacrev, vmap

    def f_single(params: dict[str, Any], buffers: dict[str, Any], x: torch.Tensor) -> torch.Tensor:
        out = functional_call(module, (params, buffers), (x.unsqueeze(0),))
        if out.numel() != 1:
            raise ValueError(
                f"empirical_ntk needs one scalar output per sample, got output shape {tuple(out.shape)} "
                "for a batch of 1"
            )
        return out.reshape(())

    per_sample = vmap(jacrev(f_single), in_dims=(None, None, 0))

    def jac(params, buffers, x):
        grads = per_sample(params, buffers, x)
        return [grads[name].reshape(x.shape[0], -1) for name in names]

    return jac


def empirical_ntk(
    module: torch.nn.Module,
    x_a: torch.Tensor,
    x_b: torch.Tensor | None = None,
    *,
    chunk_size: int = 256,
    structured: bool = True,
) -> torch.Tensor:
    """K_ij = ⟨∂f(x_i)/∂θ, ∂f(x_j)/∂θ⟩ over trainable parameters, float64 (N_a × N_b).

    Networks whose parameters all sit in nn.Linear layers take the structured path of
    `ntk_linear` (Gram of layer inputs ⊙ Gram of output gradients, exact); others, or
    structured=False, take the generic per-sample-Jacobian path.
    """
    import torch

    if chunk_size < 1:
        raise ValueError(f"chunk_size must be ≥ 1, got {chunk_size}")
    if structured:
        from compbench.theory.ntk_linear import NotLinearOnlyError, is_linear_only, linear_ntk

        if is_linear_only(module):
            ref_dtype = next(module.parameters()).dtype
            xa_t = torch.as_tensor(x_a, dtype=ref_dtype) if not torch.is_tensor(x_a) else x_a.to(ref_dtype)
            xb_t = None if x_b is None else (torch.as_tensor(x_b, dtype=ref_dtype) if not torch.is_tensor(x_b) else x_b.to(ref_dtype))
            try:
                return linear_ntk(module, xa_t, xb_t)
            except NotLinearOnlyError:
                pass  # e.g. Linear layers applied per token: the generic path handles them
    params = {k: v.detach() for k, v in module.named_parameters() if v.requires_grad}
    if not params:
        raise ValueError("the module has no trainable parameters")
    buffers = {k: v.detach() for k, v in module.named_buffers()}
    names = list(params)
    ref = next(iter(params.values()))
    xa = torch.as_tensor(x_a, device=ref.device)
    xb = None if x_b is None else torch.as_tensor(x_b, device=ref.device)
    # Floating inputs follow the parameters' dtype (numpy gives float64); integer inputs such as
    # token ids are passed through untouched.
    if xa.is_floating_point():
        xa = xa.to(ref.dtype)
    if xb is not None and xb.is_floating_point():
        xb = xb.to(ref.dtype)

    # Eval mode: BatchNorm/dropout in train mode would couple samples or add noise.
    modes = [(m, m.training) for m in module.modules()]
    module.eval()
    try:
        jac = _jacobian_fn(module, names)
        n_params = sum(p.numel() for p in params.values())

        def chunks(x: torch.Tensor) -> list[slice]:
            return [slice(i, min(i + chunk_size, x.shape[0])) for i in range(0, x.shape[0], chunk_size)]

        def gram(ja: list[torch.Tensor], jb: list[torch.Tensor]) -> torch.Tensor:
            # Products in float64 so that summing many parameters loses nothing.
            out = None
            for ga, gb in zip(ja, jb):
                term = ga.to(torch.float64) @ gb.to(torch.float64).T
                out = term if out is None else out + term
            return out

        symmetric = xb is None
        other = xa if symmetric else xb
        K = torch.zeros(xa.shape[0], other.shape[0], dtype=torch.float64, device=ref.device)
        slices_a, slices_b = chunks(xa), chunks(other)
        cache: dict[int, list[torch.Tensor]] | None = (
            {} if other.shape[0] * n_params <= _JAC_CACHE_ELEMENTS else None
        )

        def jac_b(j: int) -> list[torch.Tensor]:
            if cache is not None and j in cache:
                return cache[j]
            value = jac(params, buffers, other[slices_b[j]])
            if cache is not None:
                cache[j] = value
            return value

        for i, sa in enumerate(slices_a):
            ja = jac(params, buffers, xa[sa])
            if symmetric and cache is not None:
                cache[i] = ja
            for j, sb in enumerate(slices_b):
                if symmetric and j > i:
                    break
                jb = ja if (symmetric and j == i) else jac_b(j)
                block = gram(ja, jb)
                K[sa, sb] = block
                if symmetric and j < i:
                    K[sb, sa] = block.T
        return K
    finally:
        for m, mode in modes:
            m.train(mode)
