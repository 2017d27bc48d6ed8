"""The built-in `predictions` report writer (predictions.parquet) and its text twin `predictions-csv`: one row per
(task, model, seed, cell), labels per component."""

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


def test_predictions_rows_labels_truth_and_theory(tmp_path):
    (tmp_path / "s.yaml").write_text(SUITE)
    out = tmp_path / "out"
    assert main(["run", "--suite", str(tmp_path / "s.yaml"), "--out", str(out), "--quiet", "--format", "predictions"]) == 0
    assert not (out / "predictions.csv").exists()  # the text copy is opt-in (predictions-csv)
    frame = pd.read_parquet(out / "predictions.parquet")
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
    assert table["component 1"].isna().all() and sym.colour.isna().all()  # not a component of that task


def test_class_rows_stay_integers_beside_a_model_without_theory(tmp_path):
    # One model with a theory, one without (a transformer's): the class columns are whole numbers either way.
    from types import SimpleNamespace

    from compbench.report.writers import PredictionsCsvWriter, PredictionsWriter

    task = make_task("table", components=[{"name": "a", "values": ["x", "y"]}, {"name": "b", "values": ["u", "v"]}],
                     target={"cells": [["x", "u", "p"], ["x", "v", "q"], ["y", "u", "r"], ["y", "v", "p"]]},
                     kind="multiclass", held_out=[["y", "v"]])
    onehot = np.eye(3)[[1, 2, 0, 1]]
    rec = lambda model, theory: SimpleNamespace(ok=True, task="t", model=model, seed=0, predictions=onehot,  # noqa: E731
                                                theory_predictions=theory)
    write = lambda name, data: (tmp_path / name).write_bytes(data if isinstance(data, bytes) else data.encode()) \
        and tmp_path / name  # noqa: E731
    ctx = SimpleNamespace(records=[rec("kernel", onehot), rec("transformer", None)], tasks={"t": task}, write_file=write)
    PredictionsWriter().write(ctx)
    PredictionsCsvWriter().write(ctx)
    frame = pd.read_parquet(tmp_path / "predictions.parquet")
    assert [str(frame[c].dtype) for c in ("seed", "y", "prediction", "theory")] == ["int64", "int64", "int64", "Int64"]
    assert frame.theory.tolist() == [1, 2, 0, 1, pd.NA, pd.NA, pd.NA, pd.NA]
    lines = (tmp_path / "predictions.csv").read_text().splitlines()
    assert lines[0] == "task,model,seed,split,a,b,y,prediction,theory"
    assert lines[1:] == ["t,kernel,0,train,x,u,0,1,1", "t,kernel,0,train,x,v,1,2,2", "t,kernel,0,train,y,u,2,0,0",
                         "t,kernel,0,held_out,y,v,0,1,1", "t,transformer,0,train,x,u,0,1,",
                         "t,transformer,0,train,x,v,1,2,", "t,transformer,0,train,y,u,2,0,",
                         "t,transformer,0,held_out,y,v,0,1,"]


def _shapes_run(tmp_path, formats: str):
    from tiny_suites import SHAPES

    (tmp_path / "shapes.yaml").write_text(SHAPES)
    out = tmp_path / "out"
    assert main(["run", "--suite", str(tmp_path / "shapes.yaml"), "--out", str(out), "--quiet", "--format", formats]) == 0
    return out


def test_parquet_holds_the_frame_the_csv_held_scalar_class_and_vector(tmp_path):
    # predictions.parquet replaced predictions.csv (issue #34: formatting 757k rows as text was most of the tables'
    # time); the opt-in CSV writes the same rows, so pandas reads the same frame from either, types kept by parquet.
    out = _shapes_run(tmp_path, "predictions,predictions-csv")
    frame = pd.read_parquet(out / "predictions.parquet")
    assert list(frame.columns) == ["task", "model", "seed", "split", "colour", "shape", "a", "b", "output", "y",
                                   "prediction", "theory"]
    assert {c: str(frame[c].dtype) for c in ("seed", "output", "y", "prediction", "theory")} == {
        "seed": "int64", "output": "Int64", "y": "float64", "prediction": "float64", "theory": "float64"}
    assert frame.groupby("task", sort=False).size().to_dict() == {"scalar": 6, "classes": 4, "vector": 12}
    vector = frame[frame.task == "vector"]
    assert vector.output.tolist() == [0, 1] * 6 and frame[frame.task != "vector"].output.isna().all()
    # (red, square) = colour red (1, 0) + shape square (0.25, -0.25), one row per output; the label is kept as written
    red_square = vector[(vector.colour == "red") & (vector["shape"] == "square")]
    assert red_square.y.tolist() == [1.25, -0.25] and set(vector["shape"]) == {"=1+1", "square"}
    classes = frame[frame.task == "classes"]
    assert classes.y.tolist() == [0, 1, 2, 0] and classes.prediction.tolist()[:3] == [0, 1, 2]
    text = pd.read_csv(out / "predictions.csv", dtype={"output": "Int64"})
    assert (text["shape"] == "'=1+1").sum() == 6  # a spreadsheet's formula, escaped in the text copy alone
    text["shape"] = text["shape"].replace("'=1+1", "=1+1")
    pd.testing.assert_frame_equal(frame, text)


def test_the_predictions_writer_formats_no_number_as_text(tmp_path, monkeypatch):
    # Counted, not timed: the default writer hands its frame to no text formatter; the file is parquet, floats as DOUBLE.
    import pyarrow.parquet as pq

    import compbench.report.escape as escape
    import compbench.report.writers as writers

    calls = []
    monkeypatch.setattr(writers, "csv_text", lambda frame: calls.append(frame) or escape.csv_text(frame))
    out = _shapes_run(tmp_path, "predictions")
    data = (out / "predictions.parquet").read_bytes()
    assert calls == [] and data[:4] == data[-4:] == b"PAR1"
    schema = pq.read_schema(out / "predictions.parquet")
    assert {n: str(schema.field(n).type) for n in ("seed", "y", "prediction", "theory")} == {
        "seed": "int64", "y": "double", "prediction": "double", "theory": "double"}


def test_a_report_no_longer_keeps_the_predictions_csv_an_earlier_one_wrote(tmp_path):
    # The predictions writer wrote predictions.csv until issue #34: its rerun removes that copy (stale beside the
    # parquet file) unless the CSV writer now owns it.
    import json

    out = _shapes_run(tmp_path, "predictions")

    def earlier() -> None:  # the report of an earlier compbench: its predictions writer wrote predictions.csv
        manifest = json.loads((out / ".report" / "manifest.json").read_text())
        manifest["predictions"] = {"digest": "an earlier compbench", "files": ["predictions.csv"], "beside": [],
                                   "sha256": {"predictions.csv": "0"}}
        (out / ".report" / "manifest.json").write_text(json.dumps(manifest))

    earlier()
    (out / "predictions.csv").write_text("task,model\nold,rows\n")
    assert main(["report", "--suite", str(tmp_path / "shapes.yaml"), "--results", str(out), "-q",
                 "--format", "predictions"]) == 0
    assert not (out / "predictions.csv").exists() and (out / "predictions.parquet").is_file()
    earlier()  # and now the CSV writer, run first, writes predictions.csv: the predictions writer leaves it
    assert main(["report", "--suite", str(tmp_path / "shapes.yaml"), "--results", str(out), "-q",
                 "--format", "predictions-csv,predictions"]) == 0
    assert (out / "predictions.csv").read_text().startswith("task,model,seed,split,")
    assert json.loads((out / ".report" / "manifest.json").read_text())["predictions"]["files"] == ["predictions.parquet"]


def test_without_pyarrow_the_report_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    # pyarrow is a dependency, but an environment can lack it (a --no-deps install): one line naming both ways out
    # (install it, or the text copy), exit 2, the cells kept in the store.
    import sys

    from compbench.store import ResultStore

    from tiny_suites import SHAPES

    monkeypatch.setitem(sys.modules, "pyarrow", None)  # `import pyarrow` raises ImportError
    out = tmp_path / "out"

    (tmp_path / "shapes.yaml").write_text(SHAPES)
    assert main(["run", "--suite", str(tmp_path / "shapes.yaml"), "--out", str(out), "-q", "--format", "predictions"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("compbench: writing predictions.parquet needs pyarrow") and "--format predictions-csv" in err[-1]
    assert "Traceback" not in "\n".join(err) and not (out / "predictions.parquet").exists()
    assert len(ResultStore(out / "store").latest()) == 3  # the cells computed before the report are kept
    # The way out it names works without pyarrow: the text copy is built by pandas alone.
    assert main(["report", "--suite", str(tmp_path / "shapes.yaml"), "--results", str(out), "-q",
                 "--format", "predictions-csv"]) == 0
    lines = (out / "predictions.csv").read_text().splitlines()
    assert lines[0] == "task,model,seed,split,colour,shape,a,b,output,y,prediction,theory" and len(lines) == 1 + 22


def test_missing_floats_are_nulls_in_the_parquet_file_as_pandas_stores_them(tmp_path):
    # A regression model without a theory: its theory column is NaN for pandas, and null in the file for every other
    # reader (pyarrow, polars, DuckDB), as pandas' own conversion writes it; text columns are text, never arrow's null type.
    from types import SimpleNamespace

    import pyarrow.parquet as pq

    from compbench.report.predictions import parquet_bytes, predictions_frame, predictions_table

    task = make_task("table", components=[{"name": "a", "values": ["x", "y"]}, {"name": "b", "values": ["u", "v"]}],
                     target={"sum": {"a": [0.0, 1.0], "b": [0.0, 0.5]}}, kind="regression", held_out=[["y", "v"]])
    rec = lambda model, theory: SimpleNamespace(ok=True, task="t", model=model, seed=0,  # noqa: E731
                                                predictions=[0.1, 0.2, 0.3, float("nan")], theory_predictions=theory)
    ctx = SimpleNamespace(records=[rec("kernel", [0.0, 0.5, 1.0, 1.5]), rec("transformer", None)], tasks={"t": task})
    (tmp_path / "p.parquet").write_bytes(parquet_bytes(predictions_table(ctx)))
    table = pq.read_table(tmp_path / "p.parquet")
    assert [table.column(c).null_count for c in ("theory", "prediction", "y", "task", "a")] == [4, 2, 0, 0, 0]
    assert str(table.schema.field("task").type) in ("string", "large_string")
    frame = pd.read_parquet(tmp_path / "p.parquet")
    pd.testing.assert_frame_equal(frame, predictions_frame(ctx))
    assert frame.theory.isna().tolist() == [False] * 4 + [True] * 4
