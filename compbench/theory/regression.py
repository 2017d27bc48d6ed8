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


def _fit_quietly(model, Kt: np.ndarray, y: np.ndarray) -> bool:
    """Fit, turning sklearn's ConvergenceWarning into a False return instead of a warning."""
    from sklearn.exceptions import ConvergenceWarning

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model.fit(Kt, y)
    converged = True
    for w in caught:
        if issubclass(w.category, ConvergenceWarning):
            converged = False
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return converged


def kernel_svm(
    K_train: np.ndarray,
    K_cross: np.ndarray,
    y_train: np.ndarray,
    C: float = 1e10,
    max_iter: int = -1,
) -> tuple[np.ndarray, bool]:
    """Decision values of sklearn SVC on a precomputed kernel (reference max-margin objective)."""
    from sklearn.svm import SVC

    Kt, Kc = _gram_pair(K_train, K_cross)
    y = _pm_one(y_train, Kt.shape[0])
    model = SVC(kernel="precomputed", C=C, max_iter=max_iter)
    converged = _fit_quietly(model, Kt, y)
    # classes_ is sorted (-1, +1), so a positive decision value means +1.
    return model.decision_function(Kc), converged


def kernel_svr(
    K_train: np.ndarray,
    K_cross: np.ndarray,
    y_train: np.ndarray,
    C: float = 1e10,
    epsilon: float = 0.1,
    max_iter: int = -1,
) -> tuple[np.ndarray, bool]:
    """Predictions of sklearn SVR on a precomputed kernel (the reference code's regression)."""
    from sklearn.svm import SVR

    Kt, Kc = _gram_pair(K_train, K_cross)
    y = _targets(y_train, Kt.shape[0], "y_train")
    if y.ndim != 1:
        raise ValueError("kernel_svr takes one target column")
    model = SVR(kernel="precomputed", C=C, epsilon=epsilon, max_iter=max_iter)
    converged = _fit_quietly(model, Kt, y)
    return model.predict(Kc), converged
