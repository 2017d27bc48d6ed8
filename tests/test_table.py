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

DOCS = Path(__file__).resolve().parent.parent / "docs" / "how-to" / "tasks.md"

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


@pytest.mark.slow
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


@pytest.mark.slow
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


# --- vector targets, class targets, relevant components ---------------------------------------

SIZE = {"name": "size", "values": ["small", "big"]}
HABITAT = {"name": "habitat", "values": ["land", "water", "air"]}
TWO_SHAPES = {"name": "shape", "values": ["circle", "square"]}


def test_vector_sum_and_pairs_targets_by_hand():
    pairs = [{"components": ["colour", "shape"], "values": [[[0, 0], [0, 0]], [[0, 0], [5, 5]], [[0, 0], [0, 0]]]}]
    t = make_task("table", components=[COLOUR, TWO_SHAPES],
                  target={"sum": {"colour": [[1, 0], [2, 0], [3, 0]], "shape": [[0, 1], [0, -1]]}, "pairs": pairs},
                  held_out=[["red", "circle"], ["blue", "square"]])
    assert t.y.dtype == np.float64 and t.y.shape == (6, 2) and t.n_outputs == 2 and t.vector_output
    assert (t.kind, t.n_classes, t.relevant) == ("regression", 0, None)
    # (colour value) + (shape value) + 5·[1, 1] at (green, square), cell by cell in grid order.
    assert t.y.tolist() == [[1, 1], [1, -1], [2, 1], [7, 4], [3, 1], [3, -1]]


def test_vector_pair_table_alone_is_indexed_by_the_first_named_component():
    pairs = [{"components": ["shape", "colour"], "values": [[[1, 2, 3], [0, 0, 0], [0, 0, 0]], [[0, 0, 0], [0, 0, 0], [0, 0, 7]]]}]
    t = make_task("table", components=[COLOUR, TWO_SHAPES], target={"sum": {}, "pairs": pairs}, held_out=[["red", "square"]])
    expected = np.zeros((6, 3))
    expected[grid_index(t, "red", "circle")] = [1, 2, 3]
    expected[grid_index(t, "blue", "square")] = [0, 0, 7]
    assert t.y.tolist() == expected.tolist()


def test_vector_cells_targets():
    rows = [["b", "y", [-1, 0.5]], ["a", "x", [1.5, 2]], ["b", "x", [2, 0]], ["a", "y", [-0.25, 1]]]
    t = make_task("table", components=[{"name": "p", "values": ["a", "b"]}, {"name": "q", "values": ["x", "y"]}],
                  target={"cells": rows}, held_out=[["b", "y"]])
    assert t.y.tolist() == [[1.5, 2.0], [-0.25, 1.0], [2.0, 0.0], [-1.0, 0.5]] and t.n_outputs == 2


def test_vector_targets_equal_per_output_scalar_tables():
    # Output k of a vector table is the scalar table built from every value's k-th entry.
    out0 = {"colour": [1.5, -2.0, 0.25], "shape": [3.0, 0.5, -1.0, 2.0]}
    out1 = {"colour": [0.0, 7.0, -3.5], "shape": [1.0, 1.0, 4.0, -0.75]}
    p0 = [[0.5, 0, 0, 1], [0, 2, 0, 0], [1, 0, 0, -3]]
    p1 = [[1, 1, 0, 0], [0, 0, 0, 9], [0, -2, 0, 0]]
    vec = make_task("table", components=[COLOUR, SHAPE], held_out=HELD, target={
        "sum": {c: [[a, b] for a, b in zip(out0[c], out1[c])] for c in out0},
        "pairs": [{"components": ["colour", "shape"], "values": [[[a, b] for a, b in zip(r0, r1)] for r0, r1 in zip(p0, p1)]}]})
    for k, (out, p) in enumerate(((out0, p0), (out1, p1))):
        scalar = make_task("table", components=[COLOUR, SHAPE], held_out=HELD,
                           target={"sum": out, "pairs": [{"components": ["colour", "shape"], "values": p}]})
        assert vec.y[:, k].tolist() == scalar.y.tolist()
    assert vec.train_mask.tolist() == scalar.train_mask.tolist()


HABITAT_ROWS = [["small", "land", "walks"], ["big", "land", "walks"], ["small", "water", "swims"],
                ["big", "water", "swims"], ["small", "air", "flies"], ["big", "air", "flies"]]


def habitat(**kw) -> TaskData:
    params = {"components": [SIZE, HABITAT], "kind": "multiclass", "target": {"cells": HABITAT_ROWS},
              "held_out": [["small", "water"], ["big", "air"]]}
    return make_task("table", **{**params, **kw})


def test_class_cells_with_declared_classes():
    t = habitat(target={"cells": HABITAT_ROWS, "classes": ["walks", "swims", "flies"]})
    assert t.kind == "multiclass" and t.n_classes == 3 and t.n_outputs == 3 and t.vector_output
    assert t.y.dtype == np.int64 and t.y.tolist() == [0, 1, 2, 0, 1, 2]
    assert t.y[grid_index(t, "small", "water")] == 1
    # A declared class no cell uses still counts: it fixes the number of outputs.
    t4 = habitat(target={"cells": HABITAT_ROWS, "classes": ["digs", "walks", "swims", "flies"]})
    assert t4.n_classes == 4 and t4.y.tolist() == [1, 2, 3, 1, 2, 3]


def test_class_order_is_inferred_sorted():
    t = habitat()
    assert t.n_classes == 3 and t.y.tolist() == [2, 1, 0, 2, 1, 0]  # flies, swims, walks
    # Integers sort numerically (2 before 10), and the integer 2 and the text "2" are one class.
    rows = [["small", "land", 10], ["big", "land", "2"], ["small", "water", 2], ["big", "water", -1],
            ["small", "air", 10], ["big", "air", 2]]
    t = habitat(target={"cells": rows})
    # Classes -1, 2, 10; cells in grid order: (small, land/water/air) = 10, 2, 10, (big, ...) = 2, -1, 2.
    assert t.n_classes == 3 and t.y.tolist() == [2, 1, 2, 1, 0, 1]
    rows[0][2] = "x10"  # one label is not an integer: all sort as text ("-1" < "10" < "2" < "x10")
    t = habitat(target={"cells": rows})
    assert t.n_classes == 4 and t.y.tolist() == [3, 2, 1, 2, 0, 2]


def test_relevant_components():
    t = habitat(relevant=["habitat"])
    assert t.relevant == (1,) and t.irrelevant == (0,)
    assert habitat().relevant is None and habitat().irrelevant == ()
    both = make_task("table", components=[COLOUR, SHAPE], target={"sum": SUM}, held_out=HELD, relevant=["shape", "colour"])
    assert both.relevant == (0, 1) and both.irrelevant == ()
    only_shape = make_task("table", components=[COLOUR, SHAPE], target={"sum": {"shape": SUM["shape"]}}, held_out=HELD,
                           relevant=["shape"])
    assert only_shape.relevant == (1,)
    with pytest.raises(TaskParamError, match=r"\(red, circle\) has 1 but \(green, circle\) has 2") as exc:
        make_task("table", components=[COLOUR, SHAPE], target={"sum": SUM}, held_out=HELD, relevant=["shape"])
    assert exc.value.loc == ("relevant",)


def test_new_fields_survive_a_json_round_trip():
    t = habitat(target={"cells": HABITAT_ROWS, "classes": ["walks", "swims", "flies"]}, relevant=["habitat"])
    again = make_task("table", **json.loads(json.dumps(t.params)))
    assert again.y.tolist() == t.y.tolist() and again.n_classes == 3 and again.relevant == (1,)


VECTOR_SUITE = """\
name: t
seeds: 1
tasks:
  - id: v
    family: table
    params:
      components:
        - {name: colour, values: [red, green, blue]}
        - {name: shape, values: [circle, square]}
      target:
        sum:
          colour: [[1, 0], [2, 0], [3, 0]]
          shape: [[0, 1], [0, -1]]
        pairs:
          - components: [colour, shape]
            values:
              - [[0, 0], [0, 0]]
              - [[0, 0], [5, 5]]
              - [[0, 0], [0, 0]]
      held_out: [[red, circle], [blue, square]]
models:
  - {id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.5, 1.0]}}
"""

VECTOR_CELLS_SUITE = edit(VECTOR_SUITE, VECTOR_SUITE[VECTOR_SUITE.index("      target:\n"):VECTOR_SUITE.index("      held_out:")], """\
      target:
        cells:
          - [red, circle, [1, 1]]
          - [red, square, [1, -1]]
          - [green, circle, [2, 1]]
          - [green, square, [7, 4]]
          - [blue, circle, [3, 1]]
          - [blue, square, [3, -1]]
""")

CLASS_SUITE = """\
name: t
seeds: 1
tasks:
  - id: h
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
      relevant: [habitat]
      held_out: [[small, water], [big, air]]
models:
  - {id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.5, 1.0]}}
"""


def test_the_valid_vector_and_class_suites_validate():
    for text, shape in ((VECTOR_SUITE, (6, 2)), (VECTOR_CELLS_SUITE, (6, 2)), (CLASS_SUITE, (6,))):
        task = parse_suite(text, "suite.yaml").suite.tasks[0]
        t = make_task(task.family, **task.params)
        assert t.y.shape == shape and t.n_test == 2
    vec, cells = (make_task("table", **parse_suite(s, "s.yaml").suite.tasks[0].params) for s in (VECTOR_SUITE, VECTOR_CELLS_SUITE))
    assert vec.y.tolist() == cells.y.tolist()


_VECTOR_MIX = "every target value must be a number, or every one a vector of the same length"

# (id, base, old, new, field, marker of the line, message)
VECTOR_ERRORS = [
    ("sum-ragged-k", VECTOR_SUITE, "shape: [[0, 1], [0, -1]]", "shape: [[0, 1], [0, -1, 2]]", "target.sum.shape[1]",
     "shape: [[0, 1], [0, -1, 2]]", f"is a vector of 3 numbers, but target.sum.colour[0] is a vector of 2 numbers; {_VECTOR_MIX}"),
    ("sum-number-among-vectors", VECTOR_SUITE, "shape: [[0, 1], [0, -1]]", "shape: [[0, 1], 4]", "target.sum.shape[1]",
     "shape: [[0, 1], 4]", "is a number, but target.sum.colour[0] is a vector of 2 numbers"),
    ("sum-empty-vector", VECTOR_SUITE, "shape: [[0, 1], [0, -1]]", "shape: [[0, 1], []]", "target.sum.shape[1]",
     "shape: [[0, 1], []]", "List should have at least 1 item"),
    ("sum-vector-not-numbers", VECTOR_SUITE, "shape: [[0, 1], [0, -1]]", "shape: [[0, 1], [0, x]]", "target.sum.shape[1][1]",
     "shape: [[0, 1], [0, x]]", "Input should be a valid number"),
    ("sum-wrong-length", VECTOR_SUITE, "shape: [[0, 1], [0, -1]]", "shape: [[0, 1]]", "target.sum.shape",
     "shape: [[0, 1]]", "needs 2 values, one per shape label (circle, square), got 1"),
    ("pair-ragged-k", VECTOR_SUITE, "- [[0, 0], [5, 5]]", "- [[0, 0], [5, 5, 5]]", "target.pairs[0].values[1][1]",
     "- [[0, 0], [5, 5, 5]]", f"is a vector of 3 numbers, but target.sum.colour[0] is a vector of 2 numbers; {_VECTOR_MIX}"),
    ("pair-row-length", VECTOR_SUITE, "- [[0, 0], [5, 5]]", "- [[0, 0]]", "target.pairs[0].values[1]", "- [[0, 0]]",
     "row 1 (colour 'green') needs 2 values, one per shape label (circle, square), got 1"),
    ("pairs-alone-ragged", VECTOR_SUITE, "        sum:\n          colour: [[1, 0], [2, 0], [3, 0]]\n          shape: [[0, 1], [0, -1]]\n",
     "        sum: {}\n", "target.pairs[0].values[1][1]", "- [[0, 0], [5, 5]]",
     None),  # valid: the pair table alone gives 2-vectors (checked below)
    ("cells-ragged-k", VECTOR_CELLS_SUITE, "- [blue, circle, [3, 1]]", "- [blue, circle, [3, 1, 0]]", "target.cells[4]",
     "[3, 1, 0]", f"is a vector of 3 numbers, but target.cells[0] is a vector of 2 numbers; {_VECTOR_MIX}"),
    ("cells-number-among-vectors", VECTOR_CELLS_SUITE, "- [blue, circle, [3, 1]]", "- [blue, circle, 3]", "target.cells[4]",
     "[blue, circle, 3]", "is a number, but target.cells[0] is a vector of 2 numbers"),
    ("cells-empty-vector", VECTOR_CELLS_SUITE, "- [blue, circle, [3, 1]]", "- [blue, circle, []]", "target.cells[4]",
     "[blue, circle, []]", "the target vector (the last entry) is empty"),
    ("cells-vector-not-numbers", VECTOR_CELLS_SUITE, "- [blue, circle, [3, 1]]", "- [blue, circle, [3, .inf]]", "target.cells[4]",
     "[3, .inf]", "the target vector (the last entry) must hold finite numbers, got [3, inf]"),
    ("cells-class-label-in-regression", VECTOR_CELLS_SUITE, "- [blue, circle, [3, 1]]", "- [blue, circle, cat]", "target.cells[4]",
     "[blue, circle, cat]", "the target (the last entry) must be a finite number, got 'cat' (class labels need kind: multiclass)"),
    ("vector-classification-sum", VECTOR_SUITE, "      held_out:", "      kind: classification\n      held_out:", "target.sum",
     "sum:", "kind: classification takes one target of -1 or +1 per cell, but the targets are vectors of 2 numbers"),
    ("vector-classification-cells", VECTOR_CELLS_SUITE, "      held_out:", "      kind: classification\n      held_out:",
     "target.cells[0]", "[red, circle, [1, 1]]", "use kind: regression for several outputs"),
    ("classes-unknown-label", CLASS_SUITE, "- [small, water, swims]", "- [small, water, crawls]", "target.cells[2]", "crawls",
     "unknown class 'crawls'; known (target.classes): walks, swims, flies"),
    ("classes-twice", CLASS_SUITE, "classes: [walks, swims, flies]", "classes: [walks, swims, walks]", "target.classes[2]",
     "classes: [", "class 'walks' is listed twice (first at classes[0])"),
    ("classes-one", CLASS_SUITE, "classes: [walks, swims, flies]", "classes: [walks]", "target.classes", "classes: [",
     "List should have at least 2 items"),
    ("classes-boolean", CLASS_SUITE, "classes: [walks, swims, flies]", "classes: [walks, swims, no]", "target.classes[2]",
     "classes: [", "a class label must be text or an integer, got the boolean False; quote it"),
    ("classes-float", CLASS_SUITE, "classes: [walks, swims, flies]", "classes: [walks, swims, 1.5]", "target.classes[2]",
     "classes: [", "a class label must be text or an integer, got 1.5"),
    ("classes-without-multiclass", CLASS_SUITE, "kind: multiclass", "kind: regression", "target.classes", "classes: [",
     "names the classes of a kind: multiclass task, but this task is kind: regression"),
    ("class-label-float", CLASS_SUITE, "- [big, air, flies]", "- [big, air, 0.5]", "target.cells[5]", "[big, air, 0.5]",
     "a multiclass target (the last entry) must be a class label, text or an integer, got 0.5"),
    ("class-label-list", CLASS_SUITE, "- [big, air, flies]", "- [big, air, [1, 0]]", "target.cells[5]", "[big, air, [1, 0]]",
     "must be a class label, text or an integer, got [1, 0]"),
    ("one-class", CLASS_SUITE, "        classes: [walks, swims, flies]\n", "", "target.cells", "cells:",
     None),  # replaced below by a one-class variant
    ("multiclass-sum", VECTOR_SUITE, "      held_out:", "      kind: multiclass\n      held_out:", "target.sum", "sum:",
     "kind: multiclass takes one class label per cell from 'cells'; 'sum' adds up numbers"),
    ("relevant-unknown", CLASS_SUITE, "relevant: [habitat]", "relevant: [habitat, colour]", "relevant[1]", "relevant: [",
     "unknown component 'colour'; known: size, habitat"),
    ("relevant-twice", CLASS_SUITE, "relevant: [habitat]", "relevant: [habitat, habitat]", "relevant[1]", "relevant: [",
     "component 'habitat' is listed twice (first at relevant[0])"),
    ("relevant-empty", CLASS_SUITE, "relevant: [habitat]", "relevant: []", "relevant", "relevant: [",
     "is empty; list the components the target depends on"),
    ("relevant-wrong", CLASS_SUITE, "relevant: [habitat]", "relevant: [size]", "relevant", "relevant: [",
     "the target depends on components relevant leaves out (habitat): (small, land) has class 'walks' but "
     "(small, water) has class 'swims'; list every component the target depends on"),
    ("relevant-wrong-vector", VECTOR_SUITE, "      held_out:", "      relevant: [colour]\n      held_out:", "relevant", "relevant: [",
     "(red, circle) has [1, 1] but (red, square) has [1, -1]"),
    ("relevant-not-a-list", CLASS_SUITE, "relevant: [habitat]", "relevant: habitat", "relevant", "relevant: habitat",
     "Input should be a valid list"),
]
VECTOR_ERRORS = [e for e in VECTOR_ERRORS if e[-1] is not None] + [
    ("one-class", CLASS_SUITE.replace("        classes: [walks, swims, flies]\n", "").replace("swims]", "walks]").replace("flies]", "walks]"),
     "relevant: [habitat]", "relevant: [size]", "target.cells", "cells:",
     "every cell has class 'walks'; a multiclass task needs at least 2 classes"),
]


@pytest.mark.parametrize(("base", "old", "new", "field", "marker", "message"), [e[1:] for e in VECTOR_ERRORS], ids=[e[0] for e in VECTOR_ERRORS])
def test_every_vector_and_class_mistake_is_reported_at_its_line(base, old, new, field, marker, message):
    text = edit(base, old, new)
    with pytest.raises(SuiteError) as exc:
        parse_suite(text, "suite.yaml")
    where = f"suite.yaml:{line_of(text, marker)}: tasks[0].params.{field}: "
    assert any(str(i).startswith(where) and message in str(i) for i in exc.value.issues), (where, message, str(exc.value))
    assert "invalid task" not in str(exc.value)


def test_a_pair_table_alone_fixes_the_width():
    text = edit(VECTOR_SUITE, "        sum:\n          colour: [[1, 0], [2, 0], [3, 0]]\n          shape: [[0, 1], [0, -1]]\n", "        sum: {}\n")
    t = make_task("table", **parse_suite(text, "s.yaml").suite.tasks[0].params)
    assert t.y.tolist() == [[0, 0]] * 3 + [[5, 5]] + [[0, 0]] * 2


# --- the docs examples of vector and class targets ---------------------------------------------

VECTOR_DOCS_HEADING = "## Table: vector targets, class targets, relevant components"


def docs_blocks(heading: str, lang: str = "yaml") -> list[str]:
    section = DOCS.read_text(encoding="utf-8").split(heading + "\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


def docs_suite(block: str, models: str = "  - {id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.3, 1.0]}}\n") -> str:
    return "name: docs\nseeds: 1\ntasks:\n" + "".join("  " + line + "\n" for line in block.splitlines()) + "models:\n" + models


def overlap_min_norm(task: TaskData, weights: list[float]) -> np.ndarray:
    """Min-norm overlap-kernel regression on every cell, by hand: κ[number of shared values], pinv solve."""
    shared = (task.cells[:, None, :] == task.cells[None, :, :]).sum(-1)
    k = np.asarray(weights)[shared]
    tr = task.train_mask
    y = np.eye(task.n_classes)[task.y] if task.n_classes else task.y
    return k[:, tr] @ np.linalg.pinv(k[np.ix_(tr, tr)]) @ y[tr]


def test_vector_and_class_docs_examples_build_and_run(tmp_path):
    (block,) = docs_blocks(VECTOR_DOCS_HEADING)
    loaded = parse_suite(docs_suite(block), "docs.yaml")
    vec, hab = (make_task(e.family, **e.params) for e in loaded.suite.tasks)
    # The docs say: (green, square) = [2, 0] + [0, -1] + [5, 5] = [7, 4], (red, circle) = [1, 1].
    assert vec.y[grid_index(vec, "green", "square")].tolist() == [7, 4] and vec.y[grid_index(vec, "red", "circle")].tolist() == [1, 1]
    assert held_labels(vec) == {("red", "circle"), ("blue", "square")}
    # n_classes = 3 and (small, water) has class 1 (swims); the target ignores size.
    assert hab.n_classes == 3 and hab.y[grid_index(hab, "small", "water")] == 1 and hab.relevant == (1,)
    summary = run_suite(loaded, tmp_path, device="cpu", progress=False)
    recs = {r["task"]: r for r in summary.records}
    for name, task in (("colour-shape-2d", vec), ("habitat", hab)):
        rec = recs[name]
        assert rec["status"] == "ok", rec.get("error")
        want = overlap_min_norm(task, [0.0, 0.3, 1.0])
        assert np.asarray(rec["predictions"]).shape == want.shape == (6, 2 if name == "colour-shape-2d" else 3)
        np.testing.assert_allclose(rec["predictions"], want, atol=1e-8)


def test_vector_and_class_docs_error_examples_are_real_messages():
    (block,) = docs_blocks(VECTOR_DOCS_HEADING)
    text = docs_suite(block)
    (shown,) = docs_blocks(VECTOR_DOCS_HEADING, "text")
    got = []
    for old, new in (("shape: [[0, 1], [0, -1]]", "shape: [[0, 1], [0, -1, 2]]"), ("- [small, water, swims]", "- [small, water, crawls]"),
                     ("relevant: [habitat]", "relevant: [colour]")):
        with pytest.raises(SuiteError) as exc:
            parse_suite(edit(text, old, new), "suite.yaml")
        (issue,) = exc.value.issues
        got.append(str(issue))
    assert shown.splitlines() == got


def _as_vectors(params: dict) -> dict:
    """The same table with every target value v replaced by the 3-vector [v, −v, 0.5]."""
    out = copy.deepcopy(params)
    target = out["target"]
    target["sum"] = {name: [[v, -v, 0.5] for v in values] for name, values in target["sum"].items()}
    for pair in target["pairs"]:
        pair["values"] = [[[v, -v, 0.5] for v in row] for row in pair["values"]]
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tables())
def test_random_vector_tables_are_their_scalar_tables_per_output(drawn):
    params, _, _ = drawn
    try:
        scalar = make_task("table", **params)
    except TaskParamError:
        return
    vec = make_task("table", **_as_vectors(params))
    terms = len(params["target"]["sum"]) + len(params["target"]["pairs"])
    if terms == 0:
        assert vec.y.shape == scalar.y.shape == (len(scalar.cells),)  # no values at all: scalar zeros
        return
    # Output 0 adds the same numbers in the same order; negation and halves are exact in floating point.
    assert vec.y.shape == (len(scalar.cells), 3)
    assert vec.y[:, 0].tolist() == scalar.y.tolist() and vec.y[:, 1].tolist() == (-scalar.y).tolist()
    assert vec.y[:, 2].tolist() == [0.5 * terms] * len(scalar.cells)
    assert vec.train_mask.tolist() == scalar.train_mask.tolist()
