"""matches_kernel where the theory is constant on the held-out cells: its R² is 0 or 1 by convention
(metric_facts.r2_not_applicable), so where the expectation gives max_abs_diff the claim judges that alone."""

import compbench
from tiny_suites import suite_text

# Gated by feature 1, a GLN's program gives every held-out cell of CD-3 the same value (-9/11): a constant theory.
SUITE = suite_text("gln-cd3", name="constant-theory", expectations=[
    "{id: follows, source: {paper: compbench, threshold: a test fixture}, claim: matches_kernel, models: [gln], tasks: [cd-3], tolerance: 0.01DIFF}"])


def verdict(tmp_path, diff):
    path = tmp_path / "s.yaml"
    path.write_text(SUITE.replace("DIFF", diff))
    res = compbench.evaluate(path, out=tmp_path / "store")
    assert not res.errors
    assert all(r.not_applicable["theory_r2"] == "theory constant" for r in res.records)
    (v,) = res.verdicts
    return v, max(r.metrics["theory_max_abs_diff"] for r in res.records)


def test_a_constant_theory_is_judged_by_max_abs_diff(tmp_path):
    v, worst_diff = verdict(tmp_path, ", max_abs_diff: 0.05")
    assert v.passed, v.detail
    assert v.measured == worst_diff and 0 < worst_diff < 0.05
    assert "n/a (theory constant)" in v.detail

