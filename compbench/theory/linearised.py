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

The recurrence is run as written (T products with K); for μ = 0 and T → ∞ it is kernel regression.
"""

from __future__ import annotations

import numpy as np

from compbench.thread_scope import one_thread


@one_thread
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
    # The steps themselves, in function space: T products with K (T·m² operations) cost less than its
    # eigendecomposition (~10·m³) for any T below ~10·m, and follow the training's own arithmetic.
    e = f0t - y
    a = np.zeros_like(e)
    total = np.zeros_like(e)
    for _ in range(int(steps)):
        a = momentum * a + (2.0 / n) * e
        e = e - lr * (K @ a)
        total += a
    change = -lr * (Ke @ total)
    return change if f0e is None else f0e.reshape(change.shape) + change
