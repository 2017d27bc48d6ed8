"""One-pass analytic kernels, exact diagonals, symmetric Grams and eigendecomposition solves (issue 25).

Today's engine against the reference implementations it replaced (tests/kernel_reference.py).
"""

from __future__ import annotations

import inspect
from pathlib import Path

import numpy as np
import pytest
from kernel_reference import old_adapter_solve, old_engine_solve, old_relu_recursion

from compbench import theory
from compbench.theory.regression import SymmetricFactor


def _rel(new: np.ndarray, old: np.ndarray) -> float:
    """max |new − old| / max |old|: the difference on the kernel's (or prediction's) own scale."""
    scale = float(np.abs(old).max())
    return float(np.abs(new - old).max()) / scale if scale else float(np.abs(new).max())


def test_one_kernel_functions_show_relu_kernels_parameters() -> None:
    # relu_nngp and relu_ntk pick one kernel of relu_kernels; help() shows its parameters and their own names.
    for fn in (theory.relu_nngp, theory.relu_ntk):
        sig = inspect.signature(fn)
        assert sig.parameters == inspect.signature(theory.relu_kernels).parameters
        assert sig.return_annotation == "np.ndarray" and fn.__name__ in ("relu_nngp", "relu_ntk")
        assert fn.__doc__.startswith(("NNGP kernel Σ^depth", "NTK Θ^depth"))


@pytest.mark.parametrize("depth", [1, 2, 3])
@pytest.mark.parametrize("sigma_b2", [0.0, 0.1])
def test_one_pass_kernels_equal_the_two_pass_recursion(depth: int, sigma_b2: float) -> None:
    rng = np.random.default_rng(depth)
    x, y = rng.normal(size=(120, 9)), rng.normal(size=(80, 9))
    x[3] = 0.0  # a zero-variance input: relu' = 0 there in both
    nngp, ntk = theory.relu_kernels(x, y, depth, 2.0, sigma_b2)
    old_nngp, old_ntk = old_relu_recursion(x, y, depth, 2.0, sigma_b2)
    assert _rel(nngp, old_nngp) < 1e-12 and _rel(ntk, old_ntk) < 1e-12
    np.testing.assert_array_equal(theory.relu_ntk(x, y, depth, 2.0, sigma_b2), ntk)
    np.testing.assert_array_equal(theory.relu_nngp(x, y, depth, 2.0, sigma_b2), nngp)
    np.testing.assert_array_equal(theory.relu_ntk(x_a=x, x_b=y, depth=depth, sigma_b2=sigma_b2), ntk)  # its keywords
    # the symmetric Gram: equal off the diagonal, exactly symmetric, and the same with x_b = a copy of x
    nngp_s, ntk_s = theory.relu_kernels(x, None, depth, 2.0, sigma_b2)
    old_nngp_s, old_ntk_s = old_relu_recursion(x, None, depth, 2.0, sigma_b2)
    off = ~np.eye(len(x), dtype=bool)
    assert _rel(nngp_s[off], old_nngp_s[off]) < 1e-12 and _rel(ntk_s[off], old_ntk_s[off]) < 1e-12
    assert np.array_equal(ntk_s, ntk_s.T) and np.array_equal(nngp_s, nngp_s.T)
    copy_nngp, copy_ntk = theory.relu_kernels(x, x.copy(), depth, 2.0, sigma_b2)
    np.testing.assert_array_equal(copy_ntk, ntk_s)
    np.testing.assert_array_equal(copy_nngp, nngp_s)


def test_symmetric_gram_in_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Several row blocks (the mirrored lower parts) give the one-block answer bitwise."""
    from compbench.theory import analytic

    x = np.random.default_rng(0).normal(size=(97, 5))
    whole = analytic.relu_kernels(x, None, 2, 2.0, 0.1)
    monkeypatch.setattr(analytic, "_BLOCK_ELEMENTS", 97 * 7)
    blocked = analytic.relu_kernels(x, None, 2, 2.0, 0.1)
    for a, b in zip(whole, blocked):
        np.testing.assert_array_equal(a, b)
    cross = analytic.relu_kernels(x, x[:40] + 1.0, 2, 2.0, 0.1)
    monkeypatch.setattr(analytic, "_BLOCK_ELEMENTS", 1 << 16)
    for a, b in zip(cross, analytic.relu_kernels(x, x[:40] + 1.0, 2, 2.0, 0.1)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
def test_diagonal_is_the_closed_form(depth: int) -> None:
    """Unit-norm inputs in d = 4, σ_w² = 2, σ_b² = 0: Σ(x, x) = 2|x|²/d = 1/2, Θ(x, x) = (L + 1)/2, exactly."""
    h = 0.5
    x = np.array([[1, 0, 0, 0], [0, 0, 0, -1], [h, h, h, h], [h, -h, h, -h], [-h, -h, -h, h]], dtype=np.float64)
    nngp, ntk = theory.relu_kernels(x, depth=depth)
    np.testing.assert_array_equal(np.diag(nngp), np.full(5, 0.5))
    np.testing.assert_array_equal(np.diag(ntk), np.full(5, (depth + 1) / 2))
    # the old recursion's arccos(1 − ulp) put these off by up to ~1e-8 (depth ≥ 1); this one is exact
    # with a bias: Σ_{l+1} = σ_w² Σ_l / 2 + σ_b², Θ_{l+1} = Θ_l σ_w² / 2 + Σ_{l+1}, from Σ_0 = Θ_0 = 2/4 + 0.1
    sig = theta = 0.5 + 0.1
    for _ in range(depth):
        sig = 2.0 * (sig / 2) + 0.1
        theta = theta * (2.0 * 0.5) + sig
    nngp_b, ntk_b = theory.relu_kernels(x, depth=depth, sigma_b2=0.1)
    np.testing.assert_array_equal(np.diag(nngp_b), np.full(5, sig))
    np.testing.assert_array_equal(np.diag(ntk_b), np.full(5, theta))


def test_diagonal_closed_form_on_random_inputs() -> None:
    """Any inputs: the diagonal is the scalar recursion on the norms (no arccos)."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(50, 7)) * rng.uniform(0.1, 3, size=(50, 1))
    x[7] = 0.0
    q = 2.0 * np.einsum("ij,ij->i", x, x) / 7 + 0.05
    ntk = q.copy()
    for _ in range(3):
        e_dot = np.where(q > 0, 0.5, 0.0)
        q = 2.0 * (q / 2) + 0.05
        ntk = ntk * (2.0 * e_dot) + q
    nngp_s, ntk_s = theory.relu_kernels(x, depth=3, sigma_b2=0.05)
    np.testing.assert_array_equal(np.diag(nngp_s), q)
    np.testing.assert_array_equal(np.diag(ntk_s), ntk)


def test_standard_mlp_ntk_symmetric_and_exact_diagonal() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(60, 6))
    ntk, nngp = theory.standard_mlp_ntk(x, width=100, depth=2)
    assert np.array_equal(ntk, ntk.T) and np.array_equal(nngp, nngp.T)
    ntk2, _ = theory.standard_mlp_ntk(x, x.copy(), width=100, depth=2)
    np.testing.assert_array_equal(ntk2, ntk)
    # the cross path (x_b a permutation of x, so not the symmetric Gram): each input paired with itself by the
    # closed form, bit for bit the symmetric Gram's diagonal; every other pair equal to the symmetric Gram's
    perm = np.random.default_rng(3).permutation(60)
    cross, _ = theory.standard_mlp_ntk(x, x[perm], width=100, depth=2)
    back = np.argsort(perm)
    assert np.array_equal(cross[np.arange(60), back], np.diag(ntk))
    assert _rel(cross[:, back], ntk) < 1e-12


@pytest.mark.parametrize("depth", [1, 3])
def test_an_input_paired_with_itself_is_the_same_number_in_every_kernel(depth: int) -> None:
    """K(evaluate, train) on evaluation inputs that include the training inputs repeats K(train, train) at
    every input's pair with itself (θ = 0 by the closed form, not arccos(1 − ulp)): kernel regression then
    interpolates its training cells to round-off (it was off by 1.7e-6 on a Gram of condition 1e6)."""
    rng = np.random.default_rng(depth)
    cells = np.stack(np.meshgrid(*[np.linspace(-1, 1, 8)] * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    cells = cells + 0.01 * rng.normal(size=cells.shape)  # real-valued inputs: their cosines are not exactly 1
    train = rng.random(len(cells)) < 0.75
    x_tr = cells[train]
    K_tr = theory.relu_ntk(x_tr, None, depth)
    K_ev = theory.relu_ntk(cells, x_tr, depth)
    rows = np.flatnonzero(train)
    assert np.array_equal(K_ev[rows, np.arange(len(rows))], np.diag(K_tr))
    assert _rel(K_ev[rows], K_tr) < 1e-12
    y = rng.normal(size=len(x_tr))
    pred = theory.kernel_regression(K_tr, K_ev, y)
    assert np.abs(pred[rows] - y).max() < 1e-9 * np.abs(y).max()
    # a training set with a duplicated input: both copies' pairs take the closed form too
    dup = np.concatenate([x_tr[:20], x_tr[:1]])
    K_dup = theory.relu_ntk(dup, None, depth)
    assert K_dup[0, 20] == K_dup[20, 0] == K_dup[0, 0] == K_dup[20, 20]


def test_empirical_ntk_triangle_is_symmetric_and_equals_the_full_gram() -> None:
    torch = pytest.importorskip("torch")
    from compbench.theory import empirical_ntk

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(6, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2)).double()
    x = torch.rand(90, 6, dtype=torch.float64)  # float64: chunks of other sizes round a float32 forward differently
    for kw in ({}, {"structured": False, "chunk_size": 16}, {"max_memory": 1 << 16}, {"outputs": "full", "max_memory": 1 << 16}):
        K = empirical_ntk(net, x, **kw)
        assert torch.equal(K, K.T), kw
        assert torch.equal(empirical_ntk(net, x, x.clone(), **kw), K), kw  # K(x, x) asked with x twice: the same triangle
        # the full Gram, every block computed (rectangular calls: not the symmetric path)
        full = torch.cat([empirical_ntk(net, x[:45], x, **kw), empirical_ntk(net, x[45:], x, **kw)])
        assert _rel(K.numpy(), full.numpy()) < 1e-12, kw


# ----------------------------------------------------------------------------------------- solves


def _spd(n: int, rank: int, seed: int, cond: float = 1e6) -> np.ndarray:
    rng = np.random.default_rng(seed)
    q, _ = np.linalg.qr(rng.normal(size=(n, n)))
    lam = np.zeros(n)
    lam[:rank] = np.geomspace(1.0, 1.0 / cond, rank)
    K = (q * lam) @ q.T
    return (K + K.T) / 2


@pytest.mark.parametrize("rank", [40, 25])
def test_eigh_min_norm_equals_lstsq(rank: int) -> None:
    K = _spd(40, rank, rank)
    rng = np.random.default_rng(1)
    y = rng.normal(size=(40, 3))
    Kc = rng.normal(size=(10, 40)) @ K  # cross rows in K's row space, as a kernel's are
    new = theory.kernel_regression(K, Kc, y)
    assert _rel(new, old_engine_solve(K, Kc, y)) < 1e-9
    for j in range(3):  # one factorisation for every column = a solve per column
        np.testing.assert_allclose(theory.kernel_regression(K, Kc, y[:, j]), new[:, j], rtol=0, atol=1e-9 * np.abs(new).max())  # cond 1e6: gemv vs gemm order


def test_singular_gram_hand_computed_min_norm() -> None:
    """K = [[1, 1], [1, 1]] (rank 1; its round-off eigenvalue must be dropped): K⁺ = K / 4, α = K⁺ y."""
    K = np.ones((2, 2))
    y = np.array([1.0, 3.0])
    Kc = np.array([[1.0, 1.0], [2.0, 2.0], [0.0, 0.0]])
    # α = (y₁ + y₂)/4 · (1, 1) = (1, 1); f = Kc α = (2, 4, 0)
    np.testing.assert_allclose(SymmetricFactor(K).pinv_apply(y), [1.0, 1.0], rtol=1e-15, atol=1e-15)
    np.testing.assert_allclose(theory.kernel_regression(K, Kc, y), [2.0, 4.0, 0.0], rtol=1e-15, atol=1e-15)
    # the additive overlap kernel on a 2 × 2 grid, κ = (0, 1, 2): k(a, b) = Σ_c 1[a_c = b_c], rank 3 of 4
    cells = np.array([[0, 0], [0, 1], [1, 0], [1, 1]])
    G = theory.overlap_kernel(cells, cells, {0: 0.0, 1: 1.0, 2: 2.0})
    assert np.linalg.matrix_rank(G) == 3
    yg = np.array([1.0, 0.0, 0.0, 0.0])  # not additive: its min-norm fit is the projection onto range(G)
    f = theory.kernel_regression(G, G, yg)
    # range(G) = span of the additive functions a + b_0[z_0] + c_1[z_1]; (1, 0, 0, 0) − f ∝ the interaction (1, −1, −1, 1)
    np.testing.assert_allclose(f, [0.75, 0.25, 0.25, -0.25], atol=1e-14)
    assert _rel(f, old_engine_solve(G, G, yg)) < 1e-12


def test_rank_decision_matches_lstsq_near_the_cutoff() -> None:
    """Eigenvalues 1e-11 (kept) and 1e-13 (dropped) around rcond 1e-12, as lstsq decides.

    The fit on the training inputs, K K⁺ y, is the projection of y on the kept eigenvectors: q₀ + q₃
    for y = q₀ + q₃ + q₄ (α itself is only defined to cond·ε ≈ 1e-5 here, in either solver).
    """
    q, _ = np.linalg.qr(np.random.default_rng(3).normal(size=(6, 6)))
    K = (q * np.array([1.0, 0.5, 1e-3, 1e-11, 1e-13, 0.0])) @ q.T
    K = (K + K.T) / 2
    y = q[:, 3] + q[:, 4] + q[:, 0]
    for solve in (theory.kernel_regression, old_engine_solve):
        np.testing.assert_allclose(solve(K, K, y), q[:, 0] + q[:, 3], atol=1e-4)


def test_ridge_by_cholesky_equals_solve() -> None:
    K = _spd(30, 30, 7, cond=1e8)
    y = np.random.default_rng(0).normal(size=30)
    assert _rel(theory.kernel_regression(K, K, y, ridge=1e-3), old_engine_solve(K, K, y, ridge=1e-3)) < 1e-12
    # an indefinite K + ridge·I falls back to LU
    A = np.diag([1.0, -2.0, 3.0])
    np.testing.assert_allclose(theory.kernel_regression(A, np.eye(3), np.ones(3), ridge=0.5), [1 / 1.5, -1 / 1.5, 1 / 3.5])


def test_non_symmetric_and_non_finite_grams_keep_the_old_paths() -> None:
    K = np.array([[2.0, 1.0], [0.5, 3.0]])
    y = np.array([1.0, 2.0])
    np.testing.assert_array_equal(theory.kernel_regression(K, K, y), old_engine_solve(K, K, y))
    with pytest.raises(np.linalg.LinAlgError):
        theory.kernel_regression(np.array([[np.nan, 1.0], [1.0, 1.0]]), np.ones((1, 2)), y)


# ------------------------------------------------------------ bundled suites against the old engine


def _suite_kernel_cells(name: str, per_model: int):  # noqa: ANN202
    """A few min-norm kernel cells of a bundled suite: (label, adapter, encoded task)."""
    from compbench.adapters import get_adapter
    from compbench.runner.cells import expand_jobs, prepare_tasks
    from compbench.suite import load_suite

    loaded = load_suite(name)
    jobs = expand_jobs(loaded, prepare_tasks(loaded), "cpu")
    seen: dict[str, int] = {}
    for job in jobs:
        model = job.model
        group = model.group or model.id
        if model.adapter not in ("kernel", "mlp") or seen.get(group, 0) >= per_model:
            continue
        adapter = get_adapter(model.adapter)(model.params, device="cpu")
        if model.adapter == "mlp" and (getattr(model.params, "theory", "analytic") != "analytic" or model.params.loss != "mse"):
            continue
        if model.adapter == "kernel" and model.params.objective not in ("min_norm", "ridge"):
            continue
        seen[group] = seen.get(group, 0) + 1
        yield f"{model.id}/{job.task.entry.id}", adapter, job.task.encoded


def _images_cells():  # noqa: ANN202
    """kernel-limits-images has no kernel model: the relu NTK (depth 1 and 3) on its digit tasks."""
    from compbench.adapters import get_adapter
    from compbench.adapters.kernel import KernelParams
    from compbench.runner.cells import prepare_tasks
    from compbench.suite import load_suite

    loaded = load_suite("kernel-limits-images")
    for tid, task in prepare_tasks(loaded).items():
        for depth in (1, 3):
            adapter = get_adapter("kernel")(KernelParams(kernel="relu_ntk", depth=depth), device="cpu")
            yield f"relu_ntk(depth={depth})/{tid}", adapter, task.encoded


def _grams(adapter, enc, old: bool, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN001, ANN202
    """The cell's (K_train, K_eval) from today's kernels, or (old) from the reference recursion."""
    from compbench.theory import analytic

    with monkeypatch.context() as m:
        if old:
            import kernel_reference as ref

            m.setattr(theory, "relu_ntk", ref.old_relu_ntk)
            m.setattr(theory, "relu_nngp", ref.old_relu_nngp)
            m.setattr(analytic, "_relu_moments", ref.old_relu_moments)
            m.setattr(analytic, "_same_inputs", lambda a, b, x_b: False)
        if hasattr(adapter, "_gram"):
            # the old adapter built K_train as K(train, train) with two separate batches
            return adapter._gram(enc.train, enc.train), adapter._gram(enc.evaluate, enc.train)
        return adapter.kernel(enc.train, enc.train), adapter.kernel(enc.evaluate, enc.train)


# modular-teacher's solves (its Grams the largest, 34 s of CI's slow tier) equalled the old path to 3.3e-9 when
# this comparison was made; the solver they go through is the one the other suites' cells check here.
SUITES = ["kernel-limits", "redundant-input", "slot-decoder", "kernel-limits-images"]


@pytest.mark.slow
@pytest.mark.parametrize("suite", SUITES)
def test_bundled_suites_solves_equal_the_old_lstsq_path(suite: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Representative min-norm cells of every bundled suite: the eigh solve against the old SVD paths.

    Two numbers per cell (printed with -s): `solve` — today's kernel_regression against the old
    engine (lstsq, rcond 1e-12) and the old adapter fit (gelsd) on the same Gram; `total` —
    today's kernels and solve against the old kernels (two-pass recursion, arccos diagonal) and
    old solve, i.e. how much a stored prediction moves. `solve` must stay within 1e-9 of the
    predictions' scale. `total` also carries the diagonal's correction (the old arccos diagonal was
    off by up to ~1e-8, which a solve amplifies by the Gram's conditioning): measured 1.4e-7 on
    slot-decoder's slot-additive kernel, 3.3e-9 on modular-teacher, 4.9e-8 on relu NTKs of the
    images suite's digits, ≤ 1e-10 on kernel-limits and redundant-input; bounded here by 1e-6.
    """
    cells = list(_images_cells() if suite == "kernel-limits-images" else _suite_kernel_cells(suite, per_model=3))
    assert cells, f"no min-norm kernel cells found in {suite}"
    worst_solve = worst_total = 0.0
    for label, adapter, enc in cells:
        y = enc.train.regression_targets()
        K_tr, K_ev = _grams(adapter, enc, False, monkeypatch)
        new = theory.kernel_regression(K_tr, K_ev, y)
        solve = max(_rel(new, old_engine_solve(K_tr, K_ev, y)), _rel(new, old_adapter_solve(K_tr, K_ev, y)))
        old_K_tr, old_K_ev = _grams(adapter, enc, True, monkeypatch)
        total = _rel(new, old_engine_solve(old_K_tr, old_K_ev, y))
        print(f"{suite} {label}: n_train={len(K_tr)} solve={solve:.2e} total={total:.2e}")
        worst_solve, worst_total = max(worst_solve, solve), max(worst_total, total)
        assert solve < 1e-9, label
        assert total < 1e-6, label
    print(f"{suite}: {len(cells)} cells, max relative difference solve={worst_solve:.2e} total={worst_total:.2e}")


def test_large_well_conditioned_gram_is_solved_by_cholesky_and_equals_eigh_and_lstsq() -> None:
    from compbench.theory.regression import CHOLESKY_FROM

    n = CHOLESKY_FROM + 44
    K = _spd(n, n, 3, cond=1e4)
    K = np.triu(K) + np.triu(K, 1).T  # bitwise symmetric
    y = np.random.default_rng(2).normal(size=(n, 2))
    f = SymmetricFactor(K)
    assert f.method == "cholesky" and 1e4 <= f.condition <= 1e4 * n
    lam = np.linalg.eigvalsh(K)[0]
    assert lam / np.sqrt(n) <= f.smallest <= lam * np.sqrt(n) * 1.01
    fast = f.pinv_apply(y)
    assert _rel(fast, np.linalg.lstsq(K, y, rcond=1e-12)[0]) < 1e-9
    w, V = np.linalg.eigh(K)
    assert _rel(fast, V @ ((V.T @ y) / w[:, None])) < 1e-9
    # a cutoff that would drop directions (rcond·cond ≥ 1/100): the eigendecomposition answers, as lstsq
    cut = f.pinv_apply(y, rcond=1e-3)
    assert f.w is not None and _rel(cut, np.linalg.lstsq(K, y, rcond=1e-3)[0]) < 1e-9
    assert _rel(cut, fast) > 1e-3


@pytest.mark.parametrize("cond, rank", [(1e9, None), (1e4, 200)])
def test_ill_conditioned_or_singular_large_gram_takes_the_eigendecomposition(cond: float, rank) -> None:
    from compbench.theory.regression import CHOLESKY_FROM

    n = CHOLESKY_FROM + 44
    K = _spd(n, rank or n, 4, cond=cond)
    K = np.triu(K) + np.triu(K, 1).T
    y = np.random.default_rng(5).normal(size=n)
    f = SymmetricFactor(K)
    assert f.method == "eigh" and f.smallest == np.linalg.eigh(K)[0][0]
    # cond 1e9: both solves are good to about cond·ε only
    assert _rel(f.pinv_apply(y), np.linalg.lstsq(K, y, rcond=1e-12)[0]) < (1e-6 if rank is None else 1e-9)


def test_small_grams_keep_the_eigendecomposition() -> None:
    K = _spd(40, 40, 6, cond=10.0)
    assert SymmetricFactor(np.triu(K) + np.triu(K, 1).T).method == "eigh"


def test_seeds_of_a_model_share_one_factorisation_of_its_analytic_gram(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:
    """An MLP with the analytic NTK: three seeds, three f₀, one Gram factored once; theory as each seed alone."""
    import compbench.theory.regression as regression
    from compbench import evaluate

    made: list[int] = []
    init = regression.SymmetricFactor.__init__

    def counting(self, K):  # noqa: ANN001, ANN202
        made.append(len(K))
        init(self, K)

    monkeypatch.setattr(regression.SymmetricFactor, "__init__", counting)
    suite = tmp_path / "s.yaml"
    suite.write_text("""\
name: shared-factor
seeds: 3
tasks: [{id: add, family: additive, params: {anchors: [[4], [4]]}}]
models: [{id: mlp, adapter: mlp, params: {width: 32, max_steps: 20}}]
""")
    res = evaluate(str(suite), out=tmp_path / "out", progress=False)
    assert len(made) == 1 and len(res.records) == 3  # one Gram (the 17 training cells), not one per seed
    # each seed's theory equals the solve on its own (the factor changes nothing but the time)
    for rec in res.records:
        assert rec.ok and rec.theory_predictions is not None
    monkeypatch.setattr(regression.SymmetricFactor, "__init__", init)
    from compbench.runner import execute

    monkeypatch.setattr(execute._SharedFactor, "get", lambda self, kernels: None)  # each seed solves on its own
    alone = evaluate(str(suite), out=tmp_path / "alone", progress=False, force=True)
    assert len(made) == 1  # no factor was shared (17 training cells: below CHOLESKY_FROM, each solve by eigh)
    for a, b in zip(res.records, alone.records):
        np.testing.assert_allclose(np.asarray(a.theory_predictions), np.asarray(b.theory_predictions), rtol=0, atol=1e-12)


@pytest.mark.parametrize("depth", [0, 1, 2, 3])
@pytest.mark.parametrize("bias", [True, False])
def test_standard_mlp_ntk_in_blocks_equals_the_one_pass_reference(depth: int, bias: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    from kernel_reference import old_standard_mlp_ntk

    from compbench.theory import analytic

    monkeypatch.setattr(analytic, "_BLOCK_ELEMENTS", 700)  # several row blocks on a small Gram
    rng = np.random.default_rng(depth)
    x = rng.normal(size=(90, 5))
    x[7] = 0.0  # a zero input: zero-variance pre-activations without bias
    y = rng.normal(size=(40, 5))
    y[3] = x[4]
    sym = analytic.standard_mlp_ntk(x, None, width=64, depth=depth, init_scale=0.7, bias=bias)
    for xb in (None, y):
        new = analytic.standard_mlp_ntk(x, xb, width=64, depth=depth, init_scale=0.7, bias=bias)
        old = old_standard_mlp_ntk(x, xb, width=64, depth=depth, init_scale=0.7, bias=bias)
        other = np.ones(new[0].shape, dtype=bool)
        if xb is not None:  # x[4] paired with itself: the closed form of the symmetric Gram's diagonal, not arccos
            other[4, 3] = False
            for n, g in zip(new, sym):
                assert n[4, 3] == g[4, 4]
        for n, o in zip(new, old):
            assert n.shape == o.shape and _rel(n[other], o[other]) < 1e-13
    ntk, nngp = analytic.standard_mlp_ntk(x, None, width=64, depth=depth, bias=bias)
    assert np.array_equal(ntk, ntk.T) and np.array_equal(nngp, nngp.T)


def _grid_cells(sizes: tuple[int, ...]) -> np.ndarray:
    return np.stack(np.meshgrid(*[np.arange(k) for k in sizes], indexing="ij"), axis=-1).reshape(-1, len(sizes))


@pytest.mark.parametrize("sizes", [(8, 8, 6), (4, 4, 4, 5)])
def test_additivity_fit_by_gram_equals_the_svd_pseudo_inverse(sizes: tuple[int, ...]) -> None:
    from kernel_reference import old_additivity_hat

    cells = _grid_cells(sizes)
    rng = np.random.default_rng(len(sizes))
    train = rng.random(len(cells)) > 0.25
    fit = theory.AdditivityFit(cells, train)
    assert fit.method == "gram-eigh"  # ≥ 256 cells: the smaller Gram's eigendecomposition
    old_hat, old_pinv = old_additivity_hat(cells, train)
    assert _rel(fit._hat_test, old_hat) < 1e-9
    assert _rel(fit._pinv, old_pinv) < 1e-9
    # the conjunction features are rank-deficient (centred indicators of nested subsets): same rank as the SVD's
    xc = fit.features[:, 1:] - fit.features[:, 1:].mean(axis=0)
    s = np.linalg.svd(xc, compute_uv=False)
    assert fit._svd.rank == int((s > 1e-10 * s.max()).sum()) < min(xc.shape)
    preds = rng.normal(size=(3, len(cells)))
    old_fitted = preds @ old_hat.T
    np.testing.assert_allclose(preds[:, ~train].shape, old_fitted.shape)
    y_test = preds[:, ~train]
    old_r2 = 1 - ((y_test - old_fitted) ** 2).sum(1) / ((y_test - y_test.mean(1, keepdims=True)) ** 2).sum(1)
    np.testing.assert_allclose(fit.score(preds), old_r2, rtol=0, atol=1e-10)


def _with_spectrum(s: np.ndarray, n: int, p: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    u, _ = np.linalg.qr(rng.normal(size=(n, len(s))))
    v, _ = np.linalg.qr(rng.normal(size=(p, len(s))))
    return (u * s) @ v.T


@pytest.mark.parametrize("shape", [(300, 500), (500, 300)])
def test_truncated_svd_takes_the_gram_route_only_when_its_rank_is_the_svds(shape: tuple[int, int]) -> None:
    from compbench.theory.regression import TruncatedSVD

    n, p = shape
    well = np.geomspace(1.0, 1e-2, 280)
    # 1: a clean gap (280 directions, the rest exactly zero): the Gram route, the pinv of numpy's SVD
    x = _with_spectrum(well, n, p, 0)
    t = TruncatedSVD(x, 1e-10)
    assert (t.method, t.rank) == ("gram-eigh", 280)
    assert _rel(t.pinv(), np.linalg.pinv(x, rcond=1e-10)) < 1e-9
    # 2: one direction at 1e-7·σ_max, above the cutoff but invisible in the squared spectrum (λ = 1e-14·λ_max):
    # the Gram route would drop it, its dropped part (1e-7) is measured on x and the SVD decides instead
    x = _with_spectrum(np.append(well, 1e-7), n, p, 1)
    t = TruncatedSVD(x, 1e-10)
    assert (t.method, t.rank) == ("svd", 281)
    assert _rel(t.pinv(), np.linalg.pinv(x, rcond=1e-10)) < 1e-9
    # 3: one direction at 1e-13·σ_max, below the cutoff by more than the margin: dropped by both routes
    x = _with_spectrum(np.append(well, 1e-13), n, p, 2)
    t = TruncatedSVD(x, 1e-10)
    assert (t.method, t.rank) == ("gram-eigh", 280)
    assert _rel(t.pinv(), np.linalg.pinv(x, rcond=1e-10)) < 1e-9
    # 4: a small matrix is always the SVD
    assert TruncatedSVD(x[:100, :100], 1e-10).method == "svd"
    # 5: a cutoff (1e-2·σ_max) above what the Gram route keeps (≥ 3.2e-3·σ_max): the SVD, which drops the
    # directions between them (the spectrum runs from 1 down to 1e-2)
    x = _with_spectrum(well, n, p, 3)
    t = TruncatedSVD(x, 2e-2)
    assert t.method == "svd" and t.rank == int((well > 2e-2).sum()) < 280
    assert _rel(t.pinv(), np.linalg.pinv(x, rcond=2e-2)) < 1e-9


@pytest.mark.slow
def test_bundled_suites_additivity_fits_equal_the_svd_pseudo_inverse() -> None:
    """Every additivity fit of every bundled suite (every task and split) against the SVD pseudo-inverse it replaced."""
    from kernel_reference import old_additivity_hat

    from compbench.runner.cells import prepare_tasks
    from compbench.suite import load_suite

    names = sorted(p.stem for p in (Path(__file__).resolve().parents[1] / "suites").glob("*.yaml"))
    fits = 0
    for name in names:
        for tid, task in prepare_tasks(load_suite(name)).items():
            fit = task.additivity
            if fit is None:
                continue
            old_hat, old_pinv = old_additivity_hat(task.data.cells, task.data.train_mask)
            hat, pinv = _rel(fit._hat_test, old_hat), _rel(fit._pinv, old_pinv)
            print(f"{name}/{tid}: {fit.features.shape} {fit.method} hat={hat:.1e} pinv={pinv:.1e}")
            assert hat < 1e-9 and pinv < 1e-9, f"{name}/{tid}"
            fits += 1
    assert fits > 20
