"""One truth (#22): run, report, check, baseline and the pytest plugin state one outcome of a suite over a store.

Each numbered test reproduces one item of the issue through the real CLI (`compbench.cli.main`, or
pytest in a subprocess for the plugin) and asserts the commands now agree.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from compbench.adapters import Adapter, AdapterParams, register_adapter
from compbench.cli import main
from compbench.records import CellRecord, Status
from compbench.runner.cells import result_code_files
from compbench.store import ResultStore
from compbench.suite import SuiteError, parse_suite
from tiny_suites import suite_text

ROOT = Path(__file__).resolve().parent.parent
LEGACY = Path(__file__).parent / "fixtures" / "legacy_store_v1"


class _ExplodesParams(AdapterParams):
    """No parameters."""


@register_adapter("explodes-for-one-truth")
class _Explodes(Adapter):
    """Raises in training: every cell of it is an error record."""

    Params = _ExplodesParams
    deterministic = True

    def fit_seeds(self, train, evaluate, seeds):  # noqa: ANN001
        raise RuntimeError("adapter exploded")


OVERLAP = "{id: overlap, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}"
ALL_ADDITIVE = "{id: all-additive, source: {paper: compbench, threshold: a test fixture}, claim: additive, models: [%s], tasks: [add]}"


def two_kernels(model: str, adapter: str, params: str, claimed: str = '"*"') -> str:
    """The overlap kernel and MODEL on symbolic addition (tests/suites/add.yaml), the models CLAIMED additive."""
    return suite_text("add", name="two", models=[OVERLAP, f"{{id: {model}, adapter: {adapter}, params: {params}}}"],
                      expectations=[ALL_ADDITIVE % claimed])


def _suite(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _verdicts(out: Path) -> list[tuple[str, str, str]]:
    frame = pd.read_csv(out / "expectations.csv")
    return sorted(zip(frame.expectation, frame.subject, frame.verdict))


def test_1_report_judges_failed_cells_and_unselected_models_as_run_does(tmp_path, capsys):
    suite = _suite(tmp_path, two_kernels("boom", "explodes-for-one-truth", "{}"))
    out = tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "csv"]) == 1
    run_verdicts = _verdicts(out)
    assert ("all-additive", "boom", "FAIL") in run_verdicts and ("all-additive", "overlap", "PASS") in run_verdicts
    capsys.readouterr()
    assert main(["report", "--suite", str(suite), "--out", str(out), "--format", "csv"]) == 1
    said = capsys.readouterr()
    assert "expectations 1/2 pass" in said.out and "1 cell(s) failed" in said.err
    assert _verdicts(out) == run_verdicts


def test_1_report_fails_on_cells_missing_from_the_store(tmp_path, capsys):
    suite = _suite(tmp_path, two_kernels("other", "kernel", "{kernel: overlap, weights: [0.0, 0.2, 1.0]}"))
    out = tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "csv", "--model", "overlap"]) == 0
    capsys.readouterr()
    assert main(["report", "--suite", str(suite), "--out", str(out), "--format", "csv"]) == 1
    said = capsys.readouterr()
    assert "1 cell(s) missing from the store, e.g. other on add seed 0" in said.err
    verdicts = pd.read_csv(out / "expectations.csv")
    row = verdicts[verdicts.subject == "other"].iloc[0]
    assert row.verdict == "FAIL" and "missing from the store" in row.detail
    # The whole suite run: now both agree it passes.
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "csv"]) == 0
    assert main(["report", "--suite", str(suite), "--out", str(out), "--format", "csv"]) == 0


PROFILED = suite_text("add", name="profiled", expectations=[
    "{id: leak, source: {paper: compbench, threshold: a test fixture}, claim: slope_below_one, models: [overlap], tasks: [add]}"],
    profiles={"alt": {"params": {"overlap": {"weights": [0.0, 0.1, 1.0]}}}})


def test_2_report_takes_the_profile_the_run_used(tmp_path, capsys):
    suite = _suite(tmp_path, PROFILED)
    out = tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "csv", "--profile", "alt"]) == 0
    ran = pd.read_csv(out / "leaderboard.csv")
    # The default profile's cell is not in the store: no green report from other cells.
    assert main(["report", "--suite", str(suite), "--out", str(out), "--format", "csv", "--profile", "default"]) == 2
    assert "no stored results" in capsys.readouterr().err
    # A plain report takes the profile summary.json records for the last run (#35 item 5), as --profile alt does.
    for named in ([], ["--profile", "alt"]):
        assert main(["report", "--suite", str(suite), "--out", str(out), "--format", "csv", *named]) == 0
        assert "with profile 'alt'" in capsys.readouterr().err  # the file and the profile it was loaded with
    again = pd.read_csv(out / "leaderboard.csv")
    assert again["mean"].tolist() == ran["mean"].tolist()
    slope = pd.read_csv(out / "records.csv").slope.iloc[0]
    assert abs(slope - 0.1 / 0.9) < 1e-9  # S/(1-S) of the alt profile's salience, not the default's 0.4/0.6


def test_3a_an_expectation_on_a_pair_that_never_runs_is_a_validation_error():
    text = """\
name: pairs
tasks:
  - {id: add, family: additive, params: {anchors: [[4], [4]]}}
  - {id: te, family: transitive_equivalence}
models:
  - {id: overlap, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}, tasks: [add]}
  - {id: relu, adapter: kernel, params: {kernel: relu_ntk}, tasks: [te]}
expectations:
  - {id: never, source: {paper: compbench, threshold: a test fixture}, claim: additive, models: [overlap], tasks: [te]}
"""
    with pytest.raises(SuiteError) as err:
        parse_suite(text, "pairs.yaml")
    (issue,) = err.value.issues
    assert issue.line == 9 and "selects no (model, task) pair the suite runs" in issue.message


def _pytest_suite(suite: Path, results: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", str(suite), "-p", "no:cacheprovider", "-q",
                           "--compbench-results", str(results), *extra],
                          capture_output=True, text=True, cwd=suite.parent, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.mark.slow
def test_3b_a_baseline_cell_whose_model_left_the_suite_fails_check_and_pytest_alike(tmp_path, capsys):
    both = two_kernels("other", "kernel", "{kernel: overlap, weights: [0.0, 0.2, 1.0]}")
    suite = _suite(tmp_path, both)
    out, base = tmp_path / "out", tmp_path / "base.json"
    assert main(["baseline", "record", "--suite", str(suite), "--results", str(out), "--out", str(base), "--quiet"]) == 0
    assert main(["check", "--suite", str(suite), "--results", str(out), "--baseline", str(base), "--quiet"]) == 0
    assert _pytest_suite(suite, out, "--compbench-baseline", str(base)).returncode == 0
    # The model leaves the suite: its baseline cell is missing from every command's view.
    suite.write_text(suite_text("add", name="two", expectations=[ALL_ADDITIVE % '"*"']))
    capsys.readouterr()
    assert main(["check", "--suite", str(suite), "--results", str(out), "--baseline", str(base), "--quiet"]) == 1
    assert "missing: other/add" in capsys.readouterr().out
    proc = _pytest_suite(suite, out, "--compbench-baseline", str(base))
    assert proc.returncode == 1, proc.stdout
    assert "missing: other/add" in proc.stdout


def test_4_a_tag_selector_that_matches_no_model_is_an_error_at_its_line(tmp_path, capsys):
    text = two_kernels("other", "kernel", "{kernel: relu_ntk}", claimed='"@kernal"')
    suite = _suite(tmp_path, text)
    assert main(["validate", str(suite)]) == 2
    err = capsys.readouterr().err
    assert f"{suite}:9: expectations[0].models[0]: tag 'kernal' is on no model of the suite and no adapter declares it" in err
    # A glob that matches nothing: the same rule.
    suite.write_text(two_kernels("other", "kernel", "{kernel: relu_ntk}", claimed='"mlp-*"'))
    assert main(["validate", str(suite)]) == 2
    assert "pattern 'mlp-*' matches no model" in capsys.readouterr().err


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A suite run once, its baseline recorded: (suite, results, baseline)."""
    tmp = tmp_path_factory.mktemp("recorded")
    suite = _suite(tmp, """\
name: gate
seeds: 2
tasks:
  - {id: add, family: additive, params: {anchors: [[4], [4]]}}
  - {id: te, family: transitive_equivalence}
models:
  - {id: overlap, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}
  - {id: lazy, adapter: mlp, params: {width: 128, init_scale: 1.0, lr: 0.05, max_steps: 400, center: true}}
""")
    out, base = tmp / "out", tmp / "base.json"
    assert main(["baseline", "record", "--suite", str(suite), "--results", str(out), "--out", str(base), "--quiet"]) == 0
    return suite, out, base


@pytest.mark.parametrize("policy, message", [
    ({"floor": math.nan}, "policy.heldout_r2.floor: must be a finite number ≥ 0, got nan"),
    ({"floor": "abc"}, "policy.heldout_r2.floor: must be a finite number ≥ 0, got 'abc'"),
    ({"direction": "Higher"}, "policy.heldout_r2.direction: 'Higher', but heldout_r2 is better higher"),
    ({"direction": "lower"}, "policy.heldout_r2.direction: 'lower', but heldout_r2 is better higher"),
    ({"tolerance": 1}, "policy.heldout_r2: unknown field(s) tolerance"),
])
def test_5_a_baseline_policy_is_validated_before_it_gates(recorded, tmp_path, capsys, policy, message):
    suite, out, base = recorded
    doc = json.loads(base.read_text())
    doc["policy"]["heldout_r2"].update(policy)
    # A clear regression the bad policy would otherwise wave through.
    for cell in doc["cells"].values():
        if "heldout_r2" in cell["metrics"]:
            cell["metrics"]["heldout_r2"]["mean"] += 0.5
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["check", "--suite", str(suite), "--results", str(out), "--baseline", str(bad), "--quiet"]) == 2
    assert message in capsys.readouterr().err


def test_6_check_does_not_gate_on_a_metric_the_report_calls_not_applicable(recorded, tmp_path, capsys):
    suite, out, base = recorded
    lazy_te = [r for r in ResultStore(out / "store") if r.model == "lazy" and r.task == "te"]
    # The centred network's theory predicts exactly 0 on every held-out pair: R² against it is n/a.
    assert lazy_te and all(r.not_applicable.get("theory_r2") == "theory constant" for r in lazy_te)
    doc = json.loads(base.read_text())
    assert "theory_r2" not in doc["cells"]["lazy/te"]["metrics"]
    assert doc["cells"]["lazy/te"]["not_applicable"] == {"theory_r2": "theory constant"}
    # A baseline recorded by compbench 0.1.0 gated on it: planted far from today's value, it is n/a, not REGRESSED.
    doc["cells"]["lazy/te"]["metrics"]["theory_r2"] = {"mean": 1.0, "std": 0.0, "n": 2, "values": [1.0, 1.0]}
    del doc["cells"]["lazy/te"]["not_applicable"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["check", "--suite", str(suite), "--results", str(out), "--baseline", str(old), "--quiet", "--verbose"]) == 0
    shown = capsys.readouterr().out
    line = next(l for l in shown.splitlines() if "lazy/te" in l and "theory_r2" in l)
    assert "n/a (theory constant)" in line and "REGRESSED" not in shown


def test_10_a_bare_name_shadowed_by_a_local_suite_is_an_error_naming_both(tmp_path, monkeypatch, capsys):
    (tmp_path / "suites").mkdir()
    shutil.copy(ROOT / "suites" / "kernel-limits.yaml", tmp_path / "suites" / "kernel-limits.yaml")
    monkeypatch.chdir(tmp_path)
    for argv in (["run", "--suite", "kernel-limits", "--quiet"],
                 ["check", "--suite", "kernel-limits", "--baseline", str(ROOT / "baselines" / "kernel-limits.json")],
                 ["report", "--suite", "kernel-limits"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert str(ROOT / "suites" / "kernel-limits.yaml") in err and str(tmp_path / "suites" / "kernel-limits.yaml") in err
    assert not (tmp_path / "results").exists()  # nothing ran


def test_10_every_command_says_which_file_it_loaded(tmp_path, capsys):
    suite = _suite(tmp_path, PROFILED)
    assert main(["run", "--suite", str(suite), "--out", str(tmp_path / "o"), "--quiet", "--format", "csv"]) == 0
    assert f"suite 'profiled' from {suite}" in capsys.readouterr().err


def test_11_the_code_a_cell_key_covers_is_derived_from_imports():
    files = {str(p.relative_to(ROOT / "compbench")) for p in result_code_files()}
    assert "losses.py" in files  # imported by adapters and the suite check; was missed by the hand-kept list
    for package in ("adapters", "theory", "training", "tasks", "encodings"):
        on_disk = {str(p.relative_to(ROOT / "compbench")) for p in (ROOT / "compbench" / package).glob("*.py")}
        assert on_disk <= files, on_disk - files
    for never in ("claims/builtin.py", "report/tables.py", "check/compare.py", "suite/load.py", "outcome/expectations.py",
                  "outcome/__init__.py", "cli.py"):
        assert never not in files


def test_12_a_store_written_by_compbench_0_1_0_is_reported_with_the_same_numbers(tmp_path, capsys):
    out = tmp_path / "out"
    (out / "store").mkdir(parents=True)
    shutil.copy(LEGACY / "records.sqlite", out / "store" / "records.sqlite")
    suite = LEGACY / "suite.yaml"
    # Reported, marked stale (computed by another compbench): exit 1 until `run` recomputes them.
    assert main(["report", "--suite", str(suite), "--out", str(out), "--format", "md,csv"]) == 1
    said = capsys.readouterr()
    assert "8 cells (0 ok, 8 stale)" in said.out and "8 cell(s) stale" in said.err
    cols = ["model", "task", "status", "metric", "n_ok", "mean", "std"]
    now = pd.read_csv(out / "leaderboard.csv")[cols]
    then = pd.read_csv(LEGACY / "leaderboard.csv")[cols]
    pd.testing.assert_frame_equal(now, then)
    assert _verdicts(out) == sorted(zip(*[pd.read_csv(LEGACY / "expectations.csv")[c] for c in
                                          ("expectation", "subject", "verdict")]))
    assert "computed by compbench 0.1.0 (record schema 1)" in (out / "leaderboard.md").read_text()
    # run recomputes the stale cells only; then every command agrees the store is current.
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "csv"]) == 0
    assert "8 cells run, 0 reused" in capsys.readouterr().out
    assert main(["report", "--suite", str(suite), "--out", str(out), "--format", "csv"]) == 0


def test_12_editing_a_claim_or_the_report_retrains_nothing(tmp_path, capsys, monkeypatch):
    suite = _suite(tmp_path, PROFILED)
    out = tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "csv"]) == 0
    before = {r.key: r.code for r in ResultStore(out / "store")}
    import compbench.runner.cells as cells

    claims = ROOT / "compbench" / "claims" / "builtin.py"
    assert claims not in result_code_files() and (ROOT / "compbench" / "report" / "tables.py") not in result_code_files()
    cells._code_version.cache_clear()
    capsys.readouterr()
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "csv"]) == 0
    assert "0 cells run, 1 reused" in capsys.readouterr().out
    assert {r.key: r.code for r in ResultStore(out / "store")} == before


def test_records_round_trip_and_schema_1_dicts_migrate():
    rec = CellRecord(key="k", task="t", model="m", seed=3, status=Status.OK, kind="regression",
                     metrics={"heldout_r2": 0.5, "slope": math.nan}, not_applicable={"theory_r2": "2 cells"},
                     predictions=[0.1, 0.2], version="0.1.0", code="abc")
    back = CellRecord.from_dict(json.loads(json.dumps(rec.to_dict())))
    assert back.metrics["heldout_r2"] == 0.5 and math.isnan(back.metrics["slope"]) and back.group == "m"
    assert back.not_applicable == {"theory_r2": "2 cells"} and back.status is Status.OK and back.code == "abc"
    old = {"key": "k", "task": "te", "model": "m", "group": "m", "seed": 0, "status": "error", "error": "boom",
           "error_stage": "fit_seeds", "schema_version": 1, "wall_time": 1.5, "n_test": 4}
    migrated = CellRecord.from_dict(old)
    assert migrated.failed and migrated.error.message == "boom" and migrated.error.stage == "fit_seeds"
    assert migrated.metrics == {} and migrated.code is None and migrated.n_test == 4
    ok = CellRecord.from_dict({"key": "k", "task": "te", "model": "m", "seed": 0, "status": "ok", "heldout_acc": 0.75,
                               "n_classes": 3})
    assert ok.kind == "multiclass" and ok.metrics == {"heldout_acc": 0.75}
    # Plugins' claims written against schema-1 dicts still read a record as one.
    assert ok["heldout_acc"] == 0.75 and ok["status"] == "ok" and "heldout_acc" in ok and "heldout_r2" not in ok


SHAPED = """\
name: shaped
seeds: 2
tasks:
  - id: habitat
    family: table
    params:
      components:
        - {name: size, values: [small, big]}
        - {name: habitat, values: [land, water, air]}
      kind: multiclass
      target:
        classes: [walks, swims, flies]
        cells:
          - [small, land, walks]
          - [big, land, walks]
          - [small, water, swims]
          - [big, water, swims]
          - [small, air, flies]
          - [big, air, flies]
      held_out: [[small, water], [big, air]]
  - {id: modules, family: modular_teacher, params: {split: random, samples_per_cell: 8, eval_samples: 16}, encoding: khot}
  - {id: add, family: additive, params: {anchors: [[4], [4]]}}
models:
  - {id: kernel, adapter: kernel, params: {kernel: relu_ntk}}
  - {id: net, adapter: mlp, params: {width: 32, lr: 0.05, max_steps: 100, center: true}, tasks: [habitat, add]}
"""


def test_12_a_stored_record_rescored_from_its_outputs_equals_the_fresh_scores(tmp_path):
    from compbench.runner.run import SuiteRunner
    from compbench.scoring.score import rescore

    loaded = parse_suite(SHAPED, "shaped.yaml")
    out = tmp_path / "out"
    assert main(["run", "--suite", str(_suite(tmp_path, SHAPED)), "--out", str(out), "--quiet", "--format", "csv"]) in (0, 1)
    runner = SuiteRunner(loaded, out, "cpu", resolve=False)
    stored = runner.store.latest()
    kinds = set()
    for job in runner.jobs:
        for key in job.keys:
            rec = stored[key]
            assert rec.ok, rec.message
            again = rescore(job.task, rec)
            kinds.add((rec.kind, rec.samples is not None))
            assert again.metrics.keys() == rec.metrics.keys()
            for m, v in rec.metrics.items():  # exactly: scoring reads the rounded outputs the record stores
                assert again.metrics[m] == v or (math.isnan(v) and math.isnan(again.metrics[m])), (job.model.id, job.task.entry.id, m)
            assert again.predictions == rec.predictions and again.not_applicable == rec.not_applicable
    runner.store.close()
    # multiclass and function-valued cells keep their per-sample outputs; cell means suffice for the rest
    assert kinds == {("multiclass", True), ("regression", True), ("regression", False)}


def test_12_editing_scoring_code_rescores_stored_cells_and_retrains_none(tmp_path, capsys, monkeypatch):
    import compbench.scoring.score as score

    suite = _suite(tmp_path, SHAPED)
    out = tmp_path / "out"
    first = main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "csv"])
    before = pd.read_csv(out / "records.csv")
    # An edit to scoring: another scoring hash, and a metric computed differently.
    real = score.cell_metrics
    monkeypatch.setattr(score, "scoring_version", lambda: "edited-scoring")
    monkeypatch.setattr(score, "cell_metrics", lambda *a, **k: {**real(*a, **k), "corr": 42.0})
    capsys.readouterr()
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "csv"]) == first
    said = capsys.readouterr().out
    assert "0 cells run" in said and "rescored by this compbench's scoring code, not retrained" in said
    after = pd.read_csv(out / "records.csv")
    add = after[after.task == "add"]
    assert (add["corr"] == 42.0).all() and not (before[before.task == "add"]["corr"] == 42.0).any()
    pd.testing.assert_series_equal(after.heldout_r2, before.heldout_r2)  # the other metrics as they were
    assert all(r.scoring == "edited-scoring" for r in ResultStore(out / "store") if r.task == "add")
    # report reads the rescored records; a second run rescores nothing more.
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "csv"]) == first
    assert "rescored" not in capsys.readouterr().out


@pytest.mark.slow
def test_a_suite_reads_the_same_in_every_process_so_the_report_cache_holds():
    """The report's inputs digest hashes the loaded suite: a model with two tags (slot-decoder's ceiling) once
    read differently under each string-hash seed, so every cached run redrew the whole report."""
    code = "from compbench.suite import load_suite; l = load_suite('slot-decoder'); print(repr((l.suite, l.models)))"
    seen = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120,
                           env={**os.environ, "PYTHONHASHSEED": str(seed), "PYTHONPATH": str(ROOT)}).stdout
            for seed in range(4)}
    assert len(seen) == 1 and "tags=('ceiling', 'kernels')" in seen.pop()
