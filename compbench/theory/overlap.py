"""Compositionally structured (overlap) kernels: k(z, z') = κ(which components agree)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Union

import numpy as np

from compbench.errors import CompbenchError

# A weight specification: κ by agreement count (sequence of C+1 values or {count: value}),
# or by agreement pattern ({(1, 0, 1): value, ...}) with integer-count keys as fallback.
Weights = Union[Sequence[float], np.ndarray, Mapping[Union[int, tuple], float]]

__all__ = [
    "NotPSDError",
    "Weights",
    "agreement_counts",
    "agreement_patterns",
    "check_psd",
    "is_psd",
    "is_psd_overlap",
    "overlap_grid_eigenvalues",
    "overlap_kernel",
    "pattern_table",
    "resolve_weights",
]


class NotPSDError(CompbenchError, ValueError):
    """A kernel (Gram) matrix has a clearly negative eigenvalue."""


def _as_cells(cells: np.ndarray | Sequence[Sequence[int]], name: str) -> np.ndarray:
    arr = np.asarray(cells)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (n_cells, n_components), got shape {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        if not np.all(arr == np.round(arr)):
            raise ValueError(f"{name} must hold integer component values")
        arr = arr.astype(np.int64)
    return arr


def _pair_cells(cells_a, cells_b) -> tuple[np.ndarray, np.ndarray]:
    a = _as_cells(cells_a, "cells_a")
    b = a if cells_b is None else _as_cells(cells_b, "cells_b")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"cells_a has {a.shape[1]} components but cells_b has {b.shape[1]}")
    return a, b


def _agree(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return a[:, None, :] == b[None, :, :]


def agreement_counts(cells_a: np.ndarray, cells_b: np.ndarray | None = None) -> np.ndarray:
    """Number of agreeing components for every pair of cells, shape (n_a, n_b)."""
    a, b = _pair_cells(cells_a, cells_b)
    return _agree(a, b).sum(axis=-1, dtype=np.int64)


def agreement_patterns(cells_a: np.ndarray, cells_b: np.ndarray | None = None) -> np.ndarray:
    """Agreement pattern codes (bit c set iff component c agrees), shape (n_a, n_b)."""
    a, b = _pair_cells(cells_a, cells_b)
    bits = np.left_shift(np.int64(1), np.arange(a.shape[1], dtype=np.int64))
    return (_agree(a, b) * bits).sum(axis=-1, dtype=np.int64)


def _count_weights(
    weights: Weights, n_components: int, relative: Mapping[int, float] | None, allow_missing: bool
) -> np.ndarray:
    """κ(0..C) as float64; NaN marks counts left unspecified (only when allow_missing)."""
    n = n_components + 1
    kappa = np.full(n, np.nan)
    if isinstance(weights, Mapping):
        for key, value in weights.items():
            if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
                if not 0 <= key < n:
                    raise ValueError(f"agreement count {key} out of range 0..{n_components}")
                kappa[int(key)] = float(value)
    else:
        arr = np.asarray(weights, dtype=np.float64)
        if arr.shape != (n,):
            raise ValueError(
                f"weights by count need {n} values (0..{n_components} agreeing components), "
                f"got shape {arr.shape}"
            )
        kappa[:] = arr
    for i in sorted((relative or {}).keys(), reverse=True):
        if not 0 <= i < n_components:
            raise ValueError(f"relative weight for count {i}: must be in 0..{n_components - 1}")
        if np.isnan(kappa[i + 1]):
            raise ValueError(f"relative weight for count {i} needs κ({i + 1}), which is not set")
        kappa[i] = float(relative[i]) * kappa[i + 1]
    if not allow_missing and np.isnan(kappa).any():
        missing = [int(i) for i in np.flatnonzero(np.isnan(kappa))]
        raise ValueError(f"no weight given for agreement counts {missing}")
    return kappa


def resolve_weights(
    weights: Weights, n_components: int, relative: Mapping[int, float] | None = None
) -> np.ndarray:
    """κ(0..C) per number of agreeing components; relative[i] sets κ(i) = relative[i]·κ(i+1)."""
    return _count_weights(weights, n_components, relative, allow_missing=False)


def pattern_table(
    weights: Weights, n_components: int, relative: Mapping[int, float] | None = None
) -> np.ndarray:
    """κ for every agreement pattern code 0..2^C−1 (explicit patterns, else by count)."""
    codes = np.arange(2**n_components, dtype=np.int64)
    counts = np.array([bin(int(c)).count("1") for c in codes], dtype=np.int64)
    by_count = _count_weights(weights, n_components, relative, allow_missing=True)
    table = by_count[counts]
    if isinstance(weights, Mapping):
        for key, value in weights.items():
            if isinstance(key, (int, np.integer)) and not isinstance(key, bool):
                continue
            pattern = tuple(int(v) for v in key)
            if len(pattern) != n_components or any(v not in (0, 1) for v in pattern):
                raise ValueError(f"agreement pattern {key!r} must be {n_components} entries of 0/1")
            table[sum(v << c for c, v in enumerate(pattern))] = float(value)
    if np.isnan(table).any():
        code = int(np.flatnonzero(np.isnan(table))[0])
        pattern = tuple((code >> c) & 1 for c in range(n_components))
        raise ValueError(f"no weight for agreement pattern {pattern} nor for its count {counts[code]}")
    return table


def _is_count_spec(weights: Weights) -> bool:
    if not isinstance(weights, Mapping):
        return True
    return all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in weights)


def overlap_kernel(
    cells_a: np.ndarray,
    cells_b: np.ndarray | None,
    weights: Weights,
    relative: Mapping[int, float] | None = None,
    *,
    check: bool = False,
    tol: float = 1e-8,
) -> np.ndarray:
    """Gram matrix κ(A(z, z')) between two sets of cells (cells_b None: cells_a with itself)."""
    a, b = _pair_cells(cells_a, cells_b)
    n_comp = a.shape[1]
    if _is_count_spec(weights):
        kappa = resolve_weights(weights, n_comp, relative)
        K = kappa[agreement_counts(a, b)]
    else:
        K = pattern_table(weights, n_comp, relative)[agreement_patterns(a, b)]
    if check:
        n_values = [len(np.unique(a[:, c])) for c in range(n_comp)]
        lam, mult = overlap_grid_eigenvalues(n_values, weights, relative)
        smallest = float(lam[mult > 0].min())
        if smallest < -tol:
            raise NotPSDError(
                f"overlap weights are not PSD on the full {'×'.join(map(str, n_values))} grid: "
                f"smallest eigenvalue {smallest:.6g} < -{tol:g}"
            )
    return K


def overlap_grid_eigenvalues(
    n_values: Sequence[int], weights: Weights, relative: Mapping[int, float] | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Exact spectrum (eigenvalues, multiplicities) of the overlap Gram on the full grid."""
    # On Π_c {0..n_c−1} the Gram is Σ_A κ(A) ⊗_{c∈A} I ⊗_{c∉A} (J−I); every factor is diagonal in
    # the basis {constant, ⟂ constant} per component, so eigenvalues are indexed by the set T of
    # components taking the ⟂ part: λ(T) = Σ_A κ(A) Π_{c∉A} (−1 if c∈T else n_c−1). This replaces an
    # O(|grid|³) eigendecomposition by O(4^C) and is exact.
    n = np.asarray(n_values, dtype=np.int64)
    if n.ndim != 1 or (n < 1).any():
        raise ValueError(f"n_values must be positive counts per component, got {n_values!r}")
    n_comp = len(n)
    table = pattern_table(weights, n_comp, relative)
    codes = np.arange(2**n_comp, dtype=np.int64)
    bit = ((codes[:, None] >> np.arange(n_comp)) & 1).astype(bool)  # (code, component)
    in_t = bit[:, None, :]
    in_a = bit[None, :, :]
    factor = np.where(in_a, 1.0, np.where(in_t, -1.0, (n - 1).astype(np.float64)))
    lam = (factor.prod(axis=-1) * table[None, :]).sum(axis=1)
    mult = np.where(bit, n - 1, 1).prod(axis=1)
    return lam, mult


def is_psd_overlap(
    n_values: Sequence[int],
    weights: Weights,
    relative: Mapping[int, float] | None = None,
    tol: float = 1e-8,
) -> bool:
    """Whether the overlap weights give a PSD Gram on the full grid (eigenvalues ≥ −tol)."""
    lam, mult = overlap_grid_eigenvalues(n_values, weights, relative)
    return bool(lam[mult > 0].min() >= -tol)


def _min_eigenvalue(K: np.ndarray) -> float:
    K = np.asarray(K, dtype=np.float64)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"a Gram matrix must be square, got shape {K.shape}")
    if K.size == 0:
        return 0.0
    return float(np.linalg.eigvalsh((K + K.T) / 2)[0])


def check_psd(K: np.ndarray, tol: float = 1e-8) -> None:
    """Raise NotPSDError when the smallest eigenvalue of (K+Kᵀ)/2 is below −tol (absolute)."""
    smallest = _min_eigenvalue(K)
    if smallest < -tol:
        raise NotPSDError(f"kernel matrix is not PSD: smallest eigenvalue {smallest:.6g} < -{tol:g}")


def is_psd(K: np.ndarray, tol: float = 1e-8) -> bool:
    """Whether the smallest eigenvalue of (K+Kᵀ)/2 is at least −tol (absolute)."""
    return _min_eigenvalue(K) >= -tol
