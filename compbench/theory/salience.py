"""Saliences of a symmetric compositional kernel and the memorization-leak closed form."""

from __future__ import annotations

from math import comb

import numpy as np

from compbench.theory.overlap import agreement_counts

__all__ = ["kernel_by_overlap", "memorization_leak_slope", "saliences"]


def saliences(kappa: np.ndarray) -> np.ndarray:
    """S(k;C) for k = 0..C: inclusion–exclusion of κ(0..C), normalised by κ(C) − κ(0)."""
    k = np.asarray(kappa, dtype=np.float64)
    if k.ndim != 1 or k.size < 2:
        raise ValueError(f"kappa must list κ(0..C) with C ≥ 1, got shape {k.shape}")
    n_comp = k.size - 1
    span = k[-1] - k[0]
    if span == 0:
        raise ValueError("saliences are undefined when κ(C) = κ(0)")
    signs = np.array(
        [[(-1) ** (c - j) * comb(c, j) if j <= c else 0 for j in range(n_comp + 1)] for c in range(n_comp + 1)],
        dtype=np.float64,
    )
    return signs @ k / span


def kernel_by_overlap(
    K: np.ndarray, cells_a: np.ndarray, cells_b: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Mean of K per agreement count 0..C and the max |K − mean| within each count (NaN if none)."""
    K = np.asarray(K, dtype=np.float64)
    counts = agreement_counts(cells_a, cells_b)
    if counts.shape != K.shape:
        raise ValueError(f"K has shape {K.shape} but the cells give {counts.shape}")
    n_levels = np.asarray(cells_a).shape[1] + 1
    flat_c, flat_k = counts.ravel(), K.ravel()
    n = np.bincount(flat_c, minlength=n_levels).astype(np.float64)
    with np.errstate(invalid="ignore"):
        mean = np.bincount(flat_c, weights=flat_k, minlength=n_levels) / n
    dev = np.full(n_levels, -np.inf)
    np.maximum.at(dev, flat_c, np.abs(flat_k - mean[flat_c]))
    dev[n == 0] = np.nan
    return mean, dev


def memorization_leak_slope(p: int | float | np.ndarray, S: float | np.ndarray) -> float | np.ndarray:
    """Held-out slope m = p·S / (1 + (p − 2)·S) of min-norm kernel regression on symbolic addition."""
    return p * S / (1 + (p - 2) * S)
