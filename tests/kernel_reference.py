"""Reference implementations of the theory engine before the one-pass kernels and eigh solves (issue 25).

Kept verbatim (test-only) so tests can check that today's engine reproduces them: the two-pass
arc-cosine recursion (sin(arccos c), the diagonal through arccos) and the SVD least-squares solves
(numpy `lstsq` with rcond 1e-12 in the engine, scipy `gelsd` with its default cutoff in the
kernel adapter; `np.linalg.solve` for ridge).
"""

from __future__ import annotations

import numpy as np

from compbench.theory import analytic


def old_relu_moments(q_aa, q_bb, q_ab, same=None):  # noqa: ANN001, ANN201 — signature of analytic._relu_moments
    norm = np.sqrt(np.outer(q_aa, q_bb))
    live = norm > 0
    cos = np.clip(np.divide(q_ab, norm, out=np.zeros_like(q_ab), where=live), -1.0, 1.0)
    theta = np.arccos(cos)
    e = norm * (np.sin(theta) + (np.pi - theta) * cos) / (2 * np.pi)
    e_dot = np.where(live, (np.pi - theta) / (2 * np.pi), 0.0)
    return e, e_dot, q_aa / 2, q_bb / 2


def old_relu_recursion(x_a, x_b, depth, sigma_w2=2.0, sigma_b2=0.0):  # noqa: ANN001, ANN201
    """(NNGP, NTK) as two calls of the old relu_nngp / relu_ntk computed them (one call shown)."""
    a = np.asarray(x_a, dtype=np.float64)
    b = a if x_b is None else np.asarray(x_b, dtype=np.float64)
    d = a.shape[1]
    s_ab = sigma_w2 * (a @ b.T) / d + sigma_b2
    s_aa = sigma_w2 * np.einsum("ij,ij->i", a, a) / d + sigma_b2
    s_bb = sigma_w2 * np.einsum("ij,ij->i", b, b) / d + sigma_b2
    ntk = s_ab.copy()
    for _ in range(depth):
        e, e_dot, e_aa, e_bb = old_relu_moments(s_aa, s_bb, s_ab)
        s_ab = sigma_w2 * e + sigma_b2
        s_aa = sigma_w2 * e_aa + sigma_b2
        s_bb = sigma_w2 * e_bb + sigma_b2
        ntk = ntk * (sigma_w2 * e_dot) + s_ab
    return s_ab, ntk


def old_relu_nngp(x_a, x_b=None, depth=1, sigma_w2=2.0, sigma_b2=0.0):  # noqa: ANN001, ANN201
    return old_relu_recursion(x_a, x_b, depth, sigma_w2, sigma_b2)[0]


def old_relu_ntk(x_a, x_b=None, depth=1, sigma_w2=2.0, sigma_b2=0.0):  # noqa: ANN001, ANN201
    return old_relu_recursion(x_a, x_b, depth, sigma_w2, sigma_b2)[1]


def old_engine_solve(K_train, K_cross, y_train, ridge=0.0, rcond=1e-12):  # noqa: ANN001, ANN201
    """The engine's kernel_regression before: lstsq (gelsd, rcond 1e-12) or LU for ridge."""
    Kt = np.asarray(K_train, dtype=np.float64)
    y = np.asarray(y_train, dtype=np.float64)
    if ridge == 0:
        alpha = np.linalg.lstsq(Kt, y, rcond=rcond)[0]
    else:
        alpha = np.linalg.solve(Kt + ridge * np.eye(Kt.shape[0]), y)
    return np.asarray(K_cross, dtype=np.float64) @ alpha


def old_adapter_solve(K_train, K_cross, y_train, ridge=0.0):  # noqa: ANN001, ANN201
    """The kernel adapter's own fit before: scipy gelsd on K + ridge·I (scipy's default cutoff)."""
    import scipy.linalg

    alpha, *_ = scipy.linalg.lstsq(K_train + ridge * np.eye(len(K_train)), y_train, lapack_driver="gelsd")
    return K_cross @ alpha


def old_standard_mlp_ntk(
    x_a: np.ndarray,
    x_b: np.ndarray | None = None,
    *,
    width: int,
    depth: int = 1,
    init_scale: float = 1.0,
    bias: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """analytic.standard_mlp_ntk before row blocks and the triangle (backward accumulation, one pass over the full Gram)."""
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
    a, b = analytic._inputs(x_a, x_b)
    symmetric = analytic._same_inputs(a, b, x_b)
    d = a.shape[1]
    s2 = float(init_scale) ** 2
    H = float(width)
    inp_ab = a @ a.T if symmetric else a @ b.T
    inp_aa = np.einsum("ij,ij->i", a, a)
    inp_bb = inp_aa if symmetric else np.einsum("ij,ij->i", b, b)
    if symmetric:  # the exact diagonal (θ = 0 in every layer), as in relu_kernels
        np.fill_diagonal(inp_ab, inp_aa)
    bias_in = s2 / (3 * d) if bias else 0.0
    q_ab = 2 * s2 / d * inp_ab + bias_in
    q_aa = 2 * s2 / d * inp_aa + bias_in
    q_bb = 2 * s2 / d * inp_bb + bias_in
    bias_hidden = s2 / (3 * H) if bias else 0.0
    inputs = [inp_ab]  # a^{l-1}·a'^{l-1} for l = 1..L+1
    e_dots = []  # Ė_l for l = 1..L
    for _ in range(depth):
        e, e_dot, e_aa, e_bb = analytic._relu_moments(q_aa, q_bb, q_ab, (np.arange(len(q_aa)),) * 2 if symmetric else None)
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


def old_additivity_hat(cells, train_mask, rcond=1e-10):  # noqa: ANN001, ANN201 — AdditivityFit before the Gram route
    """(held-out hat matrix, pinv) as AdditivityFit computed them with numpy's SVD pseudo-inverse."""
    from compbench.theory.additivity import conjunction_features

    mask = np.asarray(train_mask, dtype=bool)
    features, _ = conjunction_features(cells, mask)
    x = features[:, 1:]
    xc = x - x.mean(axis=0)
    pinv = np.linalg.pinv(xc, rcond=rcond)
    return xc[~mask] @ pinv + 1.0 / len(mask), pinv
