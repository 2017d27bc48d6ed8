"""The per-cell predictions of a report as one typed table: predictions.parquet by default, predictions.csv on request.

One row per (task, model, seed, cell) and, for vector outputs, per output: the cell's labels, truth, prediction and
theory prediction. Columns are typed once here (text, whole numbers, floats), so the parquet file and the CSV hold the
same rows; the parquet file keeps the types, the CSV is text for spreadsheets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from compbench.errors import CompbenchError

PREDICTION_COLUMNS = ("task", "model", "seed", "split")


class PredictionsFormatError(CompbenchError, RuntimeError):
    """predictions.parquet cannot be written here (pyarrow is missing)."""


def predictions_frame(ctx: Any) -> Any:
    """The predictions of `ctx.records` (a ReportContext's) as a pandas DataFrame: text columns of str (None where a
    task has no such component), seed int64, output Int64, y/prediction/theory int64 (Int64 with gaps) for class tasks
    alone and float64 (NaN where missing) otherwise. Needs no pyarrow (the `predictions-csv` writer's frame)."""
    import pandas as pd

    columns, text = _columns(ctx)
    frame = {}
    for name, chunks in columns.items():
        if name in text:
            frame[name] = _text_values(chunks, text[name])
        else:
            values, missing = _numbers(chunks)
            frame[name] = values if missing is None else pd.arrays.IntegerArray(values, missing)
    return pd.DataFrame(frame, columns=list(columns))


def predictions_table(ctx: Any) -> Any:
    """The same predictions as a pyarrow Table, with the pandas metadata that gives `predictions_frame`'s dtypes back
    (`pd.read_parquet`), built from whole columns: text as indices into the few distinct values it has (a task, model
    or label per row of ~10^6), never as 10^6 Python strings."""
    pa = _pyarrow()

    columns, text = _columns(ctx)
    arrays, dtypes = {}, {}
    for name, chunks in columns.items():
        if name in text:
            arrays[name], dtypes[name] = _text_array(chunks, text[name]), "str"
        else:
            values, missing = _numbers(chunks)
            # from_pandas: NaN is stored as null, as pandas' own conversion stores it
            arrays[name] = pa.array(values, mask=missing, from_pandas=values.dtype.kind == "f")
            dtypes[name] = "float64" if values.dtype.kind == "f" else "int64" if missing is None else "Int64"
    schema = _schema(dtypes)
    return pa.Table.from_arrays([arrays[c].cast(schema.field(c).type) for c in columns], schema=schema)


def _columns(ctx: Any) -> tuple[dict[str, list[tuple[np.ndarray | None, int]]], dict[str, dict[str, int]]]:
    """Each column's chunks (one per record; None where a record has no such column) in the table's order, and for
    each text column the index of each of its values (a text chunk holds indices into them)."""
    # Built a column at a time, per record: a sweep of 1,728 models writes ~10^6 rows.
    parts: list[dict[str, Any]] = []
    components: dict[str, None] = {}
    vector = False
    text: dict[str, dict[str, int]] = {c: {} for c in ("task", "model", "split")}
    labels: dict[str, dict[str, np.ndarray]] = {}
    splits = np.array([text["split"].setdefault(s, len(text["split"])) for s in ("held_out", "train")], dtype=np.int32)

    def index(column: str, value: str) -> int:
        values = text.setdefault(column, {})
        return values.setdefault(value, len(values))

    for r in ctx.records:
        if not r.ok or r.predictions is None or r.task not in ctx.tasks:
            continue
        data = ctx.tasks[r.task]
        if r.task not in labels:
            names = [_column(name) for name in _component_names(data)]
            cells = np.asarray(data.cells, dtype=int).reshape(len(data.cells), -1)
            labels[r.task] = {name: np.array([index(name, _label(data, c, int(v))) for v in cells[:, c]], dtype=np.int32)
                              for c, name in enumerate(names)}
        task_labels = labels[r.task]
        components.update(dict.fromkeys(task_labels))
        n = len(data.cells)
        classes = bool(getattr(data, "n_classes", 0))
        width = 1 if classes or np.ndim(data.y) == 1 else int(np.shape(data.y)[1])
        vector = vector or width > 1
        preds = np.asarray(r.predictions, dtype=float)
        theory = None if r.theory_predictions is None else np.asarray(r.theory_predictions, dtype=float)
        split = np.where(np.asarray(data.test_mask, dtype=bool), splits[0], splits[1])
        part: dict[str, Any] = {"task": np.full(n * width, index("task", r.task), dtype=np.int32),
                                "model": np.full(n * width, index("model", r.model), dtype=np.int32),
                                "seed": np.full(n * width, r.seed, dtype=np.int64), "split": np.repeat(split, width)}
        for name, column in task_labels.items():
            part[name] = np.repeat(column, width)
        if classes:  # the class, and the argmax of the per-class outputs
            part["y"] = np.asarray(data.y, dtype=np.int64)
            part["prediction"] = np.argmax(preds.reshape(n, -1), axis=1).astype(np.int64)
            part["theory"] = np.argmax(theory.reshape(n, -1), axis=1).astype(np.int64) if theory is not None else None
        else:
            if width > 1:
                part["output"] = np.tile(np.arange(width, dtype=np.int64), n)
            part["y"] = np.asarray(data.y, dtype=float).reshape(-1)
            part["prediction"] = preds.reshape(-1)
            part["theory"] = theory.reshape(-1) if theory is not None else None
        parts.append(part)
    names = [*PREDICTION_COLUMNS, *components, *(["output"] if vector else []), "y", "prediction", "theory"]
    sizes = [len(part["task"]) for part in parts]
    return {c: [(part.get(c), n) for part, n in zip(parts, sizes)] for c in names}, \
        {c: values for c, values in text.items() if c in names}


def _indices(chunks: list[tuple[np.ndarray | None, int]]) -> np.ndarray:
    """A text column's indices, -1 where a chunk is None (a component of another task)."""
    return np.concatenate([c if c is not None else np.full(n, -1, dtype=np.int32) for c, n in chunks]) \
        if chunks else np.empty(0, dtype=np.int32)


def _text_values(chunks: list[tuple[np.ndarray | None, int]], values: dict[str, int]) -> np.ndarray:
    """A text column as objects: its values, None where a chunk is None."""
    return np.array([*values, None], dtype=object)[_indices(chunks)]  # -1: the None at the end


def _text_array(chunks: list[tuple[np.ndarray | None, int]], values: dict[str, int]) -> Any:
    """A text column as arrow text: its values, null where a chunk is None."""
    import pyarrow as pa
    import pyarrow.compute as pc

    indices = _indices(chunks)
    missing = indices < 0
    return pc.take(pa.array(list(values), type=pa.large_string()), pa.array(indices, mask=missing if missing.any() else None))


def _numbers(chunks: list[tuple[np.ndarray | None, int]]) -> tuple[np.ndarray, np.ndarray | None]:
    """One numeric column and where it is missing (None: nowhere): float64 (NaN where missing, None) if any chunk
    holds floats, else int64 with a mask where a chunk is missing (a class model without a theory, the output index of a
    scalar task beside a vector one)."""
    present = [c for c, _ in chunks if c is not None]
    if not present or any(c.dtype.kind == "f" for c in present):
        values = np.concatenate([np.asarray(c, dtype=float) if c is not None else np.full(n, np.nan) for c, n in chunks]) \
            if chunks else np.empty(0)
        return values, None
    values = np.concatenate([c if c is not None else np.zeros(n, dtype=np.int64) for c, n in chunks])
    missing = np.concatenate([np.zeros(n, dtype=bool) if c is not None else np.ones(n, dtype=bool) for c, n in chunks])
    return values, missing if missing.any() else None


def _schema(dtypes: dict[str, str]) -> Any:
    """The arrow schema, with pandas' metadata, that this pandas gives a frame of these column dtypes: taken from a
    one-row frame of each (text as pandas infers it from objects, as the frame's own columns are)."""
    import pandas as pd
    import pyarrow as pa

    sample: dict[str, Any] = {"str": np.array(["x"], dtype=object), "int64": np.zeros(1, dtype=np.int64),
                              "Int64": pd.array([None], dtype="Int64"), "float64": np.zeros(1)}
    return pa.Schema.from_pandas(pd.DataFrame({c: sample[d] for c, d in dtypes.items()}), preserve_index=False)


def parquet_bytes(table: Any) -> bytes:
    """`table` (`predictions_table`) as a parquet file (pyarrow; snappy, pandas' metadata kept, so pd.read_parquet gives
    its dtypes back)."""
    pa = _pyarrow()
    import pyarrow.parquet as pq

    buf = pa.BufferOutputStream()
    pq.write_table(table, buf)
    return bytes(buf.getvalue())


def _pyarrow() -> Any:
    """pyarrow, or PredictionsFormatError saying how to do without it."""
    try:
        import pyarrow
    except ImportError:
        raise PredictionsFormatError(
            "writing predictions.parquet needs pyarrow, a dependency of compbench that is not installed here: "
            "pip install pyarrow, or write the predictions as text with --format predictions-csv") from None
    return pyarrow


def csv_frame(frame: Any) -> Any:
    """`frame` for predictions.csv: nullable whole numbers as objects (an int, or None: an empty cell), so the CSV
    writer takes its column-at-a-time path (`escape.csv_text`) and writes `1`, never `1.0`."""
    import pandas as pd

    nullable = {c: object for c in frame.columns if isinstance(frame[c].dtype, pd.Int64Dtype)}
    if not nullable:
        return frame
    frame = frame.astype(nullable)
    for c in nullable:
        frame[c] = frame[c].where(frame[c].notna(), None)
    return frame


def _component_names(data: Any) -> list[str]:
    return list(data.component_names) or [f"component {c + 1}" for c in range(data.n_components)]


def _column(name: str) -> str:
    # A component named like a fixed column must not overwrite it.
    return f"component:{name}" if name in (*PREDICTION_COLUMNS, "output", "y", "prediction", "theory") else name


def _label(data: Any, c: int, v: int) -> str:
    label = getattr(data, "label", None)
    return str(label(c, v)) if callable(label) else str(v)


__all__ = ["PREDICTION_COLUMNS", "PredictionsFormatError", "csv_frame", "parquet_bytes", "predictions_frame",
           "predictions_table"]
