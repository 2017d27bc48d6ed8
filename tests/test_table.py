"""The `table` family: hand-computed targets and splits, a hand kernel solve, a run, located errors, fuzzing."""

from __future__ import annotations

import copy
import itertools
import json
import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compbench import theory
from compbench.runner.run import run_suite
from compbench.suite import SuiteError, parse_suite
from compbench.tasks import TaskData, TaskParamError, make_task
from compbench.tasks import table as table_module

DOCS = Path(__file__).resolve().parent.parent / "docs" / "tasks.md"

COLOUR = {"name": "colour", "values": ["red", "green", "blue"]}
SHAPE = {"name": "shape", "values": ["circle", "square", "star", "moon"]}
SUM = {"colour": [1.0, 2.0, 3.0], "shape": [0.0, 0.5, -1.0, 2.0]}
PAIRS = [{"components": ["colour", "shape"], "values": [[0, 0, 0, 1], [0, 0, 0, 0], [1, 0, 0, 0]]}]
HELD = [["red", "circle"], ["blue", "star"], ["green", "moon"]]


def grid_index(task: TaskData, *labels: str) -> int:
    """Index of a cell given by labels, found by scanning (independent of the family's own lookup)."""
    for i, cell in enumerate(task.cells):
        if tuple(task.label(c, int(v)) for c, v in enumerate(cell)) == labels:
            return i
    raise AssertionError(labels)


def held_labels(task: TaskData) -> set[tuple[str, ...]]:
    return {tuple(task.label(c, int(v)) for c, v in enumerate(cell)) for cell in task.cells[~task.train_mask]}


# --- hand-computed targets and splits ---------------------------------------------------------


def test_sum_targets_cells_labels_and_held_out():
    t = make_task("table", components=[COLOUR, SHAPE], target={"sum": SUM}, held_out=HELD)
    assert t.family == "table" and t.kind == "regression" and t.n_values == (3, 4)
    assert t.component_names == ("colour", "shape")
    assert t.value_labels == (("red", "green", "blue"), ("circle", "square", "star", "moon"))
    # Last component fastest: (red, circle), (red, square), ..., (blue, moon).
    assert t.cells[:5].tolist() == [[0, 0], [0, 1], [0, 2], [0, 3], [1, 0]]
    assert t.label(0, 2) == "blue" and t.label(1, 3) == "moon"
    # colour value + shape value, by hand.
    assert t.y.reshape(3, 4).tolist() == [[1.0, 1.5, 0.0, 3.0], [2.0, 2.5, 1.0, 4.0], [3.0, 3.5, 2.0, 5.0]]
    # Held out: (red, circle) = 0, (green, moon) = 1·4 + 3 = 7, (blue, star) = 2·4 + 2 = 10.
    assert np.flatnonzero(~t.train_mask).tolist() == [0, 7, 10]
    assert (t.n_train, t.n_test) == (9, 3)


def test_sum_plus_pairs_targets():
    t = make_task("table", components=[COLOUR, SHAPE], target={"sum": SUM, "pairs": PAIRS}, held_out=HELD)
    # The sum above plus 1 at (red, moon) and 1 at (blue, circle).
    assert t.y.reshape(3, 4).tolist() == [[1.0, 1.5, 0.0, 4.0], [2.0, 2.5, 1.0, 4.0], [4.0, 3.5, 2.0, 5.0]]


def test_pair_table_is_indexed_by_the_first_named_component():
    pairs = [{"components": ["shape", "colour"], "values": [[1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 7]]}]
    t = make_task("table", components=[COLOUR, SHAPE], target={"sum": {}, "pairs": pairs}, held_out=[["red", "square"]])
    # values[shape][colour]: 1 at (circle, red), 7 at (moon, blue); zero elsewhere.
    expected = np.zeros(12)
    expected[grid_index(t, "red", "circle")] = 1.0
    expected[grid_index(t, "blue", "moon")] = 7.0
    assert t.y.tolist() == expected.tolist()


def test_sum_may_omit_a_component_which_then_contributes_zero():
    t = make_task("table", components=[COLOUR, SHAPE], target={"sum": {"shape": SUM["shape"]}}, held_out=HELD)
    assert t.y.reshape(3, 4).tolist() == [[0.0, 0.5, -1.0, 2.0]] * 3


def test_cells_targets_in_any_order():
    rows = [["b", "y", -1.0], ["a", "x", 1.5], ["b", "x", 2.0], ["a", "y", -0.25]]
    t = make_task(
        "table", components=[{"name": "p", "values": ["a", "b"]}, {"name": "q", "values": ["x", "y"]}],
        target={"cells": rows}, held_out=[["b", "y"]],
    )
    assert t.y.tolist() == [1.5, -0.25, 2.0, -1.0]
    assert t.train_mask.tolist() == [True, True, True, False]


def test_n_gives_numeric_labels_and_numbers_are_labels():
    t = make_task(
        "table", components=[{"name": "x", "n": 3}, {"name": "y", "values": [10, 20]}],
        target={"sum": {"x": [0, 1, 2], "y": [0, 10]}}, held_out=[[2, 20], ["0", "10"]],
    )
    assert t.value_labels == (("0", "1", "2"), ("10", "20"))
    assert held_labels(t) == {("2", "20"), ("0", "10")}
    assert t.y.tolist() == [0.0, 10.0, 1.0, 11.0, 2.0, 12.0]


def test_classification_kind_with_pm_one_targets():
    t = make_task(
        "table", components=[COLOUR, {"name": "size", "values": ["small", "big"]}], kind="classification",
        target={"sum": {"size": [-1, 1]}}, held_out=[["red", "small"], ["blue", "big"]],
    )
    assert t.kind == "classification" and t.y.tolist() == [-1.0, 1.0] * 3


def test_task_contract_and_params_json_round_trip():
    t = make_task("table", components=[COLOUR, {"name": "n3", "n": 3}], target={"sum": {"n3": [1, 2, 3]}},
                  split={"random": 0.3, "seed": 5})
    assert t.cells.dtype == np.int64 and t.y.dtype == np.float64 and t.train_mask.dtype == bool
    assert t.cells.shape == (9, 2) and t.n_test == 3  # round(0.3 · 9) = 3
    again = make_task("table", **json.loads(json.dumps(t.params)))
    assert again.y.tolist() == t.y.tolist() and again.train_mask.tolist() == t.train_mask.tolist()
    assert again.value_labels == t.value_labels == (("red", "green", "blue"), ("0", "1", "2"))


def test_label_without_labels_is_the_value_index():
    t = make_task("additive", anchors=[[4], [4]])
    assert t.value_labels == () and t.label(1, 7) == "7"


# 3 × 3 grid, random: 0.5 → round(4.5) = 4 held-out cells (halves to even).
THREE = [{"name": "a", "values": ["a0", "a1", "a2"]}, {"name": "b", "values": ["b0", "b1", "b2"]}]


def random_task(seed: int, fraction: float = 0.5) -> TaskData:
    return make_task("table", components=THREE, target={"sum": {}}, split={"random": fraction, "seed": seed})


def test_random_split_exact_cells_for_a_seed():
    t = random_task(0)
    # default_rng(0).choice(9, 4, replace=False) = cells 2, 4, 5, 7; every value keeps a training cell.
    assert np.flatnonzero(~t.train_mask).tolist() == [2, 4, 5, 7]
    assert held_labels(t) == {("a0", "b2"), ("a1", "b1"), ("a1", "b2"), ("a2", "b1")}
    assert random_task(0).train_mask.tolist() == t.train_mask.tolist()


def test_random_split_redraws_when_a_value_would_be_unseen():
    # default_rng(2)'s first draw (0, 1, 2, 5) holds out all of a = a0; its second, (0, 2, 4, 7), does not.
    rng = np.random.default_rng(2)
    assert sorted(rng.choice(9, size=4, replace=False).tolist()) == [0, 1, 2, 5]
    t = random_task(2)
    assert np.flatnonzero(~t.train_mask).tolist() == [0, 2, 4, 7]
    assert random_task(2).train_mask.tolist() == t.train_mask.tolist()
    assert random_task(2).train_mask.tolist() != random_task(0).train_mask.tolist()


def test_random_split_rejects_too_many_and_exhausted_draws(monkeypatch):
    with pytest.raises(TaskParamError, match=r"= 7 cells, but at most 6 can be held out") as exc:
        random_task(0, 0.8)
    assert exc.value.loc == ("split", "random")
    with pytest.raises(TaskParamError, match=r"= 0 cells") as exc:
        random_task(0, 0.05)
    monkeypatch.setattr(table_module, "MAX_DRAWS", 1)
    with pytest.raises(TaskParamError, match=r"none of 1 draws of 4 held-out cells with seed 2") as exc:
        random_task(2)
    assert exc.value.loc == ("split",)


# --- min-norm kernel regression equals a hand solve -------------------------------------------

# 2 × 2 table: y = sum + pair = [[1, 4], [2, 10]] (the pair adds 5 at (a1, b1)); hold out (a1, b1).
TWO_BY_TWO = {
    "components": [{"name": "a", "values": ["a0", "a1"]}, {"name": "b", "values": ["b0", "b1"]}],
    "target": {"sum": {"a": [1.0, 2.0], "b": [0.0, 3.0]}, "pairs": [{"components": ["a", "b"], "values": [[0, 0], [0, 5]]}]},
    "held_out": [["a1", "b1"]],
}


def hand_prediction(s: float, y00: float, y01: float, y10: float) -> float:
    """Held-out (1,1) prediction of min-norm regression with κ = (0, s, 1), trained on (0,0), (0,1), (1,0).

    K = [[1, s, s], [s, 1, 0], [s, 0, 1]] and k* = (0, s, s). Solving K α = y: α₁ = y01 − s α₀,
    α₂ = y10 − s α₀, α₀ (1 − 2s²) = y00 − s (y01 + y10); so f = s (α₁ + α₂) =
    s (y01 + y10 − 2 s y00) / (1 − 2 s²). At s = ½ this is y01 + y10 − y00 (pure additivity).
    """
    return s * (y01 + y10 - 2 * s * y00) / (1 - 2 * s * s)


@pytest.mark.parametrize(("s", "expected"), [(0.5, 5.0), (0.3, 1.62 / 0.82)])
def test_min_norm_kernel_regression_on_a_table_equals_the_hand_solve(s, expected):
    t = make_task("table", **TWO_BY_TWO)
    assert t.y.tolist() == [1.0, 4.0, 2.0, 10.0] and t.train_mask.tolist() == [True, True, True, False]
    assert hand_prediction(s, 1.0, 4.0, 2.0) == pytest.approx(expected, abs=1e-12)
    train, test = t.cells[t.train_mask], t.cells[~t.train_mask]
    weights = [0.0, s, 1.0]
    f = theory.kernel_regression(
        theory.overlap_kernel(train, train, weights), theory.overlap_kernel(test, train, weights), t.y[t.train_mask]
    )
    assert f.tolist() == pytest.approx([expected], abs=1e-10)
    assert expected != 10.0  # the interaction is not predicted: a kernel model adds up what it saw


def task_yaml(params: dict) -> str:
    return yaml.safe_dump({"id": "t", "family": "table", "params": params}, sort_keys=False)


RUN_SUITE = """\
name: table-run
seeds: 1
tasks:
{task}
models:
  - {{id: half, adapter: kernel, params: {{kernel: overlap, weights: [0.0, 0.5, 1.0]}}}}
  - {{id: third, adapter: kernel, params: {{kernel: overlap, weights: [0.0, 0.3, 1.0]}}}}
"""


def test_table_suite_runs_end_to_end_with_the_kernel_adapter(tmp_path):
    task = "\n".join("  " + line for line in ("- " + task_yaml(TWO_BY_TWO).replace("\n", "\n  ")).splitlines())
    summary = run_suite(parse_suite(RUN_SUITE.format(task=task), "suite.yaml"), tmp_path, device="cpu", progress=False)
    recs = {r["model"]: r for r in summary.records}
    assert set(recs) == {"half", "third"}
    for model, s in (("half", 0.5), ("third", 0.3)):
        rec = recs[model]
        assert rec["status"] == "ok" and rec["task"] == "t" and rec["family"] == "table"
        assert (rec["n_train"], rec["n_test"]) == (3, 1)
        want = hand_prediction(s, 1.0, 4.0, 2.0)
        # Training cells are interpolated; the held-out cell (last in grid order) is the hand solve.
        assert rec["predictions"] == pytest.approx([1.0, 4.0, 2.0, want], abs=1e-8)
        assert rec["theory_predictions"] == pytest.approx([1.0, 4.0, 2.0, want], abs=1e-8)


# --- every mistake located: file:line: field: message -----------------------------------------

SUITE = """\
name: t
seeds: 1
tasks:
  - id: cs
    family: table
    params:
      components:
        - {name: colour, values: [red, green, blue]}
        - {name: shape, values: [circle, square, star, moon]}
      target:
        sum: {colour: [1.0, 2.0, 3.0], shape: [0.0, 0.5, -1.0, 2.0]}
        pairs:
          - components: [colour, shape]
            values:
              - [0, 0, 0, 1]
              - [0, 0, 0, 0]
              - [1, 0, 0, 0]
      kind: regression
      held_out:
        - [red, circle]
        - [blue, star]
        - [green, moon]
models:
  - {id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.5, 1.0]}}
"""

CELLS_TARGET = """\
      target:
        cells:
          - [red, circle, 1.0]
          - [red, square, 1.0]
          - [red, star, 1.0]
          - [red, moon, 1.0]
          - [green, circle, 1.0]
          - [green, square, -1.0]
          - [green, star, 1.0]
          - [green, moon, 1.0]
          - [blue, circle, -1.0]
          - [blue, square, 1.0]
          - [blue, star, 1.0]
          - [blue, moon, 1.0]
"""

_TARGET_BLOCK = SUITE[SUITE.index("      target:\n"):SUITE.index("      kind:")]
CELLS_SUITE = SUITE.replace(_TARGET_BLOCK, CELLS_TARGET)


def test_the_valid_suites_validate():
    for text in (SUITE, CELLS_SUITE, CELLS_SUITE.replace("kind: regression", "kind: classification")):
        task = parse_suite(text, "suite.yaml").suite.tasks[0]
        assert make_task(task.family, **task.params).n_test == 3


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) == 1, old
    return text.replace(old, new)


def line_of(text: str, marker: str) -> int:
    hits = [i for i, line in enumerate(text.splitlines(), 1) if marker in line]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


# (base, old, new, field, marker of the line, message)
ERRORS = [
    ("unknown-label", SUITE, "- [blue, star]", "- [blue, triangle]", "held_out[1]", "- [blue, triangle]",
     "unknown shape label 'triangle'; known: circle, square, star, moon"),
    ("held-out-length", SUITE, "- [blue, star]", "- [blue]", "held_out[1]", "- [blue]",
     "a held-out cell needs 2 labels, one per component (colour, shape), got 1"),
    ("held-out-twice", SUITE, "- [green, moon]", "- [red,  circle]", "held_out[2]", "- [red,  circle]",
     "cell (red, circle) is listed twice (first at held_out[0])"),
    ("held-out-unseen", SUITE, "- [blue, star]\n        - [green, moon]", "- [red, square]\n        - [red, star]\n        - [red, moon]",
     "held_out[3]", "- [red, moon]",
     "holding out (red, moon) leaves colour 'red' in no training cell (every cell with it is held out: "
     "(red, circle), (red, square), (red, star), (red, moon)); keep at least one of them in training"),
    ("held-out-empty", SUITE, "      held_out:\n        - [red, circle]\n        - [blue, star]\n        - [green, moon]\n",
     "      held_out: []\n", "held_out", "held_out: []", "is empty"),
    ("pair-row-length", SUITE, "- [0, 0, 0, 0]", "- [0, 0, 0]", "target.pairs[0].values[1]", "- [0, 0, 0]",
     "row 1 (colour 'green') needs 4 values, one per shape label (circle, square, star, moon), got 3"),
    ("pair-rows", SUITE, "              - [1, 0, 0, 0]\n", "", "target.pairs[0].values", "            values:",
     "needs 3 rows, one per colour label (red, green, blue), got 2"),
    ("pair-unknown-component", SUITE, "[colour, shape]", "[colour, size]", "target.pairs[0].components[1]", "[colour, size]",
     "unknown component 'size'; known: colour, shape"),
    ("pair-same-component", SUITE, "[colour, shape]", "[colour, colour]", "target.pairs[0].components[1]", "[colour, colour]",
     "names component 'colour' twice; a pair term needs two different components"),
    ("sum-unknown-component", SUITE, "shape: [0.0, 0.5, -1.0, 2.0]}", "shape: [0.0, 0.5, -1.0, 2.0], size: [1]}",
     "target.sum.size", "sum:", "unknown component 'size'; known: colour, shape"),
    ("sum-length", SUITE, "colour: [1.0, 2.0, 3.0]", "colour: [1.0, 2.0]", "target.sum.colour", "sum:",
     "needs 3 values, one per colour label (red, green, blue), got 2"),
    ("both-sum-and-cells", SUITE, "        pairs:\n", "        cells: [[red, circle, 1.0]]\n        pairs:\n",
     "target.cells", "cells: [[red", "give exactly one of 'sum' or 'cells', got both"),
    ("neither-sum-nor-cells", SUITE, "        sum: {colour: [1.0, 2.0, 3.0], shape: [0.0, 0.5, -1.0, 2.0]}\n", "",
     "target", "target:", "give exactly one of 'sum'"),
    ("cells-with-pairs", CELLS_SUITE, "        cells:\n", "        pairs: [{components: [colour, shape], values: []}]\n        cells:\n",
     "target.pairs", "pairs: [", "'pairs' add to 'sum'"),
    ("cells-twice", CELLS_SUITE, "- [green, moon, 1.0]", "- [green, star, 2.0]", "target.cells[7]", "- [green, star, 2.0]",
     "cell (green, star) is listed twice (first at cells[6]); list every cell exactly once"),
    ("cells-missing", CELLS_SUITE, "          - [blue, square, 1.0]\n", "", "target.cells", "cells:",
     "1 of 12 cells are missing: (blue, square); list every cell exactly once"),
    ("cells-unknown-label", CELLS_SUITE, "- [blue, square, 1.0]", "- [purple, square, 1.0]", "target.cells[9]", "[purple",
     "unknown colour label 'purple'; known: red, green, blue"),
    ("cells-row-length", CELLS_SUITE, "- [blue, square, 1.0]", "- [blue, 1.0]", "target.cells[9]", "- [blue, 1.0]",
     "a row is 2 labels (colour, shape) then the target, 3 entries; got 2"),
    ("cells-target-not-number", CELLS_SUITE, "- [blue, square, 1.0]", "- [blue, square, high]", "target.cells[9]", "high",
     "the target (the last entry) must be a finite number, got 'high'"),
    ("classification-cells", CELLS_SUITE.replace("kind: regression", "kind: classification"), "- [blue, square, 1.0]",
     "- [blue, square, 0.5]", "target.cells[9]", "0.5]",
     "classification targets must be exactly -1 or +1, but cell (blue, square) has 0.5"),
    ("classification-sum", SUITE, "kind: regression", "kind: classification", "target.sum", "sum:",
     "classification targets must be exactly -1 or +1, but cell (red, square) has 1.5 (and 9 more cells)"),
    ("both-splits", SUITE, "kind: regression", "kind: regression\n      split: {random: 0.25, seed: 3}", "split", "split:",
     "give exactly one of 'held_out' (a list of cells) or 'split: {random: fraction, seed: s}', got both"),
    ("neither-split", SUITE, "      held_out:\n        - [red, circle]\n        - [blue, star]\n        - [green, moon]\n", "",
     "", "    params:", "got neither"),
    ("random-too-many", SUITE, "      held_out:\n        - [red, circle]\n        - [blue, star]\n        - [green, moon]\n",
     "      split:\n        random: 0.9\n", "split.random", "random: 0.9", "at most 8 can be held out"),
    ("duplicate-component", SUITE, "{name: shape, values", "{name: colour, values", "components[1].name", "{name: colour, values: [circle",
     "component name 'colour' is used twice (components[0] and components[1]); names must differ"),
    ("duplicate-label", SUITE, "[red, green, blue]", "[red, green, red]", "components[0].values[2]", "[red, green, red]",
     "colour label 'red' is listed twice"),
    ("values-and-n", SUITE, "{name: colour, values: [red, green, blue]}", "{name: colour, values: [red, green, blue], n: 3}",
     "components[0]", "n: 3}", "give exactly one of 'values' (a list of labels) or 'n'"),
    ("boolean-label", SUITE, "[circle, square, star, moon]", "[circle, square, star, no]", "components[1].values[3]", "star, no]",
     "quote it"),
    ("unknown-field", SUITE, "kind: regression", "kind: regression\n      heldout: []", "heldout", "heldout: []", "unknown field 'heldout'"),
]


@pytest.mark.parametrize(("base", "old", "new", "field", "marker", "message"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_every_mistake_is_reported_at_its_line(base, old, new, field, marker, message):
    text = edit(base, old, new)
    with pytest.raises(SuiteError) as exc:
        parse_suite(text, "suite.yaml")
    where = f"suite.yaml:{line_of(text, marker)}: tasks[0].params{'.' + field if field else ''}: "
    assert any(str(i).startswith(where) and message in str(i) for i in exc.value.issues), (where, message, str(exc.value))
    assert "invalid task" not in str(exc.value)  # raised as TaskParamError or by pydantic, never the generic fallback


def test_compbench_validate_reports_every_table_mistake_by_file_and_line(tmp_path, capsys):
    from compbench.cli import main

    path = tmp_path / "suite.yaml"
    path.write_text(edit(SUITE, "- [blue, star]", "- [blue, triangle]"))
    assert main(["validate", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{path}:21: tasks[0].params.held_out[1]: unknown shape label 'triangle'" in err and "Traceback" not in err
    path.write_text(SUITE)
    assert main(["validate", str(path)]) == 0


# --- the docs example -------------------------------------------------------------------------


def docs_example() -> str:
    section = DOCS.read_text(encoding="utf-8").split("## The table family", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```yaml\n(.*?)```", section, re.S).group(1)


def test_docs_example_is_the_issue_example_and_validates():
    block = docs_example()
    assert block.startswith("- id: colour-shape\n  family: table\n")
    text = "name: docs\nseeds: 1\ntasks:\n" + "".join("  " + line + "\n" for line in block.splitlines()) + (
        "models:\n  - {id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.5, 1.0]}}\n"
    )
    loaded = parse_suite(text, "docs.yaml")
    entry = loaded.suite.tasks[0]
    t = make_task(entry.family, **entry.params)
    # The docs say: (red, moon) = 1 + 2 + 1 = 4 and (blue, circle) = 3 + 0 + 1 = 4; three cells held out.
    assert t.y[grid_index(t, "red", "moon")] == 4.0 and t.y[grid_index(t, "blue", "circle")] == 4.0
    assert held_labels(t) == {("red", "circle"), ("blue", "star"), ("green", "moon")}


def test_docs_error_examples_are_real_messages():
    text = DOCS.read_text(encoding="utf-8")
    for needle in (
        "unknown shape label 'triangle'; known: circle, square, star, moon",
        "row 1 (colour 'green') needs 4 values, one per shape label (circle, square, star, moon), got 3",
    ):
        assert needle in text and any(needle in e[-1] for e in ERRORS)
    two = [["red", "circle"], ["red", "square"]]
    with pytest.raises(TaskParamError) as exc:
        make_task("table", components=[{"name": "colour", "values": ["red", "green"]}, {"name": "shape", "values": ["circle", "square"]}],
                  target={"sum": {}}, held_out=two)
    assert exc.value.loc == ("held_out", 1) and exc.value.message in text


# --- fuzzing ----------------------------------------------------------------------------------

numbers = st.one_of(st.integers(-5, 5), st.floats(-100, 100, allow_nan=False))


@st.composite
def tables(draw):
    """Structurally valid table params and the (names, labels) they declare."""
    n_comp = draw(st.sampled_from([1, 2, 2, 3, 3]))
    names = draw(st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=n_comp, max_size=n_comp, unique=True))
    components, labels = [], []
    for name in names:
        n = draw(st.sampled_from([1, 2, 2, 3, 3, 4]))
        if draw(st.booleans()):
            comp_labels = draw(st.lists(st.text("pqrs01", min_size=1, max_size=2), min_size=n, max_size=n, unique=True))
            components.append({"name": name, "values": comp_labels})
        else:
            comp_labels = [str(v) for v in range(n)]
            components.append({"name": name, "n": n})
        labels.append(comp_labels)
    summed = {name: draw(st.lists(numbers, min_size=len(labels[c]), max_size=len(labels[c])))
              for c, name in enumerate(names) if draw(st.booleans())}
    pairs = []
    if n_comp >= 2:
        for _ in range(draw(st.integers(0, 2))):
            a, b = draw(st.permutations(range(n_comp)))[:2]
            values = [draw(st.lists(numbers, min_size=len(labels[b]), max_size=len(labels[b]))) for _ in labels[a]]
            pairs.append({"components": [names[a], names[b]], "values": values})
    params = {"components": components, "target": {"sum": summed, "pairs": pairs}}
    all_cells = [list(cell) for cell in itertools.product(*labels)]
    how = draw(st.sampled_from(["any", "covered", "random"]))
    if how == "any":
        params["held_out"] = draw(st.lists(st.sampled_from(all_cells), min_size=1, max_size=len(all_cells), unique_by=tuple))
    elif how == "covered":
        # Keep a diagonal (cell j has value j mod n_c of each component) so every value stays trained on.
        keep = {tuple(lab[j % len(lab)] for lab in labels) for j in range(max(map(len, labels)))}
        rest = [cell for cell in all_cells if tuple(cell) not in keep]
        params["held_out"] = draw(st.lists(st.sampled_from(rest), min_size=1, max_size=len(rest), unique_by=tuple)) if rest else []
    else:
        params["split"] = {"random": draw(st.floats(0.01, 0.99) | st.floats(0.2, 0.5)), "seed": draw(st.integers(0, 2**32))}
    return params, names, labels


def formula(params, names, labels) -> list[float]:
    """Targets by the documented formula, cell by cell in component order (last fastest)."""
    out = []
    for cell in itertools.product(*(range(len(lab)) for lab in labels)):
        y = sum(params["target"]["sum"].get(name, [0.0] * len(labels[c]))[cell[c]] for c, name in enumerate(names))
        for pair in params["target"]["pairs"]:
            a, b = (names.index(n) for n in pair["components"])
            y += pair["values"][cell[a]][cell[b]]
        out.append(float(y))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_random_tables_build_by_the_formula_or_raise_task_param_error(drawn):
    params, names, labels = drawn
    try:
        t = make_task("table", **params)
    except TaskParamError:
        return
    assert t.y.tolist() == pytest.approx(formula(params, names, labels), rel=1e-12, abs=1e-9)
    assert t.value_labels == tuple(tuple(lab) for lab in labels) and t.component_names == tuple(names)
    if "held_out" in params:
        assert held_labels(t) == {tuple(cell) for cell in params["held_out"]}
    else:
        assert t.n_test == round(params["split"]["random"] * len(t.cells))
    train = t.cells[t.train_mask]
    assert all(set(train[:, c]) == set(range(len(labels[c]))) for c in range(len(names)))


scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=4), st.sampled_from(["red", "circle", "colour", "shape", "sum", "cells", "n"]),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=10)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


@st.composite
def mutated_tables(draw):
    params = copy.deepcopy(draw(tables())[0])
    paths = [p for p in _paths(params) if p]
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(paths))
        target = params
        try:
            for part in path[:-1]:
                target = target[part]
            action = draw(st.sampled_from(["replace", "delete", "add"]))
            if action == "replace":
                target[path[-1]] = draw(values)
            elif action == "delete":
                del target[path[-1]]
            elif isinstance(target, dict):
                target[draw(st.sampled_from(["cells", "sum", "pairs", "n", "values", "split", "held_out", "x"]))] = draw(values)
            else:
                target.append(draw(values))
        except (KeyError, IndexError, TypeError, AttributeError):
            continue  # an earlier mutation removed or replaced this path
    return params


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_tables())
def test_mutated_tables_validate_or_fail_with_located_errors(params):
    doc = {"name": "fuzz", "seeds": 1, "tasks": [{"id": "t", "family": "table", "params": params}],
           "models": [{"id": "k", "adapter": "kernel", "params": {"kernel": "overlap", "weights": [0.0, 0.5, 1.0]}}]}
    try:
        parse_suite(yaml.safe_dump(doc, allow_unicode=True), "fuzz.yaml")
    except SuiteError as exc:
        assert exc.issues and all(str(i).startswith("fuzz.yaml:") and i.line is not None for i in exc.issues)
        assert "invalid task" not in str(exc)  # every table mistake is a TaskParamError or a pydantic error
