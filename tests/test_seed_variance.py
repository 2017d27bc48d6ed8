"""The seed-to-seed spread a lazy network's theory predicts (compbench.theory.seed_variance), against real ensembles."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compbench.theory.seed_variance import cell_mean_variance, ntk_gp_covariance

N_SEEDS = 200
# A variance estimated from N samples of a Gaussian has relative standard error √(2/(N − 1)) (0.100 for 200);
# the held-out cells of one ensemble are correlated, so pooling them is not assumed to shrink it. 3 SE.
TOL = 3 * math.sqrt(2 / (N_SEEDS - 1))


def _grid() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """One-hot pairs on a 4 × 4 grid, y = i + j − 3; trained on the first row, first column and diagonal."""
    cells = np.array([(i, j) for i in range(4) for j in range(4)])
    x = np.zeros((16, 8))
    x[np.arange(16), cells[:, 0]] = 1
    x[np.arange(16), 4 + cells[:, 1]] = 1
    y = cells[:, 0] + cells[:, 1] - 3.0
    train = np.array([0, 1, 2, 3, 4, 8, 12, 5, 10, 15])
    return cells, x, y, train


def test_gp_posterior_when_ntk_is_nngp() -> None:
    """With Θ = Σ the formula is the GP posterior covariance Σ(x,x') − Σ(x,X)Σ⁻¹Σ(X,x'); zero at training inputs."""
    rng = np.random.default_rng(0)
    z = rng.normal(size=(7, 5))
    K = z @ z.T + 0.1 * np.eye(7)
    tr, ev = np.arange(4), np.arange(7)
    cov = ntk_gp_covariance(K[np.ix_(tr, tr)], K[np.ix_(ev, tr)], K[np.ix_(tr, tr)], K[np.ix_(ev, tr)], K[np.ix_(ev, ev)])
    post = K - K[:, tr] @ np.linalg.solve(K[np.ix_(tr, tr)], K[tr, :])
    np.testing.assert_allclose(cov, post, atol=1e-10)
    np.testing.assert_allclose(np.diag(cov)[tr], 0.0, atol=1e-10)


def test_cell_mean_variance_averages_the_block() -> None:
    """A cell of several samples: the variance of their mean is the mean of their covariance block."""
    cov = np.array([[2.0, 1.0, 0.0], [1.0, 4.0, 0.0], [0.0, 0.0, 3.0]])
    np.testing.assert_allclose(cell_mean_variance(cov, np.array([0, 0, 1]), 2), [(2 + 4 + 2) / 4, 3.0])


def test_lazy_mlp_ensemble_spread_matches_the_ntk_gp() -> None:
    """200 seeds of an uncentred lazy MLP (H = 512): their held-out spread is the NTK-GP's, within sampling error."""
    from compbench.adapters.mlp import MLPAdapter, MLPParams
    from compbench.encodings.batch import Batch

    cells, x, y, tr = _grid()

    def batch(idx: np.ndarray) -> Batch:
        return Batch(x=x[idx], cells=cells[idx], cell_ids=idx, n_values=(4, 4), y=y[idx])

    train, ev = batch(tr), batch(np.arange(16))
    adapter = MLPAdapter(MLPParams(width=512, init_scale=1.0, lr=0.02, max_steps=20_000, loss_tol=1e-6, dtype="float64"))
    fits = adapter.fit_seeds(train, ev, list(range(N_SEEDS)))
    assert all(f.info["converged"] for f in fits)
    preds = np.stack([f.predictions for f in fits])
    f0 = np.stack([f.initial_eval for f in fits])
    nngp_ee = adapter.init_kernel(ev, ev)
    # the NNGP is f₀'s covariance over seeds
    assert f0.var(axis=0, ddof=1).mean() / np.diag(nngp_ee).mean() == pytest.approx(1.0, abs=TOL)
    cov = ntk_gp_covariance(adapter.kernel(train, train), adapter.kernel(ev, train),
                            adapter.init_kernel(train, train), adapter.init_kernel(ev, train), nngp_ee)
    test = np.setdiff1d(np.arange(16), tr)
    predicted, measured = np.diag(cov)[test], preds.var(axis=0, ddof=1)[test]
    assert predicted.min() > 0.05  # a spread worth measuring (f₀'s own is 0.25 here)
    np.testing.assert_allclose(measured / predicted, 1.0, atol=TOL)
    # and training reduces it: the held-out spread is below f₀'s
    assert predicted.max() < np.diag(nngp_ee)[test].min()


def _verdicts(tmp_path, *extra: str) -> tuple[int, "object"]:
    import pandas as pd

    from compbench.cli import main
    from tiny_suites import SEED_SPREAD

    suite = tmp_path / "seed-spread.yaml"
    suite.write_text(SEED_SPREAD)
    out = tmp_path / "out"
    code = main(["run", "--suite", str(suite), "--out", str(out), "--quiet", *extra])
    return code, pd.read_csv(out / "expectations.csv").set_index("subject")


def test_seed_var_ratio_claim_through_the_cli(tmp_path) -> None:
    """The uncentred lazy MLP's spread is its NTK-GP's; a rich one's is not; a centred one's theory predicts none."""
    code, v = _verdicts(tmp_path)
    assert code == 1  # the rich and the centred networks fail
    assert v.loc["lazy", "verdict"] == "PASS"
    assert abs(v.loc["lazy", "measured"] - 1.0) <= 0.45
    assert v.loc["rich", "verdict"] == "FAIL" and v.loc["rich", "measured"] > 1e3  # its theory's f₀ is 1e-3 small
    assert v.loc["lazy-centred", "verdict"] == "FAIL" and math.isnan(v.loc["lazy-centred", "measured"])
    assert "theory predicts no spread over seeds" in v.loc["lazy-centred", "detail"]
    # no closed form (empirical NTKs): the spread of the seeds' own theories is the prediction, and it holds too
    assert v.loc["lazy-empirical", "verdict"] == "PASS"


def test_seed_var_ratio_needs_two_seeds(tmp_path) -> None:
    """One seed has no variance: the claim says so instead of measuring 0."""
    code, v = _verdicts(tmp_path, "--seeds", "1", "--model", "lazy")
    assert code == 1
    assert math.isnan(v.loc["lazy", "measured"])
    assert "1 seed: a variance over seeds needs 2 or more" in v.loc["lazy", "detail"]


def test_records_keep_the_predicted_variance(tmp_path) -> None:
    """The predicted variance is stored with each seed (held-out cells only) and read back from the store."""
    from compbench.scoring.seed_spread import seed_spread
    from compbench.store.records import ResultStore

    _verdicts(tmp_path, "--seeds", "3", "--model", "lazy")
    store = ResultStore(tmp_path / "out" / "store")
    store.open()
    records = list(store)
    assert len(records) == 3
    tv = records[0].theory_variance
    assert tv is not None and all(r.theory_variance == tv for r in records)
    assert sum(v is not None for v in tv) == records[0].n_test  # held-out cells only
    assert all(v > 0 for v in tv if v is not None)
    s = seed_spread(records)
    assert s.source == "NTK-GP" and s.n_seeds == 3 and s.predicted == pytest.approx(np.mean([v for v in tv if v is not None]))
