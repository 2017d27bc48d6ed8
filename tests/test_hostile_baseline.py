"""Hand-edited and hollow baselines (issue #35, items 6 and 22), each through the real `compbench check`.

A baseline is read as strictly as its policy: typed, finite numbers within what the metric can take,
every metric the run measures present, the profile it was recorded under; anything else ends in
exit 2 with a message naming the file, cell and metric, never a traceback and never a green check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiny_suites import cli as run_cli

SUITE = """\
name: hostile-baseline
seeds: 3
tasks:
  - {id: te, family: transitive_equivalence, params: {classes: [2, 2]}}
models:
  - {id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}
profiles:
  alt:
    description: other weights
    params: {k: {weights: [0.0, 0.5, 1.0]}}
"""


def cli(*argv: str) -> tuple[int, str]:
    """`compbench ARGV` in this process: exit code and stdout+stderr (tiny_suites.cli)."""
    done = run_cli(*argv)
    return done.rc, done.text


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> tuple[Path, Path, dict]:
    tmp = tmp_path_factory.mktemp("baseline")
    suite = tmp / "s.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    base = tmp / "base.json"
    rc, text = cli("baseline", "record", "--suite", str(suite), "--out", str(base), "--results", str(tmp / "out"), "-q")
    assert rc == 0, text
    return suite, tmp, json.loads(base.read_text(encoding="utf-8"))


def check(recorded, doc: dict, *extra: str) -> tuple[int, str]:
    suite, tmp, _ = recorded
    path = tmp / "edited.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    return cli("check", "--suite", str(suite), "--baseline", str(path), "--results", str(tmp / "out"), "-q", *extra)


def edited(recorded, metric_edit) -> dict:
    doc = json.loads(json.dumps(recorded[2]))
    metric_edit(doc["cells"]["k/te"]["metrics"])
    return doc


def test_the_recorded_baseline_passes_its_check(recorded):
    rc, text = check(recorded, recorded[2])
    assert rc == 0, text


def _set(metric: str, field: str, value):
    return lambda metrics: metrics[metric].__setitem__(field, value)


@pytest.mark.parametrize(("edit", "phrase"), [
    (lambda m: m.pop("heldout_acc"), "has no heldout_acc, which this run measures"),
    (_set("heldout_acc", "std", 1e6), "std 1000000.0 is impossible"),
    (_set("heldout_acc", "std", "0.1"), "std must be a finite number, got '0.1'"),
    (_set("heldout_acc", "mean", "0.5"), "mean must be a finite number, got '0.5'"),
    (_set("heldout_acc", "mean", 1.5), "mean 1.5 lies outside [0, 1]"),
    (_set("heldout_acc", "n", 10**400), "n must be a whole number of seeds"),
    (_set("heldout_acc", "n", True), "n must be a whole number of seeds"),
    (lambda m: m["heldout_acc"].update(n=3, values=[0.0, 1.0, 1.0], mean=2 / 3, std=1e6), "at most 0.57735"),
    (lambda m: m["heldout_acc"].update(n=3, values=[0.0, 1.0, 1.0], mean=2 / 3, std=0.1), "disagree with its values"),
    (_set("heldout_acc", "values", [0.1, 0.2]), "values must be a list of 1 finite numbers"),
], ids=["metric-missing", "std-1e6", "std-str", "mean-str", "mean-out-of-range", "n-huge", "n-bool", "std-1e6-of-3",
        "std-not-its-values", "values-short"])
def test_a_hand_edited_baseline_cell_is_refused_naming_cell_and_metric(recorded, edit, phrase):
    rc, text = check(recorded, edited(recorded, edit))
    assert rc == 2, text
    assert "Traceback" not in text and phrase in text and "k/te" in text, text


@pytest.mark.parametrize("floor", ["1e9", True, float("nan")])
def test_a_policy_floor_must_be_a_number(recorded, floor):
    doc = json.loads(json.dumps(recorded[2]))
    doc["policy"]["heldout_acc"]["floor"] = floor
    path = recorded[1] / "policy.json"
    path.write_text(json.dumps(doc).replace("NaN", '"NaN"') if floor != floor else json.dumps(doc), encoding="utf-8")
    rc, text = cli("check", "--suite", str(recorded[0]), "--baseline", str(path), "--results", str(recorded[1] / "out"), "-q")
    assert rc == 2 and "policy.heldout_acc.floor" in text and "Traceback" not in text, text


def test_a_baseline_of_another_profile_is_refused_before_running(recorded):
    suite, tmp, doc = recorded
    alt = tmp / "alt.json"
    rc, text = cli("baseline", "record", "--suite", str(suite), "--profile", "alt", "--out", str(alt),
                   "--results", str(tmp / "alt-out"), "-q")
    assert rc == 0, text
    assert json.loads(alt.read_text(encoding="utf-8"))["profile"] == "alt"
    rc, text = cli("check", "--suite", str(suite), "--baseline", str(alt), "--results", str(tmp / "out"), "-q")
    assert rc == 2 and "recorded under profile 'alt'" in text and "the default profile" in text, text
    assert "cells run" not in text  # refused before anything ran
    rc, text = cli("check", "--suite", str(suite), "--profile", "alt", "--baseline", str(alt), "--results", str(tmp / "alt-out"), "-q")
    assert rc == 0, text
    # An old baseline without the field is the default profile's: readable, and refused under --profile alt.
    old = {k: v for k, v in doc.items() if k != "profile"}
    assert check(recorded, old)[0] == 0
    rc, text = check(recorded, old, "--profile", "alt")
    assert rc == 2 and "recorded under the default profile" in text, text


def test_the_bundled_baselines_read_under_the_stricter_rules():
    from compbench.check import Baseline

    paths = sorted((Path(__file__).resolve().parent.parent / "baselines").glob("*.json"))
    assert paths
    from compbench.suite import load_suite

    for path in paths:  # the default profile's, or (kernel-limits-images-paper: `ci`) a profile of its suite
        base = Baseline.read(path)
        assert base.profile is None or base.profile in load_suite(base.suite).suite.profiles, (path, base.profile)
