"""Kernel-model predictions: min-norm / ridge regression (the exact engine) and SVC/SVR references."""

from __future__ import annotations


import numpy as np

from compbench.thread_scope import one_thread

__all__ = [
    "DEFAULT_RCOND", "SymmetricFactor", "TruncatedSVD", "factor_of", "is_symmetric", "kernel_regression", "kernel_svm",
    "kernel_svr", "solves_min_norm",
]

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


# A Gram this large or larger is first tried by Cholesky (N³/3 flops against eigh's ~9N³: at the modular
# teacher's paper size, N = 6912 on one thread, 2.9 s against 60 s).
CHOLESKY_FROM = 256
# ... and kept when LAPACK's estimate of its 1-norm condition number is at most this: the min-norm answer
# then keeps every eigen-direction (the cutoff drops λ ≤ 1e-12·λ_max only) and the two solves agree to
# about cond·ε ≤ 1e-9 relative; a worse-conditioned Gram takes the eigendecomposition.
CHOLESKY_MAX_COND = 1e7


class SymmetricFactor:
    """A symmetric Gram factored once and reused for every min-norm solve (any number of right-hand sides).

    A well-conditioned positive definite Gram of CHOLESKY_FROM rows or more is factored by Cholesky
    (K⁺ = K⁻¹ then); any other by its eigendecomposition K = V diag(w) Vᵀ, whose cutoff decides the
    rank as `np.linalg.lstsq` does. `method` says which.
    """

    def __init__(self, K: np.ndarray) -> None:
        """Factor K (square and exactly symmetric, else ValueError)."""
        Kt = np.asarray(K, dtype=np.float64)
        if Kt.ndim != 2 or Kt.shape[0] != Kt.shape[1]:
            raise ValueError(f"K must be square, got shape {Kt.shape}")
        if not is_symmetric(Kt):
            raise ValueError("SymmetricFactor needs an exactly symmetric matrix")
        self.shape = Kt.shape
        self._K = Kt
        self._chol: np.ndarray | None = None
        self.condition = float("nan")  # the Cholesky path's 1-norm condition estimate
        self.w = self.V = None
        self.method = "eigh"
        if Kt.shape[0] >= CHOLESKY_FROM and self._try_cholesky(Kt):
            self.method = "cholesky"
        else:
            self._eigh()

    def _try_cholesky(self, Kt: np.ndarray) -> bool:
        import scipy.linalg

        try:
            chol, _ = scipy.linalg.cho_factor(Kt, lower=True, check_finite=False)
        except np.linalg.LinAlgError:  # not numerically positive definite
            return False
        anorm = float(np.abs(Kt).sum(axis=0).max())
        rcond, info = scipy.linalg.lapack.dpocon(chol, anorm, uplo="L")
        if info != 0 or not rcond > 0 or 1.0 / rcond > CHOLESKY_MAX_COND:
            return False
        self._chol, self.condition = chol, 1.0 / float(rcond)
        # λ_min = 1/‖K⁻¹‖₂ and ‖K⁻¹‖₁/√N ≤ ‖K⁻¹‖₂ ≤ ‖K⁻¹‖₁: ‖K‖₁·rcond estimates it within a factor √N
        self._smallest = anorm * float(rcond)
        return True

    def _eigh(self) -> None:
        self.w, self.V = np.linalg.eigh(self._K)

    @property
    def smallest(self) -> float:
        """The smallest eigenvalue (inf for an empty matrix); by Cholesky, a positive estimate of it."""
        if self._chol is not None:
            return self._smallest
        return float(self.w[0]) if self.w.size else float("inf")

    def pinv_apply(self, r: np.ndarray, rcond: float = DEFAULT_RCOND) -> np.ndarray:
        """K⁺ r with lstsq's cutoff: eigen-directions with |λ| ≤ rcond·max|λ| count as zero.

        The singular values of a symmetric K are |λ|, so this is the cutoff `np.linalg.lstsq(K, r,
        rcond)` applies to them (gelsd: σ ≤ rcond·σ_max is zero), made on the same spectrum. A Cholesky
        factor answers K⁻¹ r when the cutoff cannot drop a direction (rcond·condition < 1, with a
        margin of 100 for the estimate), else the eigendecomposition is computed and answers.
        """
        if self._chol is not None and rcond * self.condition * 100 < 1:
            import scipy.linalg

            return scipy.linalg.cho_solve((self._chol, True), np.asarray(r, dtype=np.float64), check_finite=False)
        if self.w is None:
            self._eigh()
        if not self.w.size:
            return np.zeros_like(r, dtype=np.float64)
        mag = np.abs(self.w)
        keep = mag > rcond * mag.max()
        V = self.V[:, keep]
        coef = V.T @ r
        coef /= self.w[keep] if coef.ndim == 1 else self.w[keep][:, None]
        return V @ coef


# A matrix whose smaller side has this many rows or more gets its pseudo-inverse from the eigendecomposition
# of its smaller Gram (x xᵀ or xᵀ x: one matmul and a symmetric eigensolver, against gesdd's bidiagonalisation;
# the five-factor sprite grid's centred 1728 × 4464 conjunction features on one thread: 1.5 s against 5.9 s),
# when that provably keeps the directions the SVD would keep.
GRAM_SVD_FROM = 256
# The Gram route keeps eigenvalues of at least this fraction of the largest: their singular values are then
# ≥ 3e-3·σ_max (the route is taken only for a cutoff rcond ≤ 3e-4, ten times below) and the kept
# eigenvectors accurate to about n·ε / GRAM_KEEP.
GRAM_KEEP = 1e-5
# ... and holds only when what it drops is below the cutoff by this factor (measured directly on x, not on the
# squared spectrum): every dropped singular value is then ≤ ‖dropped part‖_F < cutoff, so the SVD drops it too.
GRAM_DROP_MARGIN = 10.0


class TruncatedSVD:
    """x ≈ U diag(s) Vᵀ keeping singular values > rcond·σ_max, the directions `np.linalg.pinv(x, rcond)` keeps.

    A matrix whose smaller side has GRAM_SVD_FROM rows or more is first decomposed through its smaller
    Gram's eigendecomposition; that route stands only when its rank decision provably equals the SVD's:
    every kept singular value (eigenvalue ≥ GRAM_KEEP·λ_max) and the dropped part of x itself
    (‖x − U Uᵀ x‖_F, measured on x) on either side of the cutoff by GRAM_DROP_MARGIN. Otherwise (and for
    small matrices, or a cutoff above 3e-4) it is numpy's SVD.
    `method` says which ("gram-eigh" or "svd").
    """

    def __init__(self, x: np.ndarray, rcond: float) -> None:
        """Decompose x (2-D, finite) with pinv's relative cutoff rcond."""
        a = np.asarray(x, dtype=np.float64)
        if a.ndim != 2:
            raise ValueError(f"x must be 2-D, got shape {a.shape}")
        self.method = "svd"
        self._v: np.ndarray | None = None
        # the kept singular values (≥ √GRAM_KEEP·σ_max) must clear the cutoff by the same margin as the dropped
        gram_route = min(a.shape) >= GRAM_SVD_FROM and rcond * GRAM_DROP_MARGIN <= np.sqrt(GRAM_KEEP)
        got = self._by_gram(a, rcond) if gram_route else None
        if got is None:
            u, s, vt = np.linalg.svd(a, full_matrices=False)
            keep = s > rcond * s.max() if s.size else np.zeros(0, bool)
            self.u, self.s, self._v = u[:, keep], s[keep], vt[keep].T
        else:
            self.method = "gram-eigh"
            self.u, self.s, self._v = got
        self._x = a

    @staticmethod
    def _by_gram(a: np.ndarray, rcond: float) -> tuple[np.ndarray, np.ndarray, np.ndarray | None] | None:
        wide = a.shape[0] <= a.shape[1]
        gram = a @ a.T if wide else a.T @ a
        w, q = np.linalg.eigh(gram)
        top = float(w[-1]) if w.size else 0.0
        if not top > 0:
            return None
        keep = w >= GRAM_KEEP * top
        cutoff = rcond * np.sqrt(top)
        # The complement of the kept eigenvectors spans what is dropped: its part of x, measured on x.
        rest = q[:, ~keep]
        dropped = np.linalg.norm(rest.T @ a if wide else a @ rest)
        if not dropped * GRAM_DROP_MARGIN < cutoff:
            return None
        s = np.sqrt(w[keep])
        if wide:
            return q[:, keep], s, None  # V = xᵀ U / s, built when asked for
        v = q[:, keep]
        return (a @ v) / s, s, v

    @property
    def v(self) -> np.ndarray:
        """The kept right singular vectors, (p, r)."""
        if self._v is None:
            self._v = (self._x.T @ self.u) / self.s
        return self._v

    @property
    def rank(self) -> int:
        """How many directions are kept."""
        return int(self.s.size)

    def pinv(self) -> np.ndarray:
        """The pseudo-inverse V diag(1/s) Uᵀ, (p, n)."""
        return (self.v / self.s) @ self.u.T


def solves_min_norm(objective: str, ridge: float) -> bool:
    """Whether a kernel fit with this objective and ridge is the min-norm solve, the one a SymmetricFactor serves."""
    return objective in ("min_norm", "ridge") and ridge == 0


def factor_of(K: np.ndarray) -> SymmetricFactor | None:
    """K's SymmetricFactor when a min-norm solve would use one (exactly symmetric and finite), else None."""
    Kt = np.asarray(K, dtype=np.float64)
    return SymmetricFactor(Kt) if is_symmetric(Kt) and np.isfinite(Kt).all() else None


def is_symmetric(K: np.ndarray) -> bool:
    """K equals its transpose bitwise (symmetric Grams of compbench's kernels are built so)."""
    return K.ndim == 2 and K.shape[0] == K.shape[1] and bool(np.array_equal(K, K.T))


def _dual_coefficients(
    Kt: np.ndarray, residual: np.ndarray, ridge: float, rcond: float, factor: SymmetricFactor | None
) -> np.ndarray:
    """α with (K + ridge·I) α = r: min-norm (K⁺ r) at ridge 0, one factorisation for all columns of r."""
    if ridge == 0:
        if factor is None and is_symmetric(Kt):
            factor = SymmetricFactor(Kt)
        if factor is not None:
            return factor.pinv_apply(residual, rcond)
        return np.linalg.lstsq(Kt, residual, rcond=rcond)[0]  # a non-symmetric K: SVD least squares
    A = Kt + ridge * np.eye(Kt.shape[0])
    if is_symmetric(A):
        import scipy.linalg

        try:
            return scipy.linalg.cho_solve(scipy.linalg.cho_factor(A, lower=True, check_finite=False), residual, check_finite=False)
        except np.linalg.LinAlgError:
            pass  # not positive definite (an indefinite K): LU below, as before
    return np.linalg.solve(A, residual)


@one_thread
def kernel_regression(
    K_train: np.ndarray,
    K_cross: np.ndarray,
    y_train: np.ndarray,
    ridge: float = 0.0,
    f0_train: np.ndarray | None = None,
    f0_cross: np.ndarray | None = None,
    *,
    rcond: float = DEFAULT_RCOND,
    factor: SymmetricFactor | None = None,
) -> np.ndarray:
    """f = f0_cross + K_cross (K_train + ridge·I)⁻¹ (y_train − f0_train); min-norm at ridge 0.

    Solved at matrix-product speed: at ridge 0 through K_train's `SymmetricFactor` (the caller's,
    else computed here): Cholesky for a large well-conditioned Gram, else the eigendecomposition
    with `np.linalg.lstsq`'s cutoff (eigen-directions with |λ| ≤ rcond·max|λ| dropped: the same
    rank decision); at ridge > 0 by
    Cholesky. Every target column shares the one factorisation. A K_train that is not exactly
    symmetric takes the SVD least squares (ridge 0) or an LU solve (ridge > 0) instead.
    """
    Kt, Kc = _gram_pair(K_train, K_cross)
    if not ridge >= 0:
        raise ValueError(f"ridge must be ≥ 0, got {ridge}")
    y = _targets(y_train, Kt.shape[0], "y_train")
    residual = y if f0_train is None else y - np.asarray(f0_train, dtype=np.float64)
    if factor is not None and factor.shape != Kt.shape:
        raise ValueError(f"factor is of a {factor.shape} matrix, K_train is {Kt.shape}")
    if np.isfinite(Kt).all() and np.isfinite(residual).all():
        alpha = _dual_coefficients(Kt, residual, ridge, rcond, factor)
    elif ridge == 0:  # non-finite input: what it always did (lstsq raises LinAlgError, solve gives NaN)
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


@one_thread
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


@one_thread
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
