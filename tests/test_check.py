"""Baselines and `compbench check`: planted regressions fail, seed noise does not, missing cells are named."""

from __future__ import annotations

import json

import pytest

from compbench.check import Baseline, BaselineError, baseline_from_records, cell_summaries, compare
from compbench.cli import main
from compbench.runner.run import run_suite
from compbench.suite import parse_suite, seeds_override

FAMILY = """\
name: family
seeds: 6
tasks:
  - {id: te, family: transitive_equivalence}
  - {id: add, family: additive, params: {anchors: [[0, 8], [0, 8]]}}
models:
  - id: rich
    adapter: mlp
    params: {width: 256, init_scale: 1.0e-3, lr: 0.1, max_steps: 3000, loss_tol: 1.0e-3}
  - id: overlap
    adapter: kernel
    params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}
"""


def run_records(tmp_path, text, seed_start=0, n_seeds=6):
    loaded = parse_suite(text, "family.yaml")
    loaded = seeds_override(loaded, n_seeds, seed_start)
    return run_suite(loaded, tmp_path / "results", device="cpu", progress=False).records


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("base")
    return baseline_from_records("family", run_records(tmp, FAMILY), "cpu")


def test_baseline_json_round_trip_and_content(baseline, tmp_path):
    path = tmp_path / "b.json"
    baseline.write(path)
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == 1 and doc["suite"] == "family"
    cell = doc["cells"]["rich/te"]["metrics"]["heldout_acc"]
    assert cell["n"] == 6 and cell["mean"] == 1.0 and len(cell["values"]) == 6
    assert Baseline.read(path).cells == baseline.cells


def test_same_run_passes_and_planted_regression_fails(baseline, tmp_path):
    same = compare(baseline, cell_summaries(run_records(tmp_path, FAMILY)))
    assert not any(r.failed for r in same) and {r.verdict for r in same} <= {"ok", "n/a"}
    # Planted regression: the "rich" member initialised lazily can no longer infer transitive equivalence.
    planted = FAMILY.replace("init_scale: 1.0e-3, lr: 0.1", "init_scale: 1.0, lr: 0.02")
    rows = compare(baseline, cell_summaries(run_records(tmp_path, planted)))
    regressed = {(r.cell, r.metric) for r in rows if r.verdict == "REGRESSED"}
    assert ("rich/te", "heldout_acc") in regressed
    assert not any(cell.startswith("overlap/") for cell, _ in regressed)


@pytest.mark.slow
def test_seed_noise_alone_rarely_fails(baseline, tmp_path):
    # 20 re-draws with fresh seeds (6 each): the default tolerance must not call them regressions.
    alarms = 0
    for draw in range(1, 21):
        rows = compare(baseline, cell_summaries(run_records(tmp_path, FAMILY, seed_start=6 * draw)))
        alarms += any(r.verdict == "REGRESSED" for r in rows)
    assert alarms / 20 <= 0.1, alarms


def test_missing_and_new_cells_are_reported(baseline, tmp_path):
    fewer = FAMILY.replace("  - {id: te, family: transitive_equivalence}\n", "")
    rows = compare(baseline, cell_summaries(run_records(tmp_path, fewer)))
    missing = {r.cell for r in rows if r.verdict == "missing"}
    assert missing == {"rich/te", "overlap/te"}
    renamed = FAMILY.replace("id: overlap", "id: overlap2")
    rows = compare(baseline, cell_summaries(run_records(tmp_path, renamed)))
    assert {r.cell for r in rows if r.verdict == "new"} == {"overlap2/te", "overlap2/add"}


def test_cli_exit_codes(tmp_path, capsys):
    suite = tmp_path / "family.yaml"
    suite.write_text(FAMILY)
    base = tmp_path / "baselines" / "family.json"
    res = ["--results", str(tmp_path / "res"), "--quiet"]
    assert main(["baseline", "record", "--suite", str(suite), "--out", str(base), *res]) == 0
    assert main(["check", "--suite", str(suite), "--baseline", str(base), *res]) == 0
    suite.write_text(FAMILY.replace("init_scale: 1.0e-3, lr: 0.1", "init_scale: 1.0, lr: 0.02"))
    capsys.readouterr()
    assert main(["check", "--suite", str(suite), "--baseline", str(base), *res]) == 1
    out = capsys.readouterr().out
    assert "REGRESSED: rich/te heldout_acc: baseline 1.0000" in out
    assert main(["check", "--suite", str(suite), "--baseline", str(tmp_path / "nope.json"), *res]) == 2
    assert "no such baseline file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(BaselineError, match="schema version 99 != 1"):
        Baseline.read(bad)
