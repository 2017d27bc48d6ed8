"""The kernel-theory prediction for one model on one task (what theory says it will output)."""

from __future__ import annotations

import numpy as np


def theory_predictions(
    K: np.ndarray,
    y: np.ndarray,
    train_mask: np.ndarray,
    objective: str = "min_norm",
    ridge: float = 0.0,
    f0: np.ndarray | None = None,
    C: float = 1e10,
    epsilon: float = 0.1,
    max_iter: int = -1,
) -> np.ndarray:
    """Predictions on every cell of the kernel machine with kernel K (n × n) trained on train_mask."""
    from compbench.theory.regression import kernel_regression, kernel_svm, kernel_svr

    K_tr, K_all, y_tr = K[np.ix_(train_mask, train_mask)], K[:, train_mask], y[train_mask]
    if objective in ("min_norm", "ridge"):
        f0_tr = None if f0 is None else f0[train_mask]
        return kernel_regression(K_tr, K_all, y_tr, ridge=ridge, f0_train=f0_tr, f0_cross=f0)
    # Max-margin solutions do not depend on the initial function (f0 is for the regression objectives).
    if objective == "svm":
        return kernel_svm(K_tr, K_all, y_tr, C=C, max_iter=max_iter)[0]
    if objective == "svr":
        return kernel_svr(K_tr, K_all, y_tr, C=C, epsilon=epsilon, max_iter=max_iter)[0]
    raise ValueError(f"unknown objective {objective!r}")
