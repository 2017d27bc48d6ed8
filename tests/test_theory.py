"""Closed-form checks of the kernel-theory engine (compbench.theory), numpy/scikit-learn only."""

from __future__ import annotations

import subprocess
import sys
import warnings
from itertools import product
from math import comb

import numpy as np
import pytest

from compbench.theory import (
    AdditivityFit,
    NotPSDError,
    additivity_score,
    agreement_counts,
    agreement_patterns,
    check_psd,
    conjunction_features,
    is_psd,
    is_psd_overlap,
    kernel_by_overlap,
    kernel_regression,
    kernel_svm,
    kernel_svr,
    memorization_leak_slope,
    overlap_grid_eigenvalues,
    overlap_kernel,
    relu_nngp,
    relu_ntk,
    resolve_weights,
    saliences,
    standard_mlp_ntk,
)

# ---------------------------------------------------------------- tiny task grids (inline)


def grid(*n: int) -> np.ndarray:
    return np.array(list(product(*(range(k) for k in n))), dtype=np.int64)


def onehot(cells: np.ndarray, n: tuple[int, ...]) -> np.ndarray:
    return np.concatenate([np.eye(k)[cells[:, c]] for c, k in enumerate(n)], axis=1)


def addition(anchors: set[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """9×9 symbolic addition, value v = index − 4, train iff a or b is an anchor."""
    cells = grid(9, 9)
    y = (cells[:, 0] - 4.0) + (cells[:, 1] - 4.0)
    train = np.isin(cells[:, 0], list(anchors)) | np.isin(cells[:, 1], list(anchors))
    return cells, y, train


def transitive_equivalence(classes: list[int], n_train: list[int]):
    n = sum(classes)
    cls = np.repeat(np.arange(len(classes)), classes)
    starts = np.cumsum([0] + classes[:-1])
    anchors = [s + i for s, k in zip(starts, n_train) for i in range(k)]
    cells = grid(n, n)
    y = np.where(cls[cells[:, 0]] == cls[cells[:, 1]], 1.0, -1.0)
    train = np.isin(cells[:, 0], anchors) | np.isin(cells[:, 1], anchors)
    return cells, y, train


def context_dependence(held_f1: list[int], held_f2: list[int]):
    cells = grid(2, 6, 6)
    r = np.array([-1, -1, -1, 1, 1, 1.0])
    y = np.where(cells[:, 0] == 0, r[cells[:, 1]], r[cells[:, 2]])
    test = np.isin(cells[:, 1], held_f1) & np.isin(cells[:, 2], held_f2)
    return cells, y, ~test


CD = {"CD-1": ([0], [3]), "CD-2": ([0, 1], [3, 4]), "CD-3": ([0, 1, 2], [3, 4, 5])}


def min_norm(K: np.ndarray, y: np.ndarray, train: np.ndarray, pred: np.ndarray | None = None):
    pred = ~train if pred is None else pred
    return kernel_regression(K[np.ix_(train, train)], K[np.ix_(pred, train)], y[train])


# ---------------------------------------------------------------- import hygiene


def test_import_does_not_pull_torch():
    code = "import sys, compbench.theory; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---------------------------------------------------------------- overlap kernels


def test_agreement_counts_and_patterns():
    a = np.array([[0, 1, 2], [1, 1, 0]])
    b = np.array([[0, 1, 0], [2, 2, 2], [1, 1, 0]])
    assert agreement_counts(a, b).tolist() == [[2, 1, 1], [2, 0, 3]]
    # bit c set iff component c agrees
    assert agreement_patterns(a, b).tolist() == [[0b011, 0b100, 0b010], [0b110, 0b000, 0b111]]
    assert agreement_counts(a).tolist() == [[3, 1], [1, 3]]


def test_resolve_weights_relative_fills_from_top():
    # reference `rel_i`: κ(i) = rel_i·κ(i+1); the plain weight for count 1 is overridden
    kappa = resolve_weights([0.0, 0.5, 0.0, 1.0], 3, relative={2: 0.4, 1: 0.5})
    np.testing.assert_allclose(kappa, [0.0, 0.2, 0.4, 1.0])
    kappa = resolve_weights({3: 2.0}, 3, relative={2: 0.5, 1: 0.5, 0: 0.5})
    np.testing.assert_allclose(kappa, [0.25, 0.5, 1.0, 2.0])
    with pytest.raises(ValueError):
        resolve_weights([0.0, 1.0], 2)
    with pytest.raises(ValueError):
        resolve_weights({2: 1.0}, 2)  # counts 0 and 1 missing
    with pytest.raises(ValueError):
        resolve_weights([0, 0.5, 1], 2, relative={2: 0.5})  # no κ(3)


def test_overlap_kernel_by_count_and_by_pattern():
    cells = grid(2, 3)
    K = overlap_kernel(cells, cells, [0.1, 0.3, 1.0])
    counts = agreement_counts(cells, cells)
    np.testing.assert_allclose(K, np.array([0.1, 0.3, 1.0])[counts])
    # per-pattern weights with count fallback: only "component 0 agrees alone" differs
    Kp = overlap_kernel(cells, None, {(1, 0): 0.5, 0: 0.1, 1: 0.3, 2: 1.0})
    pat = agreement_patterns(cells, cells)
    np.testing.assert_allclose(Kp[pat == 0b01], 0.5)
    np.testing.assert_allclose(Kp[pat == 0b10], 0.3)
    np.testing.assert_allclose(Kp[pat == 0b11], 1.0)
    with pytest.raises(ValueError):
        overlap_kernel(cells, None, {(1, 0): 0.5, (0, 1): 0.2, (1, 1): 1.0})  # (0,0) missing
    with pytest.raises(ValueError):
        overlap_kernel(cells, None, {(1, 0, 1): 0.5, 0: 0, 1: 0, 2: 1})  # wrong pattern length
    with pytest.raises(ValueError):
        overlap_kernel(cells, None, [0.0, 1.0])  # wrong length


def test_non_psd_weights_rejected():
    cells = grid(3, 3)
    bad = [0.0, 0.9, 0.1]
    K = overlap_kernel(cells, None, bad)  # check defaults to off
    assert np.linalg.eigvalsh(K)[0] == pytest.approx(-1.7)  # verified non-PSD by hand
    assert not is_psd(K)
    with pytest.raises(NotPSDError, match="-1.7"):
        check_psd(K)
    with pytest.raises(NotPSDError, match="smallest eigenvalue -1.7"):
        overlap_kernel(cells, None, bad, check=True)
    overlap_kernel(cells, None, [0.0, 0.3, 1.0], check=True)
    check_psd(overlap_kernel(cells, None, [0.0, 0.3, 1.0]))


def test_grid_spectrum_is_exact():
    rng = np.random.default_rng(0)
    n = (2, 3, 4)
    cells = grid(*n)
    for _ in range(3):
        w = {tuple(int(b) for b in np.binary_repr(c, 3)[::-1]): rng.normal() for c in range(8)}
        lam, mult = overlap_grid_eigenvalues(n, w)
        np.testing.assert_allclose(
            np.sort(np.repeat(lam, mult)), np.linalg.eigvalsh(overlap_kernel(cells, None, w)), atol=1e-12
        )


def test_cd_kernel_sweep_psd_count():
    # REFERENCE §3.1: κ(0)=0, κ(3)=1, κ(2)=w₂ ∈ linspace(0,2/3,50), κ(1)=ρ·w₂, ρ ∈ linspace(0,½,50)
    kept = sum(
        is_psd_overlap([2, 6, 6], [0.0, rho * w2, w2, 1.0])
        for w2 in np.linspace(0, 2 / 3, 50)
        for rho in np.linspace(0, 0.5, 50)
    )
    assert kept == 1728


# ---------------------------------------------------------------- regression


def test_kernel_regression_hand_solved_three_cells():
    K = np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 1.0], [0.0, 1.0, 2.0]])
    # K⁻¹ = ¼·[[3,−2,1],[−2,4,−2],[1,−2,3]]  (det 4)
    y = np.array([1.0, 0.0, -1.0])  # α = K⁻¹y = (½, 0, −½)
    Kc = np.array([[1.0, 1.0, 0.0], [0.5, 0.0, 0.0]])
    np.testing.assert_allclose(kernel_regression(K, Kc, y), [0.5, 0.25], atol=1e-14)
    # with an initial function: residual (½, −½, −³⁄₂) → α = (¼, 0, −¾)
    f = kernel_regression(K, Kc, y, f0_train=np.full(3, 0.5), f0_cross=np.array([1.0, 2.0]))
    np.testing.assert_allclose(f, [1.25, 2.125], atol=1e-14)


def test_kernel_regression_ridge_and_errors():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(6, 6))
    K = A @ A.T
    Kc = rng.normal(size=(4, 6))
    y = rng.normal(size=6)
    expected = Kc @ np.linalg.inv(K + 0.3 * np.eye(6)) @ y
    np.testing.assert_allclose(kernel_regression(K, Kc, y, ridge=0.3), expected, rtol=1e-10)
    Y = rng.normal(size=(6, 2))  # several target columns at once
    np.testing.assert_allclose(
        kernel_regression(K, Kc, Y, ridge=0.3), Kc @ np.linalg.solve(K + 0.3 * np.eye(6), Y), rtol=1e-10
    )
    with pytest.raises(ValueError):
        kernel_regression(K, Kc, y, ridge=-1e-3)
    with pytest.raises(ValueError):
        kernel_regression(K, Kc[:, :5], y)


def test_min_norm_on_singular_gram_is_pinv():
    rng = np.random.default_rng(2)
    A = rng.normal(size=(7, 3))
    K = A @ A.T  # rank 3
    Kc = rng.normal(size=(2, 3)) @ A.T
    y = rng.normal(size=7)  # not in the range of K
    expected = Kc @ np.linalg.pinv(K, rtol=1e-10, hermitian=True) @ y
    np.testing.assert_allclose(kernel_regression(K, Kc, y), expected, rtol=1e-8)


@pytest.mark.parametrize(
    "anchors, p", [({4}, 1), ({0, 8}, 2), ({2, 6}, 2)], ids=["extrapolation", "interpolation", "both"]
)
@pytest.mark.parametrize("S", [0.3, 0.4, 0.45, 0.5])
def test_memorization_leak_closed_form(anchors, p, S):
    cells, y, train = addition(anchors)
    f = min_norm(overlap_kernel(cells, None, [0.0, S, 1.0]), y, train)
    m = memorization_leak_slope(p, S)
    np.testing.assert_allclose(f, m * y[~train], atol=1e-9)


def test_memorization_leak_slopes_and_asymmetric_offset():
    slopes = [memorization_leak_slope(1, S) for S in (0.3, 0.4, 0.45, 0.5)]
    np.testing.assert_allclose(slopes, [0.429, 0.667, 0.818, 1.0], atol=5e-4)
    slopes = [memorization_leak_slope(2, S) for S in (0.3, 0.4, 0.45)]
    np.testing.assert_allclose(slopes, [0.6, 0.8, 0.9], atol=1e-12)
    cells, y, train = addition({0})  # anchor value −4: non-zero mean
    f = min_norm(overlap_kernel(cells, None, [0.0, 0.3, 1.0]), y, train)
    slope, intercept = np.polyfit(y[~train], f, 1)
    assert slope == pytest.approx(0.429, abs=5e-4)
    assert intercept == pytest.approx(-0.826, abs=5e-4)
    np.testing.assert_allclose(f, slope * y[~train] + intercept, atol=1e-9)  # exactly linear


def test_svr_reference_slopes():
    # REFERENCE §3.5: SVR(C=1e10, ε=0.1, free intercept) slopes a few % below min-norm
    for anchors, expected in [({4}, [0.414, 0.644, 0.791, 0.967]), ({0, 8}, [0.579, 0.769, 0.864, 0.957])]:
        cells, y, train = addition(anchors)
        got = []
        for S in (0.3, 0.4, 0.45, 0.5):
            K = overlap_kernel(cells, None, [0.0, S, 1.0])
            f, converged = kernel_svr(K[np.ix_(train, train)], K[np.ix_(~train, train)], y[train])
            assert converged
            got.append(np.polyfit(y[~train], f, 1)[0])
        np.testing.assert_allclose(got, expected, atol=1.5e-3)


def test_kernel_svm_validation_and_convergence_flag():
    cells, y, train = context_dependence(*CD["CD-3"])
    K = overlap_kernel(cells, None, [0.0, 0.2035, 0.0942 + 2 * 0.2035, 1.0])
    Kt, Kc = K[np.ix_(train, train)], K[np.ix_(~train, train)]
    with pytest.raises(ValueError):
        kernel_svm(Kt, Kc, np.where(y[train] > 0, 1.0, 0.0))
    with pytest.raises(ValueError):
        kernel_svm(Kt, Kc, np.ones(train.sum()))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a leaked ConvergenceWarning would fail here
        _, converged = kernel_svm(Kt, Kc, y[train], max_iter=1)
        assert not converged
        _, converged = kernel_svm(Kt, Kc, y[train])
        assert converged


# ---------------------------------------------------------------- task closed forms


@pytest.mark.parametrize("classes, n_train", [([2, 2], [1, 1]), ([5, 5], [1, 1])])
@pytest.mark.parametrize("S", [0.1, 0.3, 0.4264, 0.49])
def test_transitive_equivalence_held_out_is_zero(classes, n_train, S):
    cells, y, train = transitive_equivalence(classes, n_train)
    f = min_norm(overlap_kernel(cells, None, [0.0, S, 1.0]), y, train)
    assert np.abs(f).max() < 1e-9


def transitive_ordering(n: int = 7):
    cells = np.array([(a, b) for a in range(n) for b in range(n) if a != b])
    y = np.where(cells[:, 0] < cells[:, 1], 1.0, -1.0)
    dist = np.abs(cells[:, 0] - cells[:, 1])
    return cells, y, dist == 1, dist


@pytest.mark.parametrize("S", [0.1, 0.3, 0.45])
def test_transitive_ordering_generalizes(S):
    cells, y, train, _ = transitive_ordering()
    f = min_norm(overlap_kernel(cells, None, [0.0, S, 1.0], check=True), y, train)
    assert np.mean(np.sign(f) == y[~train]) == 1.0


def test_transitive_ordering_symbolic_distance_margins():
    cells, y, train, dist = transitive_ordering()
    f = min_norm(overlap_kernel(cells, None, [0.0, 0.3, 1.0]), y, train)
    margins = [np.mean((f * y[~train])[dist[~train] == d]) for d in range(2, 7)]
    np.testing.assert_allclose(margins, [0.27, 0.36, 0.48, 0.66, 1.00], atol=6e-3)
    assert np.all(np.diff(margins) > 0)


@pytest.mark.parametrize("k, invariance, partial", [(0.2, 0.25, 0.0870), (0.4, 0.667, 0.471)])
def test_symmetry_closed_forms(k, invariance, partial):
    cells = grid(2, 2)
    y = np.where(cells[:, 0] == 1, 1.0, -1.0)
    K = overlap_kernel(cells, None, [0.0, k, 1.0])
    train = cells[:, 1] == 0  # invariance: component 2 fixed in training
    margin = np.mean(min_norm(K, y, train) * y[~train])
    assert margin == pytest.approx(k / (1 - k), abs=1e-12)
    assert margin == pytest.approx(invariance, abs=5e-4)
    train = ~((cells[:, 0] == 1) & (cells[:, 1] == 1))  # partial exposure: all but (1,1)
    margin = np.mean(min_norm(K, y, train) * y[~train])
    assert margin == pytest.approx(2 * k**2 / (1 - 2 * k**2), abs=1e-12)
    assert margin == pytest.approx(partial, abs=5e-4)


CD_KERNELS = {
    "Rep.1": ((0.1010, 0.1391), {"CD-3": 1.0, "CD-2": 1.0, "CD-1": 1.0}),
    "Rep.2": ((0.2035, 0.0942), {"CD-3": 0.0, "CD-2": 1.0, "CD-1": 1.0}),
    "ReLU-L1": ((0.2707, 0.0559), {"CD-3": 0.0, "CD-2": 1.0, "CD-1": 1.0}),
}


@pytest.mark.parametrize("name", list(CD_KERNELS))
def test_context_dependence_shortcut_bias(name):
    (s1, s2), svm_expected = CD_KERNELS[name]
    for cd, (held_f1, held_f2) in CD.items():
        cells, y, train = context_dependence(held_f1, held_f2)
        K = overlap_kernel(cells, None, [0.0, s1, s2 + 2 * s1, 1.0], check=True)
        f, converged = kernel_svm(K[np.ix_(train, train)], K[np.ix_(~train, train)], y[train])
        assert converged
        assert np.mean(np.sign(f) == y[~train]) == svm_expected[cd], cd
        assert np.mean(np.sign(min_norm(K, y, train)) == y[~train]) == 1.0, cd


# ---------------------------------------------------------------- saliences and analytic kernels


def test_saliences_inclusion_exclusion():
    np.testing.assert_allclose(saliences([0.0, 0.3, 1.0]), [0.0, 0.3, 0.4])
    kappa = np.array([0.0, 0.1010, 0.1391 + 2 * 0.1010, 1.0])
    S = saliences(kappa)
    np.testing.assert_allclose(S[1:3], [0.1010, 0.1391])
    assert sum(comb(3, k) * S[k] for k in range(4)) == pytest.approx(1.0)  # κ(0) = 0
    with pytest.raises(ValueError):
        saliences([1.0, 1.0])


def test_relu_nngp_saliences():
    for n in [(9, 9), (3, 4)]:
        cells = grid(*n)
        mean, dev = kernel_by_overlap(relu_nngp(onehot(cells, n), depth=1), cells)
        assert dev.max() < 1e-12  # one-hot inputs: a function of the overlap only
        assert saliences(mean)[1] == pytest.approx(0.4264, abs=5e-5)
    n3 = (2, 6, 6)
    cells = grid(*n3)
    mean, _ = kernel_by_overlap(relu_nngp(onehot(cells, n3), depth=3), cells)
    np.testing.assert_allclose(saliences(mean)[1:3], [0.2035, 0.0942], atol=5e-5)  # Rep. 2
    mean, _ = kernel_by_overlap(relu_nngp(onehot(cells, n3), depth=1), cells)
    np.testing.assert_allclose(saliences(mean)[1:3], [0.2707, 0.0559], atol=5e-5)  # ReLU-L1


def test_relu_kernels_depth_one_closed_form():
    rng = np.random.default_rng(3)
    x, z = rng.normal(size=(4, 5)), rng.normal(size=(3, 5))
    sw2, sb2 = 1.7, 0.2
    s0 = sw2 * x @ z.T / 5 + sb2
    nx = sw2 * (x**2).sum(1) / 5 + sb2
    nz = sw2 * (z**2).sum(1) / 5 + sb2
    norm = np.sqrt(np.outer(nx, nz))
    th = np.arccos(s0 / norm)
    s1 = sw2 / (2 * np.pi) * norm * (np.sin(th) + (np.pi - th) * np.cos(th)) + sb2
    ntk = s0 * sw2 / (2 * np.pi) * (np.pi - th) + s1
    np.testing.assert_allclose(relu_nngp(x, z, depth=1, sigma_w2=sw2, sigma_b2=sb2), s1, rtol=1e-12)
    np.testing.assert_allclose(relu_ntk(x, z, depth=1, sigma_w2=sw2, sigma_b2=sb2), ntk, rtol=1e-12)
    np.testing.assert_allclose(relu_ntk(x, depth=0), 2 * x @ x.T / 5, rtol=1e-12)
    K = relu_ntk(x, depth=4)
    np.testing.assert_allclose(K, K.T, rtol=1e-12)


def test_standard_mlp_ntk_matches_ntk_parameterisation_without_bias():
    # Without biases, depth 1: Θ_std = H/(2σ²)·Σ¹ + d/(2σ²)·Σ⁰Σ̇¹ with σ_w² = 2σ², σ_b² = 0.
    rng = np.random.default_rng(4)
    x = rng.normal(size=(5, 6))
    s, H, d = 0.7, 300, 6
    ntk, nngp = standard_mlp_ntk(x, width=H, depth=1, init_scale=s, bias=False)
    sig1 = relu_nngp(x, depth=1, sigma_w2=2 * s**2)
    theta1 = relu_ntk(x, depth=1, sigma_w2=2 * s**2)
    np.testing.assert_allclose(ntk, H / (2 * s**2) * sig1 + d / (2 * s**2) * (theta1 - sig1), rtol=1e-12)
    np.testing.assert_allclose(nngp, sig1, rtol=1e-12)
    # depth 0 is a linear model: Θ = x·x' + 1
    ntk0, _ = standard_mlp_ntk(x, width=H, depth=0, init_scale=s)
    np.testing.assert_allclose(ntk0, x @ x.T + 1, rtol=1e-12)


def test_kernel_by_overlap_reports_spread():
    cells = grid(3, 3)
    K = overlap_kernel(cells, None, [0.0, 0.3, 1.0])
    K[0, 1] += 0.05  # break symmetry in one count-1 entry
    mean, dev = kernel_by_overlap(K, cells)
    assert mean[2] == 1.0 and dev[2] == 0.0
    assert dev[1] == pytest.approx(0.05 - 0.05 / np.sum(agreement_counts(cells) == 1))


# ---------------------------------------------------------------- additivity


def kernel_fit(cells, y, train, kappa):
    K = overlap_kernel(cells, None, kappa)
    return kernel_regression(K[np.ix_(train, train)], K[:, train], y[train])


def test_kernel_models_score_one():
    tasks = [
        (*addition({4}), [0.0, 0.3, 1.0]),
        (*addition({0}), [0.1, 0.45, 1.0]),
        (*addition({2, 6}), [0.0, 0.2, 1.0]),
        (*context_dependence(*CD["CD-3"]), [0.0, 0.2035, 0.0942 + 2 * 0.2035, 1.0]),
        (*context_dependence(*CD["CD-2"]), [0.0, 0.1010, 0.1391 + 2 * 0.1010, 1.0]),
        (*transitive_equivalence([5, 5], [4, 4]), [0.0, 0.3, 1.0]),
    ]
    for cells, y, train, kappa in tasks:
        assert additivity_score(cells, kernel_fit(cells, y, train, kappa), train) == pytest.approx(1.0, abs=1e-8)
    # SVC decision values are kernel models too
    cells, y, train = context_dependence(*CD["CD-3"])
    K = overlap_kernel(cells, None, [0.0, 0.2035, 0.0942 + 2 * 0.2035, 1.0])
    f, _ = kernel_svm(K[np.ix_(train, train)], K[:, train], y[train])
    assert additivity_score(cells, f, train) == pytest.approx(1.0, abs=1e-8)


def test_random_predictions_score_low_and_batch_matches():
    cells, y, train = addition({4})
    fit = AdditivityFit(cells, train)
    preds = np.random.default_rng(0).normal(size=(6, len(cells)))
    scores = fit.score(preds)
    assert scores.shape == (6,)
    assert np.all(scores < 0.5)
    np.testing.assert_allclose(scores, [fit.score(p) for p in preds], rtol=1e-12)
    assert fit.score(y) == pytest.approx(1.0, abs=1e-12)  # the additive target itself


def test_additivity_degenerate_held_out_variance():
    # transitive equivalence: kernel predictions are exactly 0 on every held-out pair
    cells, y, train = transitive_equivalence([2, 2], [1, 1])
    f = kernel_fit(cells, y, train, [0.0, 0.3, 1.0])
    assert np.abs(f[~train]).max() < 1e-12
    assert additivity_score(cells, f, train) == 1.0
    fit = AdditivityFit(cells, train)
    assert fit.score(np.zeros(len(cells))) == 1.0
    # held-out values non-additive but ~1e-8 of the overall scale: treated as zero variance
    g = np.where(train, 1.0, 1e-8 * np.array([1.0, -3.0, 2.0, 0.5])[np.cumsum(~train) % 4])
    assert fit.score(g) == 1.0
    g[~train] *= 1e4  # now clearly non-degenerate and not additive
    assert fit.score(g) < 0.9


def test_conjunction_features_and_coefficients():
    cells, y, train = addition({0})
    X, labels = conjunction_features(cells, train)
    # intercept + 9 + 9 first-order values + 17 training cells
    assert X.shape == (81, 36) and len(labels) == 36
    assert labels[0] == ((), ())
    assert ((0,), (3,)) in labels and ((0, 1), (0, 5)) in labels and ((0, 1), (3, 5)) not in labels
    f = kernel_fit(cells, y, train, [0.0, 0.3, 1.0])
    fit = AdditivityFit(cells, train)
    coef = fit.coefficients(f)
    w = np.array([coef[lab] for lab in labels])
    np.testing.assert_allclose(X @ w, f, atol=1e-10)  # exactly additive
    # reference "item value" = first-order coefficient + intercept/2: its slope is the leak factor m
    values = [coef[((0,), (i,))] + coef[((), ())] / 2 for i in range(1, 9)]
    assert np.polyfit(np.arange(1, 9) - 4.0, values, 1)[0] == pytest.approx(
        memorization_leak_slope(1, 0.3), abs=1e-9
    )
    batch = fit.coefficients(np.stack([f, 2 * f]))
    np.testing.assert_allclose(batch[((0,), (3,))], [coef[((0,), (3,))], 2 * coef[((0,), (3,))]])
