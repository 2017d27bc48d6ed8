"""The conformance kit for claims: every built-in claim conforms; broken claims are named."""

from __future__ import annotations

import pytest

from compbench.claims import CLAIMS, Claim, ClaimParams, Verdict
from compbench.testing import check_claim

PARAMS = {"above": {"metric": "heldout_acc", "bound": 0.4}, "below": {"metric": "heldout_mse", "bound": 1.0},
          "ordered": {"metric": "heldout_acc"}, "close": {"metric": "heldout_acc"}}


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
