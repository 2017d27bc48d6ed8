"""Exact kernel-theory engine: overlap and analytic kernels, kernel regression, additivity, NTKs."""

from compbench.theory.additivity import (
    AdditivityFit,
    ConjunctionLabel,
    additivity_score,
    conjunction_features,
    irrelevant_share,
    pooled_score,
)
from compbench.theory.analytic import relu_kernels, relu_nngp, relu_ntk, standard_mlp_ntk
from compbench.theory.ntk import empirical_ntk
from compbench.theory.ntk_matvec import ntk_cg_regression, ntk_matvec
from compbench.theory.overlap import (
    NotPSDError,
    Weights,
    agreement_counts,
    agreement_patterns,
    check_psd,
    is_psd,
    is_psd_overlap,
    overlap_grid_eigenvalues,
    overlap_kernel,
    pattern_table,
    resolve_weights,
)
from compbench.theory.regression import DEFAULT_RCOND, SymmetricFactor, TruncatedSVD, kernel_regression, kernel_svm, kernel_svr
from compbench.theory.salience import kernel_by_overlap, memorization_leak_slope, saliences

__all__ = [
    "DEFAULT_RCOND",
    "AdditivityFit",
    "ConjunctionLabel",
    "NotPSDError",
    "SymmetricFactor",
    "TruncatedSVD",
    "Weights",
    "additivity_score",
    "irrelevant_share",
    "pooled_score",
    "agreement_counts",
    "agreement_patterns",
    "check_psd",
    "conjunction_features",
    "empirical_ntk",
    "is_psd",
    "is_psd_overlap",
    "kernel_by_overlap",
    "kernel_regression",
    "kernel_svm",
    "kernel_svr",
    "memorization_leak_slope",
    "ntk_cg_regression",
    "ntk_matvec",
    "overlap_grid_eigenvalues",
    "overlap_kernel",
    "pattern_table",
    "relu_kernels",
    "relu_nngp",
    "relu_ntk",
    "resolve_weights",
    "saliences",
    "standard_mlp_ntk",
]
