"""Infinite-width kernels (NNGP, NTK) of fully connected ReLU networks (arc-cosine recursions)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import ParamSpec

import numpy as np

from compbench.thread_scope import one_thread

_P = ParamSpec("_P")

__all__ = ["relu_kernels", "relu_nngp", "relu_ntk", "standard_mlp_ntk"]


def _inputs(x_a: np.ndarray, x_b: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(x_a, dtype=np.float64)
    b = a if x_b is None else np.asarray(x_b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"inputs must be (n, d) arrays with the same d, got {a.shape} and {b.shape}")
    return a, b


def _same_inputs(a: np.ndarray, b: np.ndarray, x_b: object) -> bool:
    """Whether K(a, b) is a symmetric Gram: no second input, or one equal to the first."""
    return x_b is None or b is a or (a.shape == b.shape and np.array_equal(a, b))


def _input_ids(a: np.ndarray, b: np.ndarray, symmetric: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """Ids of the distinct inputs of a and b (equal bit for bit, equal id), or None when no two inputs
    off a symmetric Gram's diagonal are equal: the pairs an input makes with itself (θ = 0)."""
    both = a if symmetric else np.concatenate([a, b])
    if both.shape[1] == 0:
        ids = np.zeros(len(both), dtype=np.int64)
    else:
        rows = np.ascontiguousarray(both).view(np.dtype((np.void, both.dtype.itemsize * both.shape[1]))).ravel()
        ids = np.unique(rows, return_inverse=True)[1].reshape(-1)
    if symmetric:  # the inverse numbers the distinct rows 0..k−1: a duplicate leaves k below the row count
        return (ids, ids) if len(ids) and ids.max() + 1 < len(ids) else None
    id_a, id_b = ids[: len(a)], ids[len(a) :]
    return (id_a, id_b) if np.intersect1d(id_a, id_b).size else None


def _relu_moments(
    q_aa: np.ndarray,
    q_bb: np.ndarray,
    q_ab: np.ndarray,
    same: tuple[np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """E[relu(u)relu(v)] and E[relu'(u)relu'(v)] for centred Gaussians; also the diagonals.

    The entries that pair an input with itself have θ = 0, and their moments are set to the
    closed form, E = q/2 and Ė = 1/2 (0 for a zero-variance input), instead of going through
    arccos(1 − a few ulp) ≈ 1e-8: so K(x, x) is the same number in a symmetric Gram and in a cross
    kernel whose inputs include x. `same`: those entries, as (rows, columns).
    """
    norm = np.sqrt(np.outer(q_aa, q_bb))
    # A zero-variance pre-activation is identically 0: relu' = 0 there, as in torch.
    live = norm > 0
    cos = np.divide(q_ab, norm, out=np.zeros_like(q_ab), where=live)
    np.clip(cos, -1.0, 1.0, out=cos)
    theta = np.arccos(cos)
    # sin θ = √((1 − c)(1 + c)): one square root instead of a sine (equal to a few ulp, no
    # cancellation at c ≈ ±1 since 1 ∓ c is exact there).
    sin = np.sqrt((1.0 - cos) * (1.0 + cos))
    np.subtract(np.pi, theta, out=theta)  # θ → π − θ
    e = theta * cos
    e += sin
    e *= norm
    e /= 2 * np.pi
    theta /= 2 * np.pi
    e_dot = np.where(live, theta, 0.0)
    if same is not None:
        rows, cols = same
        e[rows, cols] = q_aa[rows] / 2
        e_dot[rows, cols] = np.where(q_aa[rows] > 0, 0.5, 0.0)
    # each input with itself (the next layer's variances): θ = 0, E = q/2 exactly
    return e, e_dot, q_aa / 2, q_bb / 2


# Rows of the Gram processed at once: the recursion's temporaries of one block stay in cache.
_BLOCK_ELEMENTS = 1 << 16
# A block's kernels from its dot products, |x|² of its rows and columns, self pairs and input width (_blocked_pair).
_Block = Callable[[np.ndarray, np.ndarray, np.ndarray, "tuple[np.ndarray, np.ndarray] | None", int], tuple[np.ndarray, np.ndarray]]


def _self_pairs(
    symmetric: bool, ids: tuple[np.ndarray, np.ndarray] | None, r0: int, r1: int, c0: int
) -> tuple[np.ndarray, np.ndarray] | None:
    """The (rows, columns) of the block rows r0:r1, columns c0: that pair an input with itself (None: none)."""
    if ids is not None:
        return np.nonzero(ids[0][r0:r1, None] == ids[1][None, c0:])
    if symmetric:  # distinct inputs: the block's diagonal (its columns start at its first row)
        rows = np.arange(r1 - r0)
        return rows, rows
    return None


def _from_norms(q_ab: np.ndarray, q_aa: np.ndarray, same: tuple[np.ndarray, np.ndarray] | None) -> None:
    """An input's pair with itself takes its first-layer variance from the norm, as the recursion keeps it
    (the Gram's dot product may differ from the norm in the last bits)."""
    if same is not None:
        rows, cols = same
        q_ab[rows, cols] = q_aa[rows]


def _blocked_pair(x_a: np.ndarray, x_b: np.ndarray | None, block: _Block) -> tuple[np.ndarray, np.ndarray]:
    """Two kernels of the inputs, row block by row block (the recursions' temporaries of one block stay in cache).

    `block(dot, sq_a, sq_b, same, d)` gets a block's dot products x·x' (an input's pair with itself taken from its
    norm, as the recursions keep it), its rows' and its columns' |x|², the entries that pair an input with itself
    (`_self_pairs`) and the input width, and gives the block of each kernel. A symmetric Gram (`x_b` None or equal
    to `x_a`) is computed on its upper triangle and mirrored, so it is exactly symmetric.
    """
    a, b = _inputs(x_a, x_b)
    symmetric = _same_inputs(a, b, x_b)
    if symmetric:
        b = a
    na, nb = a.shape[0], b.shape[0]
    gram = a @ a.T if symmetric else a @ b.T  # a @ a.T: one BLAS syrk, exactly symmetric
    sq_a = np.einsum("ij,ij->i", a, a)
    sq_b = sq_a if symmetric else np.einsum("ij,ij->i", b, b)
    first, second = np.empty((na, nb)), np.empty((na, nb))
    ids = _input_ids(a, b, symmetric)
    step = max(1, _BLOCK_ELEMENTS // max(1, nb))
    for r0 in range(0, na, step):
        r1 = min(na, r0 + step)
        c0 = r0 if symmetric else 0  # a symmetric Gram: the block's columns from its diagonal on
        dot = gram[r0:r1, c0:].copy()
        same = _self_pairs(symmetric, ids, r0, r1, c0)
        _from_norms(dot, sq_a[r0:r1], same)
        k1, k2 = block(dot, sq_a[r0:r1], sq_b[c0:], same, a.shape[1])
        first[r0:r1, c0:] = k1
        second[r0:r1, c0:] = k2
        if symmetric and r1 < nb:
            first[r1:, r0:r1] = k1[:, r1 - c0 :].T
            second[r1:, r0:r1] = k2[:, r1 - c0 :].T
    return first, second


@one_thread
def relu_kernels(
    x_a: np.ndarray,
    x_b: np.ndarray | None = None,
    depth: int = 1,
    sigma_w2: float = 2.0,
    sigma_b2: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """(NNGP Σ^depth, NTK Θ^depth) of an NTK-parameterised ReLU MLP with `depth` hidden layers, in one pass.

    One arc-cosine recursion gives both kernels. A symmetric Gram (`x_b` None or equal to `x_a`)
    is computed on its upper triangle and mirrored, so it is exactly symmetric, and its diagonal
    is the closed form: Σ(x, x) and Θ(x, x) follow from the scalar recursion on |x|² (θ = 0).
    """
    if depth < 0:
        raise ValueError(f"depth (number of hidden layers) must be ≥ 0, got {depth}")

    def block(dot: np.ndarray, sq_a: np.ndarray, sq_b: np.ndarray, same: tuple[np.ndarray, np.ndarray] | None,
              d: int) -> tuple[np.ndarray, np.ndarray]:
        s_ab = sigma_w2 * dot / d + sigma_b2
        s_aa = sigma_w2 * sq_a / d + sigma_b2
        s_bb = sigma_w2 * sq_b / d + sigma_b2
        k = s_ab.copy()
        for _ in range(depth):
            e, e_dot, e_aa, e_bb = _relu_moments(s_aa, s_bb, s_ab, same)
            e *= sigma_w2
            e += sigma_b2
            s_ab = e
            s_aa = sigma_w2 * e_aa + sigma_b2
            s_bb = sigma_w2 * e_bb + sigma_b2
            e_dot *= sigma_w2
            k *= e_dot
            k += s_ab
        return s_ab, k

    return _blocked_pair(x_a, x_b, block)


def _one_of(kernels: Callable[_P, tuple[np.ndarray, np.ndarray]], index: int, name: str, doc: str) -> Callable[_P, np.ndarray]:
    """The kernel at `index` of what `kernels` returns, as a function with `kernels`' signature."""

    def one(*args: _P.args, **kwargs: _P.kwargs) -> np.ndarray:
        return kernels(*args, **kwargs)[index]

    one.__name__ = one.__qualname__ = name
    one.__doc__ = doc
    # help() and inspect show the parameters, not *args (one is no wrapper of `kernels`: it returns one of its kernels)
    one.__signature__ = inspect.signature(kernels).replace(return_annotation="np.ndarray")  # type: ignore[attr-defined]
    return one


# Both halves of one recursion: a caller wanting one kernel gets relu_kernels' signature and its arithmetic.
relu_nngp = _one_of(relu_kernels, 0, "relu_nngp",
                    "NNGP kernel Σ^depth of an NTK-parameterised ReLU MLP with `depth` hidden layers (see relu_kernels).")
relu_ntk = _one_of(relu_kernels, 1, "relu_ntk",
                   "NTK Θ^depth of an NTK-parameterised ReLU MLP with `depth` hidden layers (see relu_kernels).")


@one_thread
def standard_mlp_ntk(
    x_a: np.ndarray,
    x_b: np.ndarray | None = None,
    *,
    width: int,
    depth: int = 1,
    init_scale: float = 1.0,
    bias: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(NTK, NNGP) at large width of the standard-parameterised ReLU MLP of the `mlp` adapter."""
    # Init: W ~ N(0, 2σ²/fan_in), b ~ U(±σ/√fan_in) (variance σ²/(3 fan_in)) in every layer.
    # Standard parameterisation keeps the width H explicit: Θ grows ∝ H. Under the
    # gradient-independence assumption Σ_i δ^l_i δ'^l_i = P^l with P^{L+1} = 1 and
    # P^l = H·Ė_l·(2σ²/H)·P^{l+1}; the layer-l weights contribute P^l·(a^{l-1}·a'^{l-1}) and its
    # biases P^l, with a^0·a'^0 = x·x' and a^l·a'^l = H·E_l. The uniform biases are treated as
    # Gaussian of the same variance (exact in the limit for the hidden sums; a small bias in layer 1).
    if width < 1:
        raise ValueError(f"width must be ≥ 1, got {width}")
    if depth < 0:
        raise ValueError(f"depth (number of hidden layers) must be ≥ 0, got {depth}")
    s2 = float(init_scale) ** 2
    H = float(width)
    bias_hidden = s2 / (3 * H) if bias else 0.0
    b_term = 1.0 if bias else 0.0

    # The NTK accumulates forward: T₁ = a⁰·a'⁰ + b, T_{l+1} = (a^l·a'^l + b) + 2σ²·Ė_l·T_l, which is
    # Σ_l P^l (a^{l-1}·a'^{l-1} + b) with P^{L+1} = 1, P^l = 2σ²·Ė_l·P^{l+1}.
    def block(inp_ab: np.ndarray, inp_aa: np.ndarray, inp_bb: np.ndarray, same: tuple[np.ndarray, np.ndarray] | None,
              d: int) -> tuple[np.ndarray, np.ndarray]:
        bias_in = s2 / (3 * d) if bias else 0.0
        q_ab = 2 * s2 / d * inp_ab + bias_in
        q_aa = 2 * s2 / d * inp_aa + bias_in
        q_bb = 2 * s2 / d * inp_bb + bias_in
        t = inp_ab
        t += b_term
        for _ in range(depth):
            e, e_dot, e_aa, e_bb = _relu_moments(q_aa, q_bb, q_ab, same)
            e_dot *= 2 * s2
            t *= e_dot
            t += H * e + b_term
            q_ab = 2 * s2 * e + bias_hidden
            q_aa = 2 * s2 * e_aa + bias_hidden
            q_bb = 2 * s2 * e_bb + bias_hidden
        return t, q_ab

    return _blocked_pair(x_a, x_b, block)
