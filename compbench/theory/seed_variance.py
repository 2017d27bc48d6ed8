"""How much a lazy network's seeds disagree: the NTK-GP's predictive covariance over random inits.

A network trained in its linearised regime to the min-norm interpolant ends at
f(x) = f₀(x) + Θ(x,X)Θ⁺(y − f₀(X)), with Θ its NTK, fixed at large width. Over seeds, f₀ is a
centred Gaussian process with the NNGP kernel Σ, so f(x) is Gaussian with mean Θ(x,X)Θ⁺y and the
covariance of f₀(x) − A f₀(X), A = Θ(x,X)Θ⁺ (Lee et al. 2019, "Wide neural networks of any depth
evolve as linear models under gradient descent", eq. 16 at t → ∞; Kobayashi, Vilimelis Aceituno &
von Oswald 2022 split it further):

    Cov[f(x), f(x')] = Σ(x,x') − A Σ(X,x') − Σ(x,X) Aᵀ + A Σ(X,X) Aᵀ.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["cell_mean_covariance", "ntk_gp_covariance", "r2_sd"]


def ntk_gp_covariance(
    ntk_train: np.ndarray,
    ntk_cross: np.ndarray,
    nngp_train: np.ndarray,
    nngp_cross: np.ndarray,
    nngp_eval: np.ndarray,
    factor: Any = None,
) -> np.ndarray:
    """Covariance over inits (n_eval × n_eval) of the trained lazy network's outputs at the evaluation inputs.

    `ntk_cross`, `nngp_cross`: (n_eval × n_train); `nngp_eval`: (n_eval × n_eval). Θ⁺ is the same
    pseudo-inverse the theory prediction uses, so a singular Θ leaves f₀'s unlearned part in the spread.
    `factor`: ntk_train's SymmetricFactor when the caller has one (the seeds' shared Gram is factored once).
    """
    from compbench.theory.regression import SymmetricFactor

    Kt = np.asarray(ntk_train, dtype=np.float64)
    Kc = np.asarray(ntk_cross, dtype=np.float64)
    St, Sc, Se = (np.asarray(a, dtype=np.float64) for a in (nngp_train, nngp_cross, nngp_eval))
    n_eval, n_train = Kc.shape
    if Kt.shape != (n_train, n_train) or St.shape != Kt.shape or Sc.shape != Kc.shape or Se.shape != (n_eval, n_eval):
        raise ValueError(f"kernel shapes do not fit: NTK {Kt.shape}, {Kc.shape}; NNGP {St.shape}, {Sc.shape}, {Se.shape}")
    Kt = (Kt + Kt.T) / 2  # the factor needs an exactly symmetric Gram
    A = (factor if factor is not None else SymmetricFactor(Kt)).pinv_apply(Kc.T).T  # Θ(x,X)Θ⁺, (n_eval × n_train)
    cross = A @ Sc.T  # A Σ(X, x')
    cov = Se - cross - cross.T + A @ St @ A.T
    return (cov + cov.T) / 2


def cell_mean_covariance(cov: np.ndarray, cell_ids: np.ndarray, n_cells: int) -> np.ndarray:
    """The covariance (n_cells × n_cells) of the cells' mean predictions over their samples (NaN for a cell without any)."""
    ids = np.asarray(cell_ids, dtype=np.int64)
    counts = np.bincount(ids, minlength=n_cells).astype(np.float64)
    member = np.zeros((n_cells, len(ids)))
    member[ids, np.arange(len(ids))] = 1.0
    with np.errstate(invalid="ignore", divide="ignore"):
        member /= counts[:, None]
    return member @ cov @ member.T


def r2_sd(cov: np.ndarray, residual: np.ndarray, ss_tot: float) -> float:
    """The standard deviation over seeds of R² = 1 − Σ(f − y)²/ss_tot when f − y ~ N(−residual, cov).

    For Gaussian ε, Var(Σ(ε − r)²) = 2 tr(C²) + 4 rᵀCr (the odd moments vanish).
    """
    C = np.asarray(cov, dtype=np.float64)
    r = np.asarray(residual, dtype=np.float64)
    var = 2.0 * float(np.sum(C * C)) + 4.0 * float(r @ C @ r)
    return float(np.sqrt(max(var, 0.0)) / ss_tot) if ss_tot > 0 else float("nan")
