"""The kernel-theory prediction for one model on one task (what theory says it will output)."""

from __future__ import annotations

import numpy as np


def theory_predictions(
    K_train: np.ndarray,
    K_eval: np.ndarray,
    y_train: np.ndarray,
    objective: str = "min_norm",
    ridge: float = 0.0,
    f0_train: np.ndarray | None = None,
    f0_eval: np.ndarray | None = None,
    C: float = 1e10,
    epsilon: float = 0.1,
    max_iter: int = -1,
    factor: object | None = None,
) -> np.ndarray:
    """Predictions on the evaluation samples of the kernel machine trained on (K_train, y_train).

    K_eval is (n_eval × n_train). For the regression objectives f_0 (a lazy network's initial
    function) enters as f = f_0 + K (K_train + ridge)^+ (y − f_0); max-margin solutions ignore it.
    `factor`: K_train's SymmetricFactor when the caller has one (min-norm; the seeds of a model share it).
    """
    from compbench.theory.regression import kernel_regression, kernel_svm, kernel_svr

    if objective in ("min_norm", "ridge"):
        return kernel_regression(K_train, K_eval, y_train, ridge=ridge, f0_train=f0_train, f0_cross=f0_eval,
                                 factor=factor if ridge == 0 else None)  # type: ignore[arg-type]
    if objective == "svm":
        return kernel_svm(K_train, K_eval, y_train, C=C, max_iter=max_iter)[0]
    if objective == "svr":
        return kernel_svr(K_train, K_eval, y_train, C=C, epsilon=epsilon, max_iter=max_iter)[0]
    if objective == "linearised_gd":
        raise ValueError("objective 'linearised_gd' needs each seed's learning rate and steps: its adapter gives the "
                         "prediction (Fitted.theory_predictions, compbench.theory.linearised)")
    if objective == "gln_program":
        raise ValueError("objective 'gln_program' is the gated linear network's convex program, not a kernel machine: "
                         "the gln adapter gives the prediction (Fitted.theory_predictions, compbench.theory.gln)")
    raise ValueError(f"unknown objective {objective!r}")
