"""The gated linear network (`gln` adapter) and its convex program (compbench.theory.gln)."""

import numpy as np
import pytest
from scipy.optimize import minimize

import compbench
from compbench.adapters import get_adapter
from compbench.encodings.batch import Batch
from compbench.encodings.onehot import onehot
from compbench.tasks.registry import make_task
from compbench.theory.gln import gated_min_norm, group_norm, min_group_norm
from tiny_suites import suite_text


def batches(task):
    """The one-hot training and evaluation batches of a task, as the runner builds them."""
    x, ids = onehot(task.cells, task.n_values), np.arange(len(task.cells))
    tr = task.train_mask
    return (Batch(x[tr], task.cells[tr], ids[tr], task.n_values, task.y[tr]),
            Batch(x, task.cells, ids, task.n_values, task.y))


def test_penalty_is_the_authors_implicit_bias_objective():
    # sflippl/implicit-bias-glns, functions/train_convex.py (comment under get_implicit_bias_objective):
    # rs = np.random.RandomState(seed=1); tensor = rs.randn(785, 3, 4) (inputs, units, gates);
    # np.sum(np.linalg.norm(tensor, axis=(0, 2))) -> 168.4071 (their cvxpy form printed 168.4024).
    tensor = np.random.RandomState(seed=1).randn(785, 3, 4)
    assert group_norm(tensor.transpose(1, 2, 0)) == pytest.approx(168.4071, abs=5e-5)


def test_program_with_unit_specific_gates_matches_an_independent_solver():
    rng = np.random.default_rng(0)
    n, d, units = 12, 5, 4
    x, y, x_ev = rng.normal(size=(n, d)), rng.normal(size=n), rng.normal(size=(7, d))
    gates, gates_ev = rng.integers(0, 2, size=(units, n)), rng.integers(0, 2, size=(units, 7))
    pred, penalty = min_group_norm(x, gates, y, x_ev, gates_ev)

    def unit_outputs(v, g, xs):
        w = v.reshape(units, 2, d)
        return np.einsum("hid,id->i", w[np.arange(units)[:, None], g], xs)

    # SLSQP on the same program written out over the weights (smoothed norm), as the authors' cvxpy problem states it
    res = minimize(lambda v: np.sqrt((v.reshape(units, -1) ** 2).sum(1) + 1e-14).sum(), rng.normal(size=units * 2 * d) * 0.1,
                   constraints=[{"type": "eq", "fun": lambda v: unit_outputs(v, gates, x) - y}], method="SLSQP",
                   options={"maxiter": 2000, "ftol": 1e-12})
    assert res.success
    assert penalty == pytest.approx(res.fun, rel=1e-6)
    np.testing.assert_allclose(pred, unit_outputs(res.x, gates_ev, x_ev), atol=1e-4)


@pytest.mark.parametrize("depth", [1, 2])
def test_shared_gate_program_is_min_norm_per_gate_by_hand(depth):
    # Symbolic addition, anchor 4: in gate a ≠ 4 the only training cell is (a, 4), so the gate's min-norm
    # weights on (bias of a, one-hot b) are c = w_4 = y(a, 4)/2 and every held-out (a, b) predicts c.
    task = make_task("additive", anchors=[[4], [4]])
    x = onehot(task.cells, task.n_values)
    tr, te = task.train_mask, task.test_mask
    gate = task.cells[:, 0]
    by_hand = np.array([task.y[(task.cells[:, 0] == a) & (task.cells[:, 1] == 4)][0] / 2 for a in gate[te]])
    closed = gated_min_norm(x[tr], gate[tr], task.y[tr], x[te], gate[te])
    np.testing.assert_allclose(closed, by_hand, atol=1e-12)
    units = 3
    general, _ = min_group_norm(x[tr], np.tile(gate[tr], (units, 1)), task.y[tr], x[te], np.tile(gate[te], (units, 1)), depth=depth)
    np.testing.assert_allclose(general, by_hand, atol=1e-9)


def test_context_gate_program_is_exact_on_cd3():
    # Gated by the context, each context's model is additive in the features; the cells of the other half of
    # feature 1 fix every feature-2 weight to one constant, so each held-out cell gets its own target.
    task = make_task("context_dependence", preset="CD-3")
    x = onehot(task.cells, task.n_values)
    tr, te = task.train_mask, task.test_mask
    pred = gated_min_norm(x[tr], task.cells[tr, 0], task.y[tr], x[te], task.cells[te, 0])
    np.testing.assert_allclose(pred, task.y[te], atol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("depth", [1, 2])
def test_long_gradient_descent_run_ends_at_the_program(depth):
    # Derived bound: the held-out outputs differ from the program only by (i) the unfinished fit, train MSE < 1e-7,
    # and (ii) the weights no training sample moves, which keep their init (std 1e-3 each, ×‖readout‖ ≤ ~3 at depth 2)
    # over the 3 ones of a one-hot input: ≲ 1e-3·3·√3 ≈ 5e-3 per output; 0.02 is four such standard deviations.
    task = make_task("context_dependence", preset="CD-3")
    train, evaluate = batches(task)
    adapter = get_adapter("gln")(get_adapter("gln").Params(depth=depth, width=16))
    fits = adapter.fit_seeds(train, evaluate, [0, 1])
    te = task.test_mask
    for fit in fits:
        assert fit.error is None and fit.info["converged"]
        np.testing.assert_allclose(fit.theory_predictions[te], task.y[te], atol=1e-9)
        assert np.abs(fit.predictions[te] - fit.theory_predictions[te]).max() < 0.02
    # seeds differ (their own init) but each trains as it would alone
    alone = adapter.fit_seeds(train, evaluate, [1])[0]
    np.testing.assert_allclose(alone.predictions, fits[1].predictions, atol=1e-9)


SUITE = suite_text("gln-cd3", name="gln-api", models=["{id: gln, adapter: gln, params: {gate_component: GATE, width: 8}}"])


def test_records_carry_the_program_as_their_theory(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SUITE.replace("GATE", "0"))
    res = compbench.evaluate(path, out=tmp_path / "store")
    assert not res.errors and len(res.records) == 2
    for rec in res.records:
        assert rec.theory_objective == "gln_program" and rec.theory_kernel == "gln_group_norm"
        assert rec.metrics["theory_acc"] == 1.0 and rec.metrics["heldout_acc"] == 1.0
        assert rec.metrics["theory_max_abs_diff"] < 0.02


def test_a_gate_component_the_task_lacks_is_a_one_line_cell_error(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(SUITE.replace("GATE", "3"))
    res = compbench.evaluate(path, out=tmp_path / "store")
    assert len(res.errors) == 2
    message = res.errors[0].error.message
    assert "gate_component 3 does not exist: this task has 3 components (0..2)" in message and "\n" not in message


def test_the_adapter_keeps_the_contract():
    from compbench.testing import check_adapter

    report = check_adapter(get_adapter("gln"), {"width": 8})
    assert report.breaks == [], report
