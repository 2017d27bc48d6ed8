"""The conformance kit for claims: every built-in claim conforms; broken claims are named."""

from __future__ import annotations

import pytest

from compbench.claims import CLAIMS, Claim, ClaimParams, Verdict
from compbench.testing import check_claim

PARAMS = {"above": {"metric": "heldout_acc", "bound": 0.4}, "below": {"metric": "heldout_mse", "bound": 1.0},
          "ordered": {"metric": "heldout_acc"}, "close": {"metric": "heldout_acc"},
          "near": {"metric": "heldout_r2", "target": 0.5}, "near_theory": {"metric": "heldout_r2"},
          "below_ratio": {"metric": "heldout_mse", "reference": "heldout_r2"}}


@pytest.mark.parametrize("name", sorted(CLAIMS.names()))
def test_builtin_claims_conform(name):
    report = check_claim(name, PARAMS.get(name))
    assert report.ok, str(report)


class PassesOnAnything(Claim):
    """Always passes: the kind of claim that would turn a broken run green."""

    def judge(self, params, expectation, subject):
        return Verdict(expectation, "p", subject.name, subject.task, 1.0, "", True)


class Raises(Claim):
    """Reads a metric without checking the record's status."""

    def judge(self, params, expectation, subject):
        value = subject.records[0]["heldout_acc"]
        return Verdict(expectation, "r", subject.name, subject.task, value, "", value > 0)


class NeedsBound(Claim):
    """A required param without a default."""

    class Params(ClaimParams):
        bound: float

    def judge(self, params, expectation, subject):
        return Verdict(expectation, "n", subject.name, subject.task, 0.0, "", False)


def test_breaks_are_named():
    report = check_claim(PassesOnAnything)
    assert report.names == {"passes-on-errors", "passes-on-nothing"}
    assert "passed" in str(report) and "every cell failed" in str(report)
    assert check_claim(Raises).names == {"judge-raises"}
    assert check_claim(NeedsBound).names == {"params-defaults"}
    assert check_claim(NeedsBound, {"bound": 0.5}).ok
    assert check_claim(int).names == {"registers"}
    with pytest.raises(AssertionError, match="passes-on-nothing"):
        check_claim(PassesOnAnything).raise_if_failed()


def test_close_claim_passes_within_tolerance_and_fails_beyond():
    from types import SimpleNamespace

    close = CLAIMS.get("close")
    params = close.Params(metric="heldout_r2", over="models", tolerance=0.03)

    def recs(model: str, values: list[float]) -> list[dict]:
        return [{"model": model, "group": model, "task": "t", "seed": i, "status": "ok", "key": f"{model}{i}", "heldout_r2": v}
                for i, v in enumerate(values)]

    exp = SimpleNamespace(id="e", models=["a", "b"], tasks=["t"])
    selects = lambda r, p: r["model"] == p  # noqa: E731
    (near,) = close.judge_all(params, exp, recs("a", [0.80, 0.82]) + recs("b", [0.795]), selects)
    assert near.passed and near.measured == pytest.approx(0.015)  # means 0.81 and 0.795
    (far,) = close.judge_all(params, exp, recs("a", [0.80, 0.82]) + recs("b", [0.70]), selects)
    assert not far.passed and far.measured == pytest.approx(0.11)


def _subject(values: dict[str, list[dict[str, float]]], task: str = "t", kind: str = "regression"):
    from compbench.claims.base import Subject
    from compbench.records import CellRecord, Status

    recs = [CellRecord(key=f"{m}{i}", task=task, model=m, seed=i, status=Status.OK, kind=kind, metrics=metrics)
            for m, seeds in values.items() for i, metrics in enumerate(seeds)]
    return Subject("s", task, recs)


def test_near_is_two_sided_and_reports_the_member_farthest_from_the_target():
    near = CLAIMS.get("near")
    params = near.Params(metric="factor_slope.y", target=1.0, tolerance=0.1)
    ok = near.judge(params, "e", _subject({"a": [{"factor_slope.y": 0.95}, {"factor_slope.y": 1.01}], "b": [{"factor_slope.y": 1.04}]}))
    assert ok.passed and ok.measured == pytest.approx(1.04)  # a's mean is 0.98, b's 1.04: b is farther from 1
    over = near.judge(params, "e", _subject({"ntk": [{"factor_slope.y": 1.25}]}))  # an over-prediction fails too
    assert not over.passed and over.measured == pytest.approx(1.25) and over.threshold == "|factor_slope.y − 1| ≤ 0.1"
    under = near.judge(params, "e", _subject({"x": [{"factor_slope.y": 0.85}]}))
    assert not under.passed


def test_near_theory_compares_each_member_with_its_own_theory():
    claim = CLAIMS.get("near_theory")
    params = claim.Params(metric="slope", tolerance=0.03)
    lazy = {"lazy": [{"slope": 0.74, "theory_slope": 0.75}, {"slope": 0.78, "theory_slope": 0.75}]}  # mean 0.76 vs 0.75
    v = claim.judge(params, "e", _subject(lazy))
    assert v.passed and v.measured == pytest.approx(0.01) and v.threshold == "|slope − theory_slope| ≤ 0.03"
    rich = {"rich": [{"slope": 0.95, "theory_slope": 0.75}]}  # a network that escapes its kernel fails the claim
    assert not claim.judge(params, "e", _subject(rich)).passed
    none = {"net": [{"slope": 0.9}]}  # no theory: not applicable, never a pass
    v = claim.judge(params, "e", _subject(none))
    assert not v.passed and "does not produce theory_slope" in v.detail


def test_below_ratio_judges_one_metric_against_a_multiple_of_another():
    claim = CLAIMS.get("below_ratio")
    params = claim.Params(metric="factor_slope.scale", reference="factor_slope.y", ratio=0.5)
    shrunk = claim.judge(params, "e", _subject({"cnn": [{"factor_slope.scale": 0.3, "factor_slope.y": 1.0}]}))
    assert shrunk.passed and shrunk.measured == pytest.approx(-0.2)  # 0.3 − 0.5 × 1.0
    worst = claim.judge(params, "e", _subject({"a": [{"factor_slope.scale": 0.3, "factor_slope.y": 1.0}],
                                               "b": [{"factor_slope.scale": 0.7, "factor_slope.y": 1.0}]}))
    assert not worst.passed and worst.measured == pytest.approx(0.2)  # b: 0.7 − 0.5 × 1.0, the worst member


def test_slope_with_a_lower_bound_fails_a_model_that_does_not_generalise():
    claim = CLAIMS.get("slope_below_one")
    params = claim.Params(min_slope=0.25, min_corr=0.0)
    flat = claim.judge(params, "e", _subject({"convnet": [{"slope": 0.08, "corr": 0.4}]}))
    assert not flat.passed and flat.measured == pytest.approx(0.08) and flat.threshold == "0.25 ≤ slope ≤ 0.95, corr ≥ 0"
    leak = claim.judge(params, "e", _subject({"convnet": [{"slope": 0.55, "corr": 0.9}]}))
    assert leak.passed
    assert not claim.judge(params, "e", _subject({"convnet": [{"slope": 0.99, "corr": 0.9}]})).passed  # no leak
