"""The infinite-time limit of gradient descent on a gated linear network (GLN), as a convex program.

Source: Lippl, Abbott & Chung, "The implicit bias of gradient descent on generalized gated linear
networks" (arXiv 2202.02649, 2022); authors' code github.com/sflippl/implicit-bias-glns,
`functions/train_convex.py`. A two-layer GLN computes f(x) = Σ_h a_h · w_{h, g_h(x)} · x: hidden
unit h has one weight vector per value of its gate g_h (a fixed function of a gating input), and a
linear readout a_h. Gradient descent from a vanishing initialisation ends at the predictor
v_{h,c} = a_h w_{h,c} that minimises the group norm Σ_h ||v_h||_F (each unit's weights over all its
gates and inputs; the authors' `get_implicit_bias_objective`) among those that fit the training
set; a one-layer (shallow) GLN ends at the minimum Σ_h ||v_h||_F² (their `get_none_objective`).
Both are convex. The authors state them as max-margin problems (classification); here they are the
interpolation problems of regression on the mean squared error, which is what compbench trains.
For unit-specific gates that transposition is the paper's program, not a theorem about squared
error; for a shared gate (below) the regression limit holds exactly: every weight moves only
within the span of its gate's training inputs, and the rest keeps its vanishing initial value.

When every unit is gated by the same gate (one pathway per gate value, the `gln` adapter), the
triangle inequality Σ_h ||v_h|| ≥ ||Σ_h v_h|| makes both programs the minimum Frobenius norm of
the gate-wise predictor: min-norm least squares of each gate value's training samples separately,
whatever the depth. `gated_min_norm` is that closed form; `min_group_norm` solves the general
program (unit-specific gates) and reduces to it.
"""

from __future__ import annotations

import numpy as np

from compbench.thread_scope import one_thread


def group_norm(weights: np.ndarray) -> float:
    """The two-layer GLN's penalty Σ_h ||v_h||_F for weights shaped (units, gate values, inputs)."""
    w = np.asarray(weights, dtype=np.float64)
    return float(np.sqrt((w.reshape(w.shape[0], -1) ** 2).sum(axis=1)).sum())


def _unit_kernels(x_a: np.ndarray, gates_a: np.ndarray, x_b: np.ndarray, gates_b: np.ndarray) -> np.ndarray:
    """(units, n_a, n_b): each unit's gated linear kernel [g_h(a) = g_h(b)] x_a·x_b."""
    same = np.asarray(gates_a)[:, :, None] == np.asarray(gates_b)[:, None, :]
    return same * (np.asarray(x_a, dtype=np.float64) @ np.asarray(x_b, dtype=np.float64).T)[None]


def _check(x: np.ndarray, gates: np.ndarray, y: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """x as (n, d) float64 and gates as (units, n) int, or ValueError naming the mismatch."""
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    gates = np.asarray(gates)
    if gates.ndim == 1:
        gates = gates[None]
    if gates.ndim != 2 or gates.shape[1] != len(x):
        raise ValueError(f"gates must be (units, {len(x)}) gate values, one per sample, got shape {gates.shape}")
    if y is not None and np.shape(y) != (len(x),):
        raise ValueError(f"y must have one target per sample ({len(x)}), got shape {np.shape(y)}")
    return x, gates


@one_thread
def min_group_norm(
    x_train: np.ndarray,
    gates_train: np.ndarray,
    y_train: np.ndarray,
    x_eval: np.ndarray,
    gates_eval: np.ndarray,
    depth: int = 2,
    max_iter: int = 2000,
    tol: float = 1e-12,
) -> tuple[np.ndarray, float]:
    """(predictions on the eval samples, penalty) of the GLN program that interpolates the training set.

    The training set must be fittable by the gates (`gated_min_norm` also covers a set that is not,
    for gates shared by every unit).

    `gates_*` (units, n): unit h's gate value for each sample (one row: every unit gated alike).
    depth 1 minimises Σ_h ||v_h||_F² (one solve); depth 2 minimises Σ_h ||v_h||_F by
    majorisation-minimisation (||v|| ≤ (||v||²/s + s)/2 at s = the last iterate's ||v||), each step
    a weighted min-norm solve Σ_h s_h K_h, so the penalty never increases.
    """
    if depth not in (1, 2):
        raise ValueError(f"depth must be 1 or 2 (the GLN programs that are convex), got {depth}")
    x_tr, g_tr = _check(x_train, gates_train, np.asarray(y_train))
    x_ev, g_ev = _check(x_eval, gates_eval)
    if g_tr.shape[0] != g_ev.shape[0]:
        raise ValueError(f"gates_train has {g_tr.shape[0]} units, gates_eval {g_ev.shape[0]}")
    y = np.asarray(y_train, dtype=np.float64)
    K = _unit_kernels(x_tr, g_tr, x_tr, g_tr)
    scale, next_scale = np.ones(len(K)), np.ones(len(K))
    last = np.inf
    for _ in range(max_iter if depth == 2 else 1):
        scale = next_scale
        alpha = np.linalg.lstsq(np.tensordot(scale, K, axes=1), y, rcond=None)[0]
        # unit h's weights are v_h = s_h A_hᵀ α, so ||v_h|| = s_h sqrt(αᵀ K_h α)
        norms = scale * np.sqrt(np.maximum(np.einsum("i,hij,j->h", alpha, K, alpha), 0.0))
        penalty = float(norms.sum())
        if last - penalty <= tol * max(1.0, penalty):
            break
        last, next_scale = penalty, np.maximum(norms, 1e-300)
    if depth == 1:
        penalty = float((norms ** 2).sum())
    pred = np.tensordot(scale, _unit_kernels(x_ev, g_ev, x_tr, g_tr), axes=1) @ alpha
    return pred, penalty


@one_thread
def gated_min_norm(
    x_train: np.ndarray, gate_train: np.ndarray, y_train: np.ndarray, x_eval: np.ndarray, gate_eval: np.ndarray
) -> np.ndarray:
    """The GLN program's prediction when one gate drives every unit: min-norm least squares per gate value.

    Where the gates cannot fit the training set (a gate's samples have no exact linear fit), this is
    the minimum-norm predictor among those of least training error, where gradient descent from a
    vanishing init stops. A gate value with no training sample predicts 0 (its weights never move).
    """
    x_tr, g_tr = _check(x_train, gate_train, np.asarray(y_train))
    x_ev, g_ev = _check(x_eval, gate_eval)
    y = np.asarray(y_train, dtype=np.float64)
    pred = np.zeros(len(x_ev))
    for g in np.unique(g_ev[0]):
        rows, cols = g_tr[0] == g, g_ev[0] == g
        if rows.any():
            beta = np.linalg.lstsq(x_tr[rows], y[rows], rcond=None)[0]
            pred[cols] = x_ev[cols] @ beta
    return pred
