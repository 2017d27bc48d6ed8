"""Kernel-model predictions: min-norm / ridge regression (the exact engine) and SVC/SVR references."""

from __future__ import annotations

import warnings

import numpy as np

__all__ = ["DEFAULT_RCOND", "kernel_regression", "kernel_svm", "kernel_svr"]

# Relative singular-value cutoff of the min-norm solve. Gram matrices of exactly rank-deficient
# kernels (e.g. a purely additive overlap kernel) carry round-off "eigenvalues" of a few n·ε·λ_max;
# inverting those would swamp the answer, while genuine kernel spectra sit far above 1e-12·λ_max.
DEFAULT_RCOND = 1e-12


def _targets(y: np.ndarray, n: int, name: str) -> np.ndarray:
    arr = np.asarray(y, dtype=np.float64)
    if arr.ndim not in (1, 2) or arr.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) or ({n}, k), got {arr.shape}")
    return arr


def _gram_pair(K_train: np.ndarray, K_cross: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    Kt = np.asarray(K_train, dtype=np.float64)
    Kc = np.asarray(K_cross, dtype=np.float64)
    if Kt.ndim != 2 or Kt.shape[0] != Kt.shape[1]:
        raise ValueError(f"K_train must be square, got shape {Kt.shape}")
    if Kc.ndim != 2 or Kc.shape[1] != Kt.shape[0]:
        raise ValueError(f"K_cross must have shape (n_pred, {Kt.shape[0]}), got {Kc.shape}")
    return Kt, Kc


def kernel_regression(
    K_train: np.ndarray,
    K_cross: np.ndarray,
    y_train: np.ndarray,
    ridge: float = 0.0,
    f0_train: np.ndarray | None = None,
    f0_cross: np.ndarray | None = None,
    *,
    rcond: float = DEFAULT_RCOND,
) -> np.ndarray:
    """f = f0_cross + K_cross (K_train + ridge·I)⁻¹ (y_train − f0_train); min-norm at ridge 0."""
    Kt, Kc = _gram_pair(K_train, K_cross)
    if not ridge >= 0:
        raise ValueError(f"ridge must be ≥ 0, got {ridge}")
    y = _targets(y_train, Kt.shape[0], "y_train")
    residual = y if f0_train is None else y - np.asarray(f0_train, dtype=np.float64)
    if ridge == 0:
        alpha = np.linalg.lstsq(Kt, residual, rcond=rcond)[0]
    else:
        alpha = np.linalg.solve(Kt + ridge * np.eye(Kt.shape[0]), residual)
    f = Kc @ alpha
    if f0_cross is not None:
        f = f + np.asarray(f0_cross, dtype=np.float64)
    return f


def _pm_one(y_train: np.ndarray, n: int) -> np.ndarray:
    y = _targets(y_train, n, "y_train")
    if y.ndim != 1 or not np.all(np.abs(y) == 1):
        raise ValueError("kernel_svm needs labels y_train in {-1, +1} (one column)")
    if np.unique(y).size < 2:
        raise ValueError("kernel_svm needs both classes (-1 and +1) among the training labels")
    return y


def _libsvm_fit(Kt: np.ndarray, Kc: np.ndarray, y: np.ndarray, svm_type: int, C: float, epsilon: float, max_iter: int) -> tuple[np.ndarray, bool]:
    """libsvm on a precomputed Gram, called directly.

    sklearn's SVC/SVR wrap exactly this call; their per-call input checks cost ~100× the solve on
    the small Gram matrices of a kernel sweep. tests/test_theory_svm.py checks equality with SVC/SVR.
    """
    from sklearn.svm import _libsvm

    # libsvm prints its solver log to stdout unless told not to; sklearn's SVC.fit sets this, and
    # calling libsvm directly skips it.
    _libsvm.set_verbosity_wrap(0)

    support, _, _, sv_coef, intercept, _, _, fit_status, n_iter = _libsvm.fit(
        np.ascontiguousarray(Kt, dtype=np.float64), np.ascontiguousarray(y, dtype=np.float64),
        svm_type=svm_type, kernel="precomputed", C=float(C), epsilon=float(epsilon), tol=1e-3,
        cache_size=200.0, max_iter=int(max_iter),
    )
    decision = np.asarray(Kc)[:, support] @ sv_coef[0] + intercept[0]
    iterations = int(np.max(n_iter)) if np.size(n_iter) else 0
    converged = fit_status == 0 and (max_iter < 0 or iterations < max_iter)
    return decision, bool(converged)


def kernel_svm(
    K_train: np.ndarray,
    K_cross: np.ndarray,
    y_train: np.ndarray,
    C: float = 1e10,
    max_iter: int = -1,
) -> tuple[np.ndarray, bool]:
    """Decision values of a C-SVM on a precomputed kernel (the reference's SVC), and convergence."""
    Kt, Kc = _gram_pair(K_train, K_cross)
    y = _pm_one(y_train, Kt.shape[0])
    # libsvm's binary decision is for the first class in sorted order (−1), hence the sign flip,
    # as in sklearn: a positive value means +1.
    decision, converged = _libsvm_fit(Kt, Kc, (y > 0).astype(np.float64), 0, C, 0.1, max_iter)
    return -decision, converged


def kernel_svr(
    K_train: np.ndarray,
    K_cross: np.ndarray,
    y_train: np.ndarray,
    C: float = 1e10,
    epsilon: float = 0.1,
    max_iter: int = -1,
) -> tuple[np.ndarray, bool]:
    """Predictions of ε-SVR on a precomputed kernel (the reference code's regression), and convergence."""
    Kt, Kc = _gram_pair(K_train, K_cross)
    y = _targets(y_train, Kt.shape[0], "y_train")
    if y.ndim != 1:
        raise ValueError("kernel_svr takes one target column")
    return _libsvm_fit(Kt, Kc, y, 3, C, epsilon, max_iter)
