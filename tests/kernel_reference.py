"""Reference implementations of the theory engine before the one-pass kernels and eigh solves (issue 25).

Kept verbatim (test-only) so tests can check that today's engine reproduces them: the two-pass
arc-cosine recursion (sin(arccos c), the diagonal through arccos) and the SVD least-squares solves
(numpy `lstsq` with rcond 1e-12 in the engine, scipy `gelsd` with its default cutoff in the
kernel adapter; `np.linalg.solve` for ridge).
"""

from __future__ import annotations

import numpy as np


def old_relu_moments(q_aa, q_bb, q_ab, diagonal=None):  # noqa: ANN001, ANN201 — signature of analytic._relu_moments
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
