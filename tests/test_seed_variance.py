"""The seed-to-seed spread a lazy network's theory predicts (compbench.theory.seed_variance), against real ensembles."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compbench.theory.seed_variance import cell_mean_covariance, ntk_gp_covariance, r2_sd

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


def test_cell_mean_covariance_averages_the_blocks() -> None:
    """A cell of several samples: the covariance of their means is the mean of the covariance blocks."""
    cov = np.array([[2.0, 1.0, 0.5], [1.0, 4.0, 1.5], [0.5, 1.5, 3.0]])
    np.testing.assert_allclose(cell_mean_covariance(cov, np.array([0, 0, 1]), 2), [[(2 + 4 + 2) / 4, 1.0], [1.0, 3.0]])


def test_r2_sd_against_sampling() -> None:
    """The closed-form spread of R² under Gaussian prediction noise, against 20,000 draws.

    An sd from 20,000 draws has relative SE 0.5% for a Gaussian variable; R² is a shifted χ²-like one (heavier
    tail), so 3%."""
    rng = np.random.default_rng(1)
    z = rng.normal(size=(6, 6))
    C = 0.05 * z @ z.T / 6
    y = np.linspace(-2, 2, 6)
    mu = 0.8 * y
    draws = rng.multivariate_normal(mu, C, size=20_000)
    ss_tot = float(np.sum((y - y.mean()) ** 2))
    r2 = 1 - ((draws - y) ** 2).sum(axis=1) / ss_tot
    assert r2.std(ddof=1) == pytest.approx(r2_sd(C, y - mu, ss_tot), rel=0.03)


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


@pytest.mark.slow
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


@pytest.mark.slow
def test_seed_var_ratio_needs_two_seeds(tmp_path) -> None:
    """One seed has no variance: the claim says so instead of measuring 0."""
    code, v = _verdicts(tmp_path, "--seeds", "1", "--model", "lazy")
    assert code == 1
    assert math.isnan(v.loc["lazy", "measured"])
    assert "1 seed: a variance over seeds needs 2 or more" in v.loc["lazy", "detail"]


@pytest.mark.slow
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


def _lazy_only(tmp_path):
    from tiny_suites import SEED_SPREAD

    suite = tmp_path / "lazy.yaml"
    suite.write_text(SEED_SPREAD.split("expectations:")[0])  # check also judges the suite's claims: none here
    return suite


def _record(tmp_path, suite) -> tuple[object, dict]:
    import json

    from compbench.cli import main

    base = tmp_path / "base.json"
    assert main(["baseline", "record", "--suite", str(suite), "--results", str(tmp_path / "res"), "--model", "lazy",
                 "--seeds", "2", "--out", str(base), "-q"]) == 0
    return base, json.loads(base.read_text())


def test_check_floors_a_lazy_cells_seed_noise_by_its_theory(tmp_path, capsys) -> None:
    """Two seeds against two others: their sample sds (0.012 and 0.018) would call a 0.073 drop in held-out R² a
    regression (tolerance 0.032); the NTK-GP's sd of R² (0.067, measured 0.052 over 40 seeds) says it is seed noise."""
    import json

    from compbench.cli import main

    suite = _lazy_only(tmp_path)
    base, doc = _record(tmp_path, suite)
    dist = doc["cells"]["lazy/add"]["metrics"]["heldout_r2"]
    assert dist["theory_std"] == pytest.approx(0.067, abs=0.001)
    argv = ["check", "--suite", str(suite), "--results", str(tmp_path / "res"), "--model", "lazy", "--seeds", "2",
            "--seed-start", "38", "--baseline", str(base), "-v"]
    assert main(argv) == 0
    row = next(line for line in capsys.readouterr().out.splitlines() if "heldout_r2" in line and "lazy/add" in line)
    assert "ok" in row and "REGRESSED" not in row
    # the floor widens the tolerance to 2.5·√(2·0.067²/2) = 0.167, no further: a drop beyond it still fails
    # (a baseline at 0.995: the same seeds 38, 39 then fall by 0.18)
    dist.update(mean=0.995, std=0.0, values=[0.995, 0.995])
    base.write_text(json.dumps(doc))
    assert main(argv) == 1
    assert "REGRESSED" in capsys.readouterr().out


def test_check_refuses_a_negative_theory_std(tmp_path, capsys) -> None:
    """A hand-edited baseline whose theory_std no run could record is bad input: one line, exit 2."""
    import json

    from compbench.cli import main

    suite = _lazy_only(tmp_path)
    base, doc = _record(tmp_path, suite)
    doc["cells"]["lazy/add"]["metrics"]["heldout_r2"]["theory_std"] = -1.0
    base.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["check", "--suite", str(suite), "--results", str(tmp_path / "res"), "--model", "lazy", "--seeds", "2",
                 "--baseline", str(base)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("compbench: ") and "theory_std must be a finite number ≥ 0" in err and "Traceback" not in err
