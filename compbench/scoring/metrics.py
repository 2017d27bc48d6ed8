"""Per-cell metrics: truth on held-out cells, agreement with theory, additivity."""

from __future__ import annotations

import numpy as np

TIE_TOL = 1e-9  # |prediction| below this (relative to max|y|) is a tie: neither sign


def sign_accuracy(preds: np.ndarray, y: np.ndarray) -> float:
    """Fraction of correct signs; a tie (prediction ≈ 0) scores ½, i.e. a coin flip."""
    if len(y) == 0:
        return float("nan")
    tie = np.abs(preds) <= TIE_TOL * max(1.0, float(np.max(np.abs(y))))
    correct = np.where(tie, 0.5, (np.sign(preds) == np.sign(y)).astype(float))
    return float(correct.mean())


def r2(target: np.ndarray, preds: np.ndarray) -> float:
    """Coefficient of determination of preds for target; a constant target scores 1 if matched else 0."""
    ss_res = float(np.sum((target - preds) ** 2))
    ss_tot = float(np.sum((target - target.mean()) ** 2))
    scale = 1e-12 * len(target) * max(1.0, float(np.mean(target**2)))
    if ss_tot <= scale:
        return 1.0 if ss_res <= scale else 0.0
    return 1.0 - ss_res / ss_tot


def slope_intercept(truth: np.ndarray, preds: np.ndarray) -> tuple[float, float]:
    """Least-squares line of predictions against the truth."""
    if len(truth) < 2 or np.ptp(truth) == 0:
        return float("nan"), float("nan")
    slope, intercept = np.polyfit(truth, preds, 1)
    return float(slope), float(intercept)


def separation(preds: np.ndarray, y: np.ndarray) -> float:
    """Mean prediction on positive cells minus on negative cells (0: classes not separated)."""
    pos, neg = preds[y > 0], preds[y < 0]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    return float(pos.mean() - neg.mean())


def cell_metrics(
    kind: str,
    y: np.ndarray,
    train_mask: np.ndarray,
    preds: np.ndarray,
    theory_preds: np.ndarray | None,
    additivity: float,
) -> dict[str, float]:
    """Every metric of one trained model on one task (held-out = cells outside train_mask)."""
    test = ~train_mask
    yt, pt = y[test], preds[test]
    m: dict[str, float] = {"additivity": additivity}
    if kind == "classification":
        m["heldout_acc"] = sign_accuracy(pt, yt)
        m["train_acc"] = sign_accuracy(preds[train_mask], y[train_mask])
        m["heldout_margin"] = float(np.mean(pt * yt))
        m["separation"] = separation(pt, yt)
    else:
        m["heldout_r2"] = r2(yt, pt)
        m["heldout_mse"] = float(np.mean((pt - yt) ** 2))
        m["train_mse"] = float(np.mean((preds[train_mask] - y[train_mask]) ** 2))
        m["slope"], m["intercept"] = slope_intercept(yt, pt)
        m["corr"] = float(np.corrcoef(yt, pt)[0, 1]) if np.ptp(pt) > 0 and np.ptp(yt) > 0 else float("nan")
    if theory_preds is not None:
        th = theory_preds[test]
        m["theory_r2"] = r2(th, pt)
        m["theory_max_abs_diff"] = float(np.max(np.abs(th - pt)))
        if kind == "classification":
            m["theory_acc"] = sign_accuracy(th, yt)
        else:
            m["theory_slope"] = slope_intercept(yt, th)[0]
            m["theory_heldout_r2"] = r2(yt, th)
    return m
