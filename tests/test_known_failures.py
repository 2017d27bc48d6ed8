"""Known failures are scoped and strict, and every claim names its source (issue #33 items 1 and 5).

A failing verdict inside a `known_failure`'s scope is XFAIL and fails nothing; a passing one is XPASS and
fails `run`, `report`, `check` and the pytest plugin alike; a failure outside the scope (another model,
task or profile) is a plain FAIL; a known failure measured outside its declared range warns.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from compbench.cli import main

pytest_plugins = ["pytester"]

# The overlap kernel is deterministic (one seed) and fast. On `te` its held-out accuracy is exactly ½
# (kernels cannot relate a held-out pair), so `at_chance` passes and `beats_kernel` fails (it is its own
# kernel: the gap is 0); on `order` it generalises the rank rule, so `at_chance` fails there.
SUITE = """\
name: kf
seeds: 1
tasks:
  - {{id: te, family: transitive_equivalence}}
  - {{id: order, family: transitive_ordering, params: {{n_items: 5}}}}
models:
  - {{id: ovl, adapter: kernel, params: {{kernel: overlap, weights: [0.0, 0.3, 1.0]}}}}
  - {{id: ntk, adapter: kernel, params: {{kernel: relu_ntk}}}}
expectations:
  - id: claim
    claim: {claim}
    models: [ovl, ntk]
    tasks: [{tasks}]
    tolerance: 0.2
    source: {{paper: compbench, threshold: a test fixture}}
{known}
profiles:
  alt: {{description: a second profile, seeds: 1}}
"""


def known(models: str = "[ovl]", tasks: str = "[te]", profiles: str = "[default]", measured: str = "[0.0, 1.0]") -> str:
    return (f"    known_failure:\n      - reason: declared for the test\n        profiles: {profiles}\n"
            f"        models: {models}\n        tasks: {tasks}\n        measured: {measured}\n")


def write(tmp_path: Path, claim: str, tasks: str, known_failure: str) -> Path:
    path = tmp_path / "kf.yaml"
    path.write_text(SUITE.format(claim=claim, tasks=tasks, known=known_failure), encoding="utf-8")
    return path


def verdicts(out: Path) -> dict[tuple[str, str], str]:
    import pandas as pd

    rows = pd.read_csv(out / "expectations.csv")
    return {(r.subject, r.task): r.verdict for r in rows.itertuples()}


def four_commands(tmp_path: Path, suite: Path, capsys: pytest.CaptureFixture[str]) -> dict[str, int]:
    """Exit codes of run, report, check (against a baseline recorded from the same store) and pytest."""
    out = tmp_path / "out"
    codes = {"run": main(["run", "--suite", str(suite), "--results", str(out), "--quiet"])}
    codes["report"] = main(["report", "--suite", str(suite), "--results", str(out), "--quiet"])
    main(["baseline", "record", "--suite", str(suite), "--results", str(out), "--out", str(tmp_path / "b.json"), "--quiet"])
    codes["check"] = main(["check", "--suite", str(suite), "--results", str(out), "--baseline", str(tmp_path / "b.json"), "--quiet"])
    # In a subprocess: the plugin is what `pytest suites/S.yaml` loads, on the same store.
    res = subprocess.run([sys.executable, "-m", "pytest", str(suite), "-p", "no:cacheprovider", "-q",
                          "--compbench-results", str(out), "--rootdir", str(tmp_path)],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    codes["pytest"] = res.returncode
    codes["pytest_output"] = res.stdout  # type: ignore[assignment]
    capsys.readouterr()
    return codes


@pytest.mark.slow
def test_an_unexpected_pass_fails_every_command_alike(tmp_path, capsys):
    # at_chance holds for ovl on te (accuracy ½): declared a known failure, it passes unexpectedly.
    suite = write(tmp_path, "at_chance", "te", known())
    codes = four_commands(tmp_path, suite, capsys)
    assert verdicts(tmp_path / "out") == {("ovl", "te"): "XPASS", ("ntk", "te"): "PASS"}
    assert {k: v for k, v in codes.items() if k != "pytest_output"} == {"run": 1, "report": 1, "check": 1, "pytest": 1}
    assert "XPASS claim [at_chance] ovl on te" in codes["pytest_output"]
    md = (tmp_path / "out" / "leaderboard.md").read_text(encoding="utf-8")
    assert "1/2 pass (1 unexpected pass (XPASS: remove the declaration))" in md
    assert "which passes (|acc − 0.5| ≤ 0.2) although the suite declares it a known failure" in md


@pytest.mark.slow
def test_a_declared_failure_in_scope_passes_every_command_alike(tmp_path, capsys):
    # beats_kernel fails for a kernel (it is its own theory): declared for both models, XFAIL, nothing fails.
    suite = write(tmp_path, "beats_kernel", "te", known(models="[ovl, ntk]"))
    codes = four_commands(tmp_path, suite, capsys)
    assert verdicts(tmp_path / "out") == {("ovl", "te"): "XFAIL", ("ntk", "te"): "XFAIL"}
    assert {k: v for k, v in codes.items() if k != "pytest_output"} == {"run": 0, "report": 0, "check": 0, "pytest": 0}
    md = (tmp_path / "out" / "leaderboard.md").read_text(encoding="utf-8")
    assert "0/2 pass (2 known failures)" in md


@pytest.mark.parametrize("scope, why", [
    (dict(models="[ovl]"), "another model"),
    (dict(profiles="[alt]"), "another profile"),
    (dict(tasks="[order]"), "another task"),
])
def test_a_failure_outside_the_scope_is_not_absorbed(tmp_path, capsys, scope, why):
    # beats_kernel fails for both kernels on both tasks; the declaration covers only part of that.
    suite = write(tmp_path, "beats_kernel", "te, order", known(**scope))
    assert main(["run", "--suite", str(suite), "--results", str(tmp_path / "out"), "--quiet"]) == 1, why
    got = verdicts(tmp_path / "out")
    absorbed = {k for k, v in got.items() if v == "XFAIL"}
    expected = {"another model": {("ovl", "te")}, "another profile": set(),
                "another task": {("ovl", "order")}}[why]
    assert absorbed == expected
    assert set(got.values()) == {"FAIL", "XFAIL"} if expected else set(got.values()) == {"FAIL"}


def test_a_partial_runs_whole_suite_report_scopes_known_failures_by_the_runs_profile(tmp_path, capsys):
    # The report after `--task` judges the whole suite from the store: with the run's profile, so a failure
    # declared for `alt` stays XFAIL there as in the run's own verdicts (it read as FAIL without the profile).
    suite = write(tmp_path, "beats_kernel", "te, order", known(models="[ovl, ntk]", tasks="[te, order]", profiles="[alt]"))
    out = tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--results", str(out), "--profile", "alt", "--task", "te", "--quiet"]) == 0
    assert verdicts(out) == {("ovl", "te"): "XFAIL", ("ntk", "te"): "XFAIL"}


def test_a_known_failure_outside_its_measured_range_warns(tmp_path, capsys):
    # beats_kernel measures a gap of 0 for a kernel: declared as measured in [0.1, 0.2], it warns (and stays XFAIL).
    suite = write(tmp_path, "beats_kernel", "te", known(models="[ovl, ntk]", measured="[0.1, 0.2]"))
    assert main(["run", "--suite", str(suite), "--results", str(tmp_path / "out"), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "warning: claim on ovl / te: known failure measured 0, outside its declared range [0.1, 0.2]" in err
    assert verdicts(tmp_path / "out") == {("ovl", "te"): "XFAIL", ("ntk", "te"): "XFAIL"}


@pytest.mark.parametrize("edit, message", [
    (lambda s: s.replace("    source: {paper: compbench, threshold: a test fixture}\n", ""),
     "kf.yaml:10: expectations[0]: names no source"),
    (lambda s: s.replace("source: {paper: compbench, threshold: a test fixture}", "source: {paper: 'Someone 2024', threshold: x}"),
     "a paper source names where and value"),
    (lambda s: s.replace("source: {paper: compbench, threshold: a test fixture}", "source: Someone 2024"),
     "source is {paper, where, value, threshold[, url]}"),
])
def test_validation_refuses_a_claim_without_a_source(tmp_path, capsys, edit, message):
    path = tmp_path / "kf.yaml"
    path.write_text(edit(SUITE.format(claim="at_chance", tasks="te", known="")), encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("declared, message", [
    ("    known_failure: it fails\n", "known_failure is scoped: {reason, profiles, models, tasks, measured"),
    (known(models="[mlp]"), "kf.yaml:19: expectations[0].known_failure[0].models[0]: pattern 'mlp' matches no model"),
    (known(profiles="[full]"), "profile 'full' is not one of the suite's (alt, default"),
    (known(tasks="[order]"), "pattern 'order' selects no task of the expectation (te)"),
    (known(measured="[0.5, 0.1]"), "measured is [lo, hi] with lo ≤ hi"),
])
def test_validation_refuses_an_unscoped_known_failure(tmp_path, capsys, declared, message):
    path = tmp_path / "kf.yaml"
    path.write_text(SUITE.format(claim="at_chance", tasks="te", known=declared), encoding="utf-8")
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_bundled_suites_name_a_source_for_every_claim():
    from compbench.suite import bundled_dir, load_suite

    for path in sorted(bundled_dir("suites").glob("*.yaml")):
        loaded = load_suite(path)
        for exp in loaded.suite.expectations:
            assert exp.source is not None, (path.name, exp.id)
            assert exp.source.threshold.strip(), (path.name, exp.id)
