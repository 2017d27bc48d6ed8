"""The `redundant_input` family: exact band cells, targets, the iid control, located errors, the docs example."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from compbench.runner.run import run_suite
from compbench.suite import SuiteError, parse_suite
from compbench.tasks import TaskData, TaskParamError, make_task, validate_split

DOCS = Path(__file__).resolve().parent.parent / "docs" / "how-to" / "tasks.md"


def cell_set(task: TaskData, mask: np.ndarray) -> set[tuple[int, int]]:
    return {(int(a), int(b)) for a, b in task.cells[mask]}


def test_band_two_trains_the_diagonal_and_the_next_value():
    t = make_task("redundant_input")
    assert t.family == "redundant_input" and t.n_values == (10, 10) and t.component_names == ("Y1", "Y2")
    assert cell_set(t, t.train_mask) == {(i, i) for i in range(10)} | {(i, (i + 1) % 10) for i in range(10)}
    assert (t.n_train, t.n_test) == (20, 80) and not t.iid and t.heldout is None
    assert (t.test_mask == ~t.train_mask).all()
    assert (9, 0) in cell_set(t, t.train_mask) and (0, 9) in cell_set(t, t.test_mask)  # the band wraps mod n


def test_band_five_trains_fifty_cells():
    t = make_task("redundant_input", band=5)
    assert cell_set(t, t.train_mask) == {(i, (i + d) % 10) for i in range(10) for d in range(5)}
    assert (t.n_train, t.n_test) == (50, 50)


def test_every_target_kind():
    block = make_task("redundant_input")
    y1 = block.cells[:, 0]
    assert block.kind == "classification" and block.n_classes == 0 and block.y.dtype == np.float64
    assert block.y.tolist() == [1.0 if v < 5 else -1.0 for v in y1]
    value = make_task("redundant_input", target="value")
    assert value.kind == "regression" and value.y.dtype == np.float64 and value.y.tolist() == [float(v) for v in y1]
    cls = make_task("redundant_input", target="class")
    assert cls.kind == "multiclass" and cls.n_classes == 10 and cls.y.dtype == np.int64 and cls.y.tolist() == y1.tolist()
    odd = make_task("redundant_input", n=7)  # Y1 < 3.5: values 0..3 are the +1 block
    assert odd.y.reshape(7, 7)[:, 0].tolist() == [1, 1, 1, 1, -1, -1, -1]
    # The target ignores Y2 in every kind.
    for t in (block, value, cls, odd):
        assert t.relevant == (0,) and t.irrelevant == (1,)
        rows = t.y.reshape(t.n_values)
        assert (rows == rows[:, :1]).all()


@pytest.mark.parametrize("target", ["block", "value", "class"])
def test_iid_control_trains_every_cell_and_scores_the_band_splits_held_out_cells(target):
    band = make_task("redundant_input", target=target)
    iid = make_task("redundant_input", target=target, split="iid")
    assert iid.train_mask.all() and iid.iid and iid.heldout is not None
    assert iid.test_mask.tolist() == (~band.train_mask).tolist()
    assert cell_set(iid, iid.test_mask) == cell_set(band, band.test_mask) and (iid.n_train, iid.n_test) == (100, 80)
    assert iid.y.tolist() == band.y.tolist() and (iid.kind, iid.n_classes, iid.relevant) == (band.kind, band.n_classes, (0,))
    validate_split(iid)
    # Not declared iid, the same masks are refused: held-out cells would also be trained on.
    from dataclasses import replace

    from compbench.tasks import SplitError

    with pytest.raises(SplitError, match="not declared an iid control"):
        validate_split(replace(iid, iid=False))


def test_params_json_round_trip_and_validation():
    for kw in ({}, {"n": 6, "band": 3, "target": "class", "split": "iid"}):
        t = make_task("redundant_input", **kw)
        validate_split(t)
        again = make_task("redundant_input", **json.loads(json.dumps(t.params)))
        assert again.y.tolist() == t.y.tolist() and again.train_mask.tolist() == t.train_mask.tolist()
        assert again.test_mask.tolist() == t.test_mask.tolist()
    with pytest.raises(TaskParamError, match=r"is 10, but a band of width n = 10 or more trains every cell") as exc:
        make_task("redundant_input", band=10)
    assert exc.value.loc == ("band",)
    for bad in ({"n": 1}, {"band": 0}, {"target": "parity"}, {"split": "random"}):
        with pytest.raises(ValidationError):
            make_task("redundant_input", **bad)


def test_band_error_is_reported_at_its_line():
    text = "name: t\nseeds: 1\ntasks:\n  - id: r\n    family: redundant_input\n    params:\n      n: 4\n      band: 4\n" \
           "models:\n  - {id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.5, 1.0]}}\n"
    with pytest.raises(SuiteError) as exc:
        parse_suite(text, "suite.yaml")
    assert [str(i) for i in exc.value.issues] == [
        "suite.yaml:8: tasks[0].params.band: is 4, but a band of width n = 4 or more trains every cell and holds none out; use 1..3"
    ]


def min_norm(task: TaskData, weights: list[float]) -> np.ndarray:
    """Min-norm overlap-kernel regression by hand: κ[number of shared values], pinv solve, every cell."""
    k = np.asarray(weights)[(task.cells[:, None, :] == task.cells[None, :, :]).sum(-1)]
    tr = task.train_mask
    return k[:, tr] @ np.linalg.pinv(k[np.ix_(tr, tr)]) @ task.y[tr]


def y2_share(task: TaskData, f: np.ndarray) -> float:
    """Held-out predictions fitted as a(Y1) + b(Y2) by least squares: var(b) / var(f)."""
    held = task.test_mask
    cells, fh = task.cells[held], f[held]
    x = np.zeros((len(cells), 20))
    x[np.arange(len(cells)), cells[:, 0]] = 1
    x[np.arange(len(cells)), 10 + cells[:, 1]] = 1
    coef = np.linalg.lstsq(x, fh, rcond=None)[0]
    assert np.allclose(x @ coef, fh, atol=1e-9)  # no cell is trained: the kernel model is exactly additive there
    return float(np.var(x[:, 10:] @ coef[10:]) / np.var(fh))


def test_band_split_makes_a_conjunctive_kernel_leak_through_y2():
    t = make_task("redundant_input")
    additive = min_norm(t, [0.0, 0.5, 1.0])
    # The additive kernel explains the band by Y1 alone: held-out predictions are the targets.
    np.testing.assert_allclose(additive, t.y, atol=1e-9)
    assert y2_share(t, additive) < 1e-20
    # A conjunction term (κ = 0.3 < ½ for one shared value) leaves part of the band to Y2 (LITERATURE.md §1: 0.43).
    leaky = min_norm(t, [0.0, 0.3, 1.0])
    assert y2_share(t, leaky) == pytest.approx(0.4305, abs=1e-3)
    assert y2_share(make_task("redundant_input", band=5), min_norm(make_task("redundant_input", band=5), [0.0, 0.3, 1.0])) < 0.05


def docs_block() -> str:
    section = DOCS.read_text(encoding="utf-8").split("## The redundant_input family\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    return block


def test_docs_example_loads_builds_and_runs(tmp_path):
    block = docs_block()
    text = "name: docs\nseeds: 1\ntasks:\n" + "".join("  " + line + "\n" for line in block.splitlines()) + (
        # The iid control needs new samples (digits); only the one-hot task runs here.
        "models:\n  - {id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.3, 1.0]}, tasks: [redundant]}\n"
    )
    loaded = parse_suite(text, "docs.yaml")
    band, control = (make_task(e.family, **e.params) for e in loaded.suite.tasks)
    assert (band.n_train, band.n_test, band.kind) == (20, 80, "classification")
    assert control.iid and control.train_mask.all() and control.test_mask.tolist() == (~band.train_mask).tolist()
    assert control.kind == "multiclass" and control.n_classes == 10
    assert loaded.suite.tasks[1].encoding_name == "digits"
    (rec,) = run_suite(loaded, tmp_path, device="cpu", progress=False).records
    assert rec["status"] == "ok" and rec["task"] == "redundant" and (rec["n_train"], rec["n_test"]) == (20, 80)
    np.testing.assert_allclose(rec["predictions"], min_norm(band, [0.0, 0.3, 1.0]), atol=1e-8)
