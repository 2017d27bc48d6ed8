"""Infinite-width kernels (NNGP, NTK) of fully connected ReLU networks (arc-cosine recursions)."""

from __future__ import annotations

import numpy as np

__all__ = ["relu_nngp", "relu_ntk", "standard_mlp_ntk"]


def _inputs(x_a: np.ndarray, x_b: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(x_a, dtype=np.float64)
    b = a if x_b is None else np.asarray(x_b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[1]:
        raise ValueError(f"inputs must be (n, d) arrays with the same d, got {a.shape} and {b.shape}")
    return a, b


def _relu_moments(
    q_aa: np.ndarray, q_bb: np.ndarray, q_ab: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """E[relu(u)relu(v)] and E[relu'(u)relu'(v)] for centred Gaussians; also the diagonals."""
    norm = np.sqrt(np.outer(q_aa, q_bb))
    # A zero-variance pre-activation is identically 0: relu' = 0 there, as in torch.
    live = norm > 0
    cos = np.clip(np.divide(q_ab, norm, out=np.zeros_like(q_ab), where=live), -1.0, 1.0)
    theta = np.arccos(cos)
    e = norm * (np.sin(theta) + (np.pi - theta) * cos) / (2 * np.pi)
    e_dot = np.where(live, (np.pi - theta) / (2 * np.pi), 0.0)
    # x = x': θ = 0 gives E = q/2 exactly (avoids arccos round-off on the diagonal).
    return e, e_dot, q_aa / 2, q_bb / 2


def _relu_recursion(
    x_a: np.ndarray, x_b: np.ndarray | None, depth: int, sigma_w2: float, sigma_b2: float
) -> tuple[np.ndarray, np.ndarray]:
    if depth < 0:
        raise ValueError(f"depth (number of hidden layers) must be ≥ 0, got {depth}")
    a, b = _inputs(x_a, x_b)
    d = a.shape[1]
    s_ab = sigma_w2 * (a @ b.T) / d + sigma_b2
    s_aa = sigma_w2 * np.einsum("ij,ij->i", a, a) / d + sigma_b2
    s_bb = sigma_w2 * np.einsum("ij,ij->i", b, b) / d + sigma_b2
    ntk = s_ab.copy()
    for _ in range(depth):
        e, e_dot, e_aa, e_bb = _relu_moments(s_aa, s_bb, s_ab)
        s_ab = sigma_w2 * e + sigma_b2
        s_aa = sigma_w2 * e_aa + sigma_b2
        s_bb = sigma_w2 * e_bb + sigma_b2
        ntk = ntk * (sigma_w2 * e_dot) + s_ab
    return s_ab, ntk


def relu_nngp(
    x_a: np.ndarray,
    x_b: np.ndarray | None = None,
    depth: int = 1,
    sigma_w2: float = 2.0,
    sigma_b2: float = 0.0,
) -> np.ndarray:
    """NNGP kernel Σ^depth of an NTK-parameterised ReLU MLP with `depth` hidden layers."""
    return _relu_recursion(x_a, x_b, depth, sigma_w2, sigma_b2)[0]


def relu_ntk(
    x_a: np.ndarray,
    x_b: np.ndarray | None = None,
    depth: int = 1,
    sigma_w2: float = 2.0,
    sigma_b2: float = 0.0,
) -> np.ndarray:
    """NTK Θ^depth of an NTK-parameterised ReLU MLP with `depth` hidden layers."""
    return _relu_recursion(x_a, x_b, depth, sigma_w2, sigma_b2)[1]


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
    a, b = _inputs(x_a, x_b)
    d = a.shape[1]
    s2 = float(init_scale) ** 2
    H = float(width)
    inp_ab = a @ b.T
    inp_aa = np.einsum("ij,ij->i", a, a)
    inp_bb = np.einsum("ij,ij->i", b, b)
    bias_in = s2 / (3 * d) if bias else 0.0
    q_ab = 2 * s2 / d * inp_ab + bias_in
    q_aa = 2 * s2 / d * inp_aa + bias_in
    q_bb = 2 * s2 / d * inp_bb + bias_in
    bias_hidden = s2 / (3 * H) if bias else 0.0
    inputs = [inp_ab]  # a^{l-1}·a'^{l-1} for l = 1..L+1
    e_dots = []  # Ė_l for l = 1..L
    for _ in range(depth):
        e, e_dot, e_aa, e_bb = _relu_moments(q_aa, q_bb, q_ab)
        inputs.append(H * e)
        e_dots.append(e_dot)
        q_ab = 2 * s2 * e + bias_hidden
        q_aa = 2 * s2 * e_aa + bias_hidden
        q_bb = 2 * s2 * e_bb + bias_hidden
    b_term = 1.0 if bias else 0.0
    p = np.ones_like(inp_ab)
    ntk = p * (inputs[depth] + b_term)
    for layer in range(depth, 0, -1):
        p = 2 * s2 * e_dots[layer - 1] * p
        ntk = ntk + p * (inputs[layer - 1] + b_term)
    return ntk, q_ab
