"""Each held-out sample's similarity to its nearest training sample under a model's own kernel.

Mayilvahanan et al. ask whether a held-out score measures composition or near-duplication of the
training data. Under a kernel k the natural similarity is the cosine k(x, x')/√(k(x, x) k(x', x')),
1 for an input the kernel cannot tell from a training one. The theory engine already holds the
cross-kernel K(eval, train); only the evaluation samples' k(x, x) is new, computed in small blocks.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

DIAGONAL_BLOCK = 32  # samples per block of a kernel's diagonal: a 32 × 32 Gram per block, 1/32 of it kept


def kernel_diagonal(gram: Callable[[int, int], np.ndarray], n: int, block: int = DIAGONAL_BLOCK) -> np.ndarray:
    """k(x_i, x_i) for i < n from `gram(start, stop)`, the Gram of samples start..stop−1 with themselves."""
    out = np.empty(n, dtype=np.float64)
    for start in range(0, n, block):
        stop = min(n, start + block)
        out[start:stop] = np.diagonal(np.asarray(gram(start, stop), dtype=np.float64))
    return out


def output_trace(K: np.ndarray, n_rows: int, n_cols: int) -> np.ndarray:
    """A full (n_rows·K × n_cols·K) sample-major kernel averaged over its outputs (n_rows × n_cols); as is when already so."""
    K = np.asarray(K, dtype=np.float64)
    k = K.shape[0] // max(1, n_rows)
    if k <= 1:
        return K
    return np.einsum("ikjk->ij", K.reshape(n_rows, k, n_cols, k)) / k


def nearest_similarity(K_eval_train: np.ndarray, diag_train: np.ndarray, diag_eval: np.ndarray) -> np.ndarray:
    """Per evaluation sample, the largest normalised kernel k(x, x')/√(k(x, x) k(x', x')) over the training samples.

    A sample (or training sample) whose k(x, x) is 0 has no direction: its similarities are NaN.
    """
    d_tr = np.asarray(diag_train, dtype=np.float64)
    d_ev = np.asarray(diag_eval, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        norm = np.sqrt(np.where(d_ev > 0, d_ev, np.nan))[:, None] * np.sqrt(np.where(d_tr > 0, d_tr, np.nan))[None, :]
        cos = np.asarray(K_eval_train, dtype=np.float64) / norm
    if cos.shape[1] == 0:
        return np.full(len(d_ev), np.nan)
    best = np.where(np.isnan(cos), -np.inf, cos).max(axis=1)
    return np.where(np.isneginf(best), np.nan, best)
