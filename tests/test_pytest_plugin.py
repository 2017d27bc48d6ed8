"""The pytest plugin: suite files collect one item per cell, pass/fail on expectations and baselines."""

from __future__ import annotations

import pytest
from tiny_suites import scenario

pytest_plugins = ["pytester"]

SUITE = scenario("plug")  # tests/suites/plug.yaml


@pytest.fixture
def suite_dir(pytester: pytest.Pytester):
    pytester.makefile(".yaml", plug=SUITE)
    return pytester


@pytest.mark.slow
def test_collects_one_item_per_cell_plus_ordered_claims(suite_dir):
    result = suite_dir.runpytest_subprocess("plug.yaml", "--collect-only", "-q", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(
        ["plug.yaml::overlap::te", "plug.yaml::overlap::add", "plug.yaml::rich::te", "plug.yaml::expectation::order", "plug.yaml::outcome",
         "5 tests collected*"]
    )
    result = suite_dir.runpytest_subprocess("plug.yaml", "--collect-only", "-q", "-p", "no:cacheprovider", "-k", "overlap")
    result.stdout.fnmatch_lines(["plug.yaml::overlap::te", "plug.yaml::overlap::add", "2/5 tests collected (3 deselected)*"])


@pytest.mark.slow
def test_passes_on_its_baseline_under_xdist_and_fails_a_planted_regression(suite_dir):
    import subprocess
    import sys

    res = ["--compbench-results", "res", "-p", "no:cacheprovider"]
    # In a subprocess: pytester restores sys.modules after this test, so torch first imported in-process
    # here would be imported a second time by the next test and crash it.
    recorded = subprocess.run([sys.executable, "-m", "compbench.cli", "baseline", "record", "--suite", str(suite_dir.path / "plug.yaml"),
                               "--out", str(suite_dir.path / "base.json"), "--results", str(suite_dir.path / "res"), "--quiet"],
                              capture_output=True, text=True, timeout=600)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    result = suite_dir.runpytest_subprocess("plug.yaml", *res, "--compbench-baseline", "base.json", "-n", "2")
    result.assert_outcomes(passed=5)
    # Planted regression (the rich net initialised lazily) plus an expectation that cannot hold.
    planted = SUITE.replace("init_scale: 1.0e-3, lr: 0.1", "init_scale: 1.0, lr: 0.02").replace(
        "tolerance: 0.01}", "tolerance: 0.01}\n  - {id: bad, source: {paper: compbench, threshold: a test fixture}, claim: beats_kernel, models: [overlap], tasks: [te]}"
    )
    suite_dir.makefile(".yaml", plug=planted)
    result = suite_dir.runpytest_subprocess("plug.yaml", *res, "--compbench-baseline", "base.json")
    result.stdout.fnmatch_lines(["*REGRESSED: rich/te heldout_acc: baseline 1.0000 ± 0.0000 (n=6)*"])
    result.stdout.fnmatch_lines(["*FAIL bad [[]beats_kernel[]] overlap on te: measured 0 (needs heldout_acc − theory_acc ≥ 0.2)*"])
    result.assert_outcomes(passed=1, failed=4)  # 3 items, and the suite outcome that sums them up


@pytest.mark.slow
def test_invalid_suite_is_a_collection_error(suite_dir):
    suite_dir.makefile(".yaml", plug=SUITE.replace("family: additive", "family: additve"))
    result = suite_dir.runpytest_subprocess("plug.yaml", "-p", "no:cacheprovider")
    result.stdout.fnmatch_lines(["*plug.yaml:5: tasks[[]1[]].family: unknown task family 'additve'*"])
    assert result.ret == 2
