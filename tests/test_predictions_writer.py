"""The built-in `predictions` report writer: one row per (task, model, seed, cell), labels per component."""

from __future__ import annotations

import numpy as np
import pandas as pd

from compbench import theory
from compbench.cli import main
from compbench.tasks import make_task

SUITE = """\
name: colours
seeds: 2
tasks:
  - id: colour-shape
    family: table
    params:
      components:
        - {name: colour, values: [red, green, blue]}
        - {name: shape, values: [circle, square]}
      target:
        sum: {colour: [1.0, 2.0, 3.0], shape: [0.0, 0.5]}
      kind: regression
      held_out: [[red, circle], [blue, square]]
  - {id: sym, family: symmetry, params: {variant: partial_exposure}}
models:
  - id: overlap
    adapter: kernel
    params: {kernel: overlap, weights: [0.0, 0.5, 1.0]}
  - id: lazy
    adapter: mlp
    params: {width: 64, lr: 0.05, max_steps: 300, center: true}
    tasks: [sym]
"""


def test_predictions_csv_rows_labels_truth_and_theory(tmp_path):
    (tmp_path / "s.yaml").write_text(SUITE)
    out = tmp_path / "out"
    assert main(["run", "--suite", str(tmp_path / "s.yaml"), "--out", str(out), "--quiet", "--format", "predictions"]) == 0
    frame = pd.read_csv(out / "predictions.csv", keep_default_na=False)
    # Columns: identity, then each component by its own name (table labels), then the numbers.
    assert list(frame.columns) == ["task", "model", "seed", "split", "colour", "shape", "component 1", "component 2",
                                   "y", "prediction", "theory"]
    table = frame[frame.task == "colour-shape"]
    assert len(table) == 6 and set(table.model) == {"overlap"} and set(table.seed) == {0}  # a kernel: one seed
    assert table[["colour", "shape", "split"]].values.tolist() == [
        ["red", "circle", "held_out"], ["red", "square", "train"], ["green", "circle", "train"],
        ["green", "square", "train"], ["blue", "circle", "train"], ["blue", "square", "held_out"],
    ]
    assert table.y.tolist() == [1.0, 1.5, 2.0, 2.5, 3.0, 3.5]
    # The overlap kernel κ = (0, .5, 1) on one-hot cells, min-norm, by hand.
    task = make_task("table", components=[{"name": "colour", "values": ["red", "green", "blue"]},
                                          {"name": "shape", "values": ["circle", "square"]}],
                     target={"sum": {"colour": [1.0, 2.0, 3.0], "shape": [0.0, 0.5]}}, kind="regression",
                     held_out=[["red", "circle"], ["blue", "square"]])
    agree = (task.cells[:, None, :] == task.cells[None, :, :]).sum(-1)
    K = np.array([0.0, 0.5, 1.0])[agree]
    tr = task.train_mask
    by_hand = K[:, tr] @ np.linalg.lstsq(K[np.ix_(tr, tr)], task.y[tr], rcond=None)[0]
    assert np.allclose(table.prediction.astype(float), by_hand, atol=1e-8)
    assert np.allclose(table.theory.astype(float), by_hand, atol=1e-8)
    assert np.allclose(by_hand, theory.kernel_regression(K[np.ix_(tr, tr)], K[:, tr], task.y[tr]), atol=1e-8)
    # The symmetry task has no labels: values by index; the MLP has two seeds, 4 cells each.
    sym = frame[(frame.task == "sym") & (frame.model == "lazy")]
    assert len(sym) == 8 and sorted(set(sym.seed)) == [0, 1]
    assert sym[sym.seed == 0][["component 1", "component 2", "split"]].values.tolist() == [
        ["0", "0", "train"], ["0", "1", "train"], ["1", "0", "train"], ["1", "1", "held_out"]]
    assert (table["component 1"] == "").all() and (sym.colour == "").all()


def test_class_rows_stay_integers_beside_a_model_without_theory(tmp_path):
    # One model with a theory, one without (a transformer's): the class columns are whole numbers either way.
    from types import SimpleNamespace

    from compbench.report.writers import PredictionsWriter

    task = make_task("table", components=[{"name": "a", "values": ["x", "y"]}, {"name": "b", "values": ["u", "v"]}],
                     target={"cells": [["x", "u", "p"], ["x", "v", "q"], ["y", "u", "r"], ["y", "v", "p"]]},
                     kind="multiclass", held_out=[["y", "v"]])
    onehot = np.eye(3)[[1, 2, 0, 1]]
    rec = lambda model, theory: SimpleNamespace(ok=True, task="t", model=model, seed=0, predictions=onehot,  # noqa: E731
                                                theory_predictions=theory)
    ctx = SimpleNamespace(records=[rec("kernel", onehot), rec("transformer", None)], tasks={"t": task},
                          write_file=lambda name, text: (tmp_path / name).write_text(text) and tmp_path / name)
    PredictionsWriter().write(ctx)
    lines = (tmp_path / "predictions.csv").read_text().splitlines()
    assert lines[0] == "task,model,seed,split,a,b,y,prediction,theory"
    assert lines[1:] == ["t,kernel,0,train,x,u,0,1,1", "t,kernel,0,train,x,v,1,2,2", "t,kernel,0,train,y,u,2,0,0",
                         "t,kernel,0,held_out,y,v,0,1,1", "t,transformer,0,train,x,u,0,1,",
                         "t,transformer,0,train,x,v,1,2,", "t,transformer,0,train,y,u,2,0,",
                         "t,transformer,0,held_out,y,v,0,1,"]
