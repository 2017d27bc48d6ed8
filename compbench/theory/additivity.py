"""Conjunction-wise additivity score: how much of a model's held-out output sums seen conjunctions."""

from __future__ import annotations

from functools import cached_property
from itertools import combinations

import numpy as np

from compbench.theory.regression import TruncatedSVD

__all__ = ["AdditivityFit", "ConjunctionLabel", "additivity_score", "conjunction_features", "irrelevant_share", "pooled_score"]

# (S, s): component subset S (sorted indices) and its values s; ((), ()) is the intercept.
ConjunctionLabel = tuple[tuple[int, ...], tuple[int, ...]]
INTERCEPT: ConjunctionLabel = ((), ())

# Relative size below which the held-out variance counts as zero (R² undefined); in mean squares
# relative to the predictions' overall mean square, i.e. about 1e-6 in amplitude.
_DEGENERATE_REL = 1e-12


def _cells_and_mask(cells: np.ndarray, train_mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    z = np.asarray(cells)
    mask = np.asarray(train_mask)
    if z.ndim != 2:
        raise ValueError(f"cells must be (n_cells, n_components), got shape {z.shape}")
    if mask.shape != (z.shape[0],) or not np.isin(mask, (0, 1)).all():
        raise ValueError(f"train_mask must be a boolean array of shape ({z.shape[0]},)")
    return z, mask.astype(bool)


def conjunction_features(
    cells: np.ndarray, train_mask: np.ndarray
) -> tuple[np.ndarray, list[ConjunctionLabel]]:
    """Intercept plus 1[z_S = s] for every non-empty S and every s seen in a training cell."""
    z, mask = _cells_and_mask(cells, train_mask)
    n, n_comp = z.shape
    columns = [np.ones((n, 1))]
    labels: list[ConjunctionLabel] = [INTERCEPT]
    for order in range(1, n_comp + 1):
        for subset in combinations(range(n_comp), order):
            sub = z[:, subset]
            values, inverse = np.unique(sub, axis=0, return_inverse=True)
            inverse = inverse.reshape(-1)
            seen = np.unique(inverse[mask])
            columns.append((inverse[:, None] == seen[None, :]).astype(np.float64))
            labels.extend((subset, tuple(int(v) for v in values[i])) for i in seen)
    return np.concatenate(columns, axis=1), labels


class AdditivityFit:
    """Least-squares fit of predictions on conjunction features, precomputed for one task/split."""

    def __init__(self, cells: np.ndarray, train_mask: np.ndarray, rcond: float = 1e-10) -> None:
        """Precompute features and the projections that every scoring call reuses."""
        z, mask = _cells_and_mask(cells, train_mask)
        if mask.all():
            raise ValueError("no held-out cells: the additivity score is defined on held-out cells")
        self.features, self.labels = conjunction_features(z, mask)
        self.test_mask = ~mask
        n = z.shape[0]
        # Centring the indicator columns leaves the intercept unpenalised: the min-norm solution
        # then equals the α→0 limit of sklearn Ridge(fit_intercept=True), as the reference reports.
        x = self.features[:, 1:]
        self._col_mean = x.mean(axis=0)
        xc = x - self._col_mean
        # pinv(xc)'s directions (its range is orthogonal to constants, so the fit annihilates them)
        self._svd = TruncatedSVD(xc, rcond)
        # Fitted held-out values = mean(y) + xc[test] @ pinv(xc) @ y = mean(y) + U[test] Uᵀ y: one (n_test, n) matrix.
        u = self._svd.u
        self._hat_test = u[self.test_mask] @ u.T + 1.0 / n

    @property
    def method(self) -> str:
        """How the pseudo-inverse was computed ("gram-eigh" or "svd", see TruncatedSVD)."""
        return self._svd.method

    @cached_property
    def _pinv(self) -> np.ndarray:
        """pinv(xc), (p−1, n): the coefficients' map, built on first use (only some metrics need it)."""
        return self._svd.pinv()

    @cached_property
    def vacuous(self) -> bool:
        """Whether the fit reproduces any held-out predictions whatever (the seen conjunctions span them): the score cannot fail.

        True when the held-out rows of the hat matrix are the identity on the held-out cells and zero
        elsewhere, as when every held-out cell has a feature of its own (a modular teacher's pairs, whose
        single modules and their intercept span every pair's value).
        """
        test = np.flatnonzero(self.test_mask)
        select = np.zeros_like(self._hat_test)
        select[np.arange(len(test)), test] = 1.0
        return bool(np.abs(self._hat_test - select).max() <= 1e-8)

    @property
    def n_features(self) -> int:
        """Number of feature columns (intercept included)."""
        return self.features.shape[1]

    def _preds(self, preds: np.ndarray) -> tuple[np.ndarray, bool]:
        y = np.asarray(preds, dtype=np.float64)
        single = y.ndim == 1
        y2 = y[None, :] if single else y
        if y2.ndim != 2 or y2.shape[1] != self.features.shape[0]:
            raise ValueError(
                f"preds must have shape ({self.features.shape[0]},) or (k, {self.features.shape[0]}), "
                f"got {y.shape}"
            )
        return y2, single

    def score(self, preds: np.ndarray) -> float | np.ndarray:
        """R² on held-out cells of the fit made on all cells; 1.0/0.0 when held-out variance ≈ 0."""
        # Degenerate case: if the held-out predictions are (near-)constant, R² is undefined.
        # We return 1.0 when the fit reproduces them too (residual ≈ 0, e.g. a kernel model that
        # predicts exactly 0 on every held-out cell) and 0.0 otherwise. "≈ 0" is relative to the
        # mean square of the predictions on all cells. The intercept is a feature and every
        # training cell has its own full-conjunction column, so the held-out fit is a projection
        # that contains the constants: SS_res ≤ SS_tot, and the 0.0 branch only catches round-off.
        y, single = self._preds(preds)
        y_test = y[:, self.test_mask]
        fitted = y @ self._hat_test.T
        ss_res = ((y_test - fitted) ** 2).sum(axis=1)
        ss_tot = ((y_test - y_test.mean(axis=1, keepdims=True)) ** 2).sum(axis=1)
        tiny = _DEGENERATE_REL * (y**2).mean(axis=1) * y_test.shape[1]
        with np.errstate(divide="ignore", invalid="ignore"):
            r2 = 1.0 - ss_res / ss_tot
        degenerate = ss_tot <= tiny
        r2 = np.where(degenerate, np.where(ss_res <= tiny, 1.0, 0.0), r2)
        return float(r2[0]) if single else r2

    def coefficients(self, preds: np.ndarray) -> dict[ConjunctionLabel, float | np.ndarray]:
        """Fitted coefficient per conjunction label (intercept under ((), ())), min-norm."""
        y, single = self._preds(preds)
        w = y @ self._pinv.T  # (k, p−1)
        intercept = y.mean(axis=1) - w @ self._col_mean
        coef = np.concatenate([intercept[:, None], w], axis=1)
        if single:
            return {label: float(c) for label, c in zip(self.labels, coef[0])}
        return {label: coef[:, j].copy() for j, label in enumerate(self.labels)}


def _pooled(ratio_num: np.ndarray, ratio_den: np.ndarray) -> float:
    num, den = float(np.sum(ratio_num)), float(np.sum(ratio_den))
    return float("nan") if den <= 0 else num / den


def pooled_score(fit: AdditivityFit, rows: np.ndarray) -> float:
    """Additivity R² of several prediction rows at once (outputs, inputs x): 1 − ΣSS_res / ΣSS_tot."""
    y, _ = fit._preds(rows)
    if len(y) == 1:
        return float(fit.score(y[0]))
    y_test = y[:, fit.test_mask]
    ss_res = ((y_test - y @ fit._hat_test.T) ** 2).sum()
    ss_tot = ((y_test - y_test.mean(axis=1, keepdims=True)) ** 2).sum()
    tiny = _DEGENERATE_REL * float((y**2).mean()) * y_test.size
    if ss_tot <= tiny:
        return 1.0 if ss_res <= tiny else 0.0
    return 1.0 - float(ss_res / ss_tot)


def irrelevant_share(fit: AdditivityFit, rows: np.ndarray, irrelevant: tuple[int, ...] | list[int]) -> float:
    """Variance of the held-out predictions' additive parts that involve an irrelevant component, over theirs.

    `rows` are predictions on every cell (n_cells,) or (k, n_cells) (outputs, or inputs x of
    function-valued cells: numerator and denominator are summed over rows). The parts are the
    conjunction-wise additive fit's terms g_S(z_S), S meeting `irrelevant` (LITERATURE.md §1). For
    two components and held-out cells whose conjunctions were never trained, the held-out fit is
    g_0 + g_1 + g_2 with each g unique up to a constant, so the share does not depend on how the
    fit splits constants. 0 when the held-out predictions are constant.
    """
    y, _ = fit._preds(rows)
    bad = set(irrelevant)
    if not bad:
        raise ValueError("irrelevant_share needs at least one irrelevant component")
    w = y @ fit._pinv.T  # (k, p−1): coefficients of the non-intercept columns
    cols = np.array([bool(set(label[0]) & bad) for label in fit.labels[1:]])
    xt = (fit.features[:, 1:] - fit._col_mean)[fit.test_mask]
    part = xt[:, cols] @ w[:, cols].T  # (n_test, k): centred columns; a constant shift leaves variances alone
    y_test = y[:, fit.test_mask].T
    num = part.var(axis=0)
    den = y_test.var(axis=0)
    tiny = _DEGENERATE_REL * max(float((y**2).mean()), 1e-300)
    if float(den.sum()) <= tiny:
        return 0.0
    return _pooled(num, den)


def additivity_score(cells: np.ndarray, preds: np.ndarray, train_mask: np.ndarray) -> float:
    """R² on held-out cells of the conjunction-wise additive fit (see AdditivityFit.score)."""
    return AdditivityFit(cells, train_mask).score(preds)
