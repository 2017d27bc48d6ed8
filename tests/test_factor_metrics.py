"""Per-factor metrics of a task with named outputs: R² against the full-grid variance, slope, class accuracy."""

from __future__ import annotations

import numpy as np
import pytest

from compbench.records.metric_facts import (
    METRICS,
    direction_of,
    metric_allowed,
    theory_partner,
)
from compbench.scoring.metrics import factor_metrics

# 6 cells; output a is a factor in [0, 1], c=0 / c=1 a one-hot class block
Y = np.array([[0, 1, 0], [0.5, 0, 1], [1, 1, 0], [0, 0, 1], [0.5, 1, 0], [1, 0, 1]], dtype=float)
TEST = np.array([False, True, True, False, False, True])


def preds() -> np.ndarray:
    p = Y.copy()
    p[[1, 2, 5], 0] = [0.4, 0.8, 0.9]
    p[1, 1:] = [0.7, 0.2]  # wrong class (truth c = 1)
    p[2, 1:] = [0.9, 0.1]  # right (c = 0)
    p[5, 1:] = [0.3, 0.6]  # right (c = 1)
    return p


def test_against_a_hand_computation():
    m = factor_metrics(("a", "c=0", "c=1"), Y, TEST, preds(), None)
    # variance of a over all 6 cells: mean 0.5, squared deviations .25, 0, .25 twice → 1/6
    # held-out MSE: (.1² + .2² + .1²) / 3 = 0.02 → R² = 1 − 0.02 · 6 = 0.88 (not against the held-out variance)
    assert m["factor_r2.a"] == pytest.approx(0.88, abs=1e-12)
    assert m["factor_r2"] == pytest.approx(0.88, abs=1e-12)  # the mean over the one regressed factor
    # slope of (.4, .8, .9) on (.5, 1, 1): cov .15 / var 1/6 = 0.9
    assert m["factor_slope.a"] == pytest.approx(0.9, abs=1e-12)
    assert m["class_acc.c"] == pytest.approx(2 / 3)
    assert not any(k.startswith("theory_") for k in m)


def test_theory_twins_and_perfect_predictions():
    m = factor_metrics(("a", "c=0", "c=1"), Y, TEST, preds(), Y)
    assert m["theory_factor_r2.a"] == 1.0 and m["theory_factor_slope.a"] == pytest.approx(1.0) and m["theory_class_acc.c"] == 1.0


def test_per_factor_facts_resolve_from_their_base():
    fact = METRICS["factor_slope.scale"]
    assert fact.label.endswith(": scale") and fact.direction is None
    assert theory_partner("factor_r2.x") == "theory_factor_r2.x" and direction_of("class_acc.shape") == "higher"
    assert "factor_r2.y" in METRICS and "nonsense.y" not in METRICS and METRICS.get("heldout_r2.y") is None
    assert metric_allowed("factor_slope.scale", ("factor_slope",)) and not metric_allowed("factor_slope.scale", ("slope",))


def test_the_per_factor_bar_chart_shows_each_model_beside_its_theory():
    from matplotlib.patches import Rectangle

    from compbench.records import CellRecord, Status
    from compbench.report.figures import FACTOR_FLOOR, factor_bars, factor_names

    def rec(model, seed, r2, theory):
        metrics = {f"factor_r2.{f}": v for f, v in r2.items()} | {f"theory_factor_r2.{f}": v for f, v in theory.items()}
        return CellRecord(key=f"{model}{seed}", task="composition", model=model, seed=seed, status=Status.OK,
                          kind="regression", metrics=metrics)

    recs = [rec("cnn", 0, {"scale": 0.2, "x": 0.9}, {"scale": 0.1, "x": 0.8}),
            rec("cnn", 1, {"scale": 0.4, "x": 0.7}, {"scale": 0.3, "x": 0.8}),
            rec("ntk", 0, {"scale": -3.0, "x": 0.95}, {"scale": -3.0, "x": 0.95})]
    assert factor_names(recs) == ["scale", "x"]
    fig = factor_bars("composition", recs, ["scale", "x"], {})
    ax = fig.axes[0]
    bars = [p for p in ax.patches if isinstance(p, Rectangle) and p.get_width() > 0]
    heights = sorted(round(b.get_height(), 6) for b in bars)
    # cnn: model 0.3, 0.8; theory 0.2, 0.8; ntk: −3 cut at the floor (twice), 0.95 twice
    assert heights == sorted([0.3, 0.8, 0.2, 0.8, FACTOR_FLOOR, FACTOR_FLOOR, 0.95, 0.95])
    assert sum(1 for b in bars if b.get_hatch() == "//") == 4  # the theory bars
    assert [t.get_text() for t in ax.texts] == ["-3.00", "-3.00"]  # the cut bars say their value
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["cnn", "cnn: its theory", "ntk", "ntk: its theory"]


def test_additivity_is_not_applicable_where_the_seen_conjunctions_span_every_held_out_cell():
    """A modular teacher's held-out pairs are each explained by their two modules' own features: any
    prediction scores additivity 1, so the score is n/a (it cannot fail); on symbolic addition it can."""
    import numpy as np

    from compbench.claims import CLAIMS
    from compbench.claims.base import Subject
    from compbench.records import CellRecord, Status
    from compbench.scoring.score import _not_applicable
    from compbench.tasks import make_task
    from compbench.theory.additivity import AdditivityFit

    teacher = make_task("modular_teacher", split="random", samples_per_cell=4, eval_samples=4)
    fit = AdditivityFit(teacher.cells, teacher.train_mask)
    noise = np.random.default_rng(0).normal(size=len(teacher.cells))
    assert fit.vacuous and fit.score(noise) == pytest.approx(1.0)  # anything at all is "additive" here
    na = _not_applicable({"additivity": 1.0}, int(teacher.test_mask.sum()), None, fit)
    assert na == {"additivity": "the seen conjunctions span every held-out prediction: any model scores 1"}
    addition = make_task("additive", anchors=[[4], [4]])
    fit = AdditivityFit(addition.cells, addition.train_mask)
    assert not fit.vacuous and fit.score(np.random.default_rng(0).normal(size=len(addition.cells))) < 0.9
    assert _not_applicable({"additivity": 0.5}, int(addition.test_mask.sum()), None, fit) == {}
    # A claim on an n/a metric fails as not applicable; it never passes.
    rec = CellRecord(key="k", task="random", model="hypernet", seed=0, status=Status.OK, kind="regression",
                     metrics={"additivity": 1.0}, not_applicable=na)
    v = CLAIMS.get("additive").judge(CLAIMS.get("additive").Params(), "e", Subject("hypernet", "random", [rec]))
    assert not v.passed and "not applicable" in v.detail and "span every held-out prediction" in v.detail
