"""The linearised network after the steps it actually trained: finite-time lazy theory.

A lazy network trained by full-batch gradient descent on the MSE stays close to its linearisation
f(x; θ) ≈ f₀(x) + J(x)(θ − θ₀). Kernel regression, f₀ + K K⁻¹(y − f₀), is where that linear model
ends after infinitely many steps; a network stopped early (an ill-conditioned NTK converges slowly
along its small eigenvalues) is instead at the same linear model after its own T steps, which this
module computes exactly.

With the loss (1/n) Σ_i ‖f(x_i) − y_i‖² and torch's SGD with momentum μ (buffer b ← μ b + g, step
θ ← θ − η b), the parameter velocity stays in the row space of J: b_t = Jᵀ a_t, and with the
training residual e_t = f_t(X) − y,

    a_{t+1} = μ a_t + (2/n) e_t,     e_{t+1} = e_t − η K a_{t+1},     f_T(x) = f₀(x) − η K(x, X) Σ_{s=1..T} a_s.

Along an eigenvector of K with eigenvalue λ each mode is a scalar recurrence, so the T steps cost
T vector operations over the n modes; for μ = 0 and T → ∞ the result is kernel regression.
"""

from __future__ import annotations

import numpy as np


def linearised_gd(
    K_train: np.ndarray,
    K_eval: np.ndarray,
    y_train: np.ndarray,
    *,
    lr: float,
    steps: int,
    momentum: float = 0.0,
    n_samples: int | None = None,
    f0_train: np.ndarray | None = None,
    f0_eval: np.ndarray | None = None,
) -> np.ndarray:
    """The linearised network's predictions on the evaluation rows after `steps` full-batch steps.

    K_train (m × m) and K_eval (m_eval × m) are the NTK at initialisation; y_train is (m,) or (m, k)
    (k outputs sharing one kernel). `n_samples`: the number of samples the loss averages over (m for
    one output or an output-shared kernel; m / k for a full, sample-major (n·k × n·k) eNTK, whose y
    is then flattened).
    """
    K = np.asarray(K_train, dtype=np.float64)
    Ke = np.asarray(K_eval, dtype=np.float64)
    y = np.asarray(y_train, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1] or Ke.ndim != 2 or Ke.shape[1] != K.shape[0] or y.shape[0] != K.shape[0]:
        raise ValueError(f"linearised_gd: shapes K_train {K.shape}, K_eval {Ke.shape}, y_train {y.shape} do not agree")
    if not (np.isfinite(lr) and lr > 0) or steps < 0 or not (0.0 <= momentum < 1.0):
        raise ValueError(f"linearised_gd: needs lr > 0, steps ≥ 0 and 0 ≤ momentum < 1 (got {lr}, {steps}, {momentum})")
    n = K.shape[0] if n_samples is None else int(n_samples)
    f0t = np.zeros_like(y) if f0_train is None else np.asarray(f0_train, dtype=np.float64).reshape(y.shape)
    f0e = None if f0_eval is None else np.asarray(f0_eval, dtype=np.float64)
    lam, U = np.linalg.eigh((K + K.T) / 2)
    lam = np.clip(lam, 0.0, None)  # rounding below zero: a PSD Gram has no negative modes
    e0 = U.T @ (f0t - y)  # the residual in the eigenbasis, (m,) or (m, k)
    # Per mode the map (a, e) → (μa + (2/n)e, e − ηλ(μa + (2/n)e)) is linear in e₀: track the
    # coefficients of e₀ (scalars per mode), and their running sum Σ a_s.
    a = np.zeros_like(lam)
    e = np.ones_like(lam)
    total = np.zeros_like(lam)
    for _ in range(int(steps)):
        a = momentum * a + (2.0 / n) * e
        e = e - lr * lam * a
        total += a
    coef = total[:, None] * e0 if e0.ndim == 2 else total * e0
    change = -lr * (Ke @ (U @ coef))
    return change if f0e is None else f0e.reshape(change.shape) + change
