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
# Whole numbers or floats whatever the task: a class task's argmax, a regression's value, a vector's output index.
_NUMBERS = ("seed", "output", "y", "prediction", "theory")


class PredictionsFormatError(CompbenchError, RuntimeError):
    """predictions.parquet cannot be written here (pyarrow is missing)."""


def predictions_frame(ctx: Any) -> Any:
    """The predictions of `ctx.records` (a ReportContext's) as a pandas DataFrame: text columns of str (None where a
    task has no such component), seed int64, output Int64, y/prediction/theory int64 (Int64 with gaps) for class tasks
    alone and float64 (NaN where missing) otherwise."""
    import pandas as pd

    # Built a column at a time, per record: a sweep of 1,728 models writes ~10^6 rows.
    parts: list[dict[str, Any]] = []
    components: dict[str, None] = {}
    vector = False
    labels: dict[str, dict[str, np.ndarray]] = {}
    for r in ctx.records:
        if not r.ok or r.predictions is None or r.task not in ctx.tasks:
            continue
        data = ctx.tasks[r.task]
        if r.task not in labels:
            names = [_column(name) for name in _component_names(data)]
            cells = np.asarray(data.cells, dtype=int).reshape(len(data.cells), -1)
            labels[r.task] = {name: np.array([_label(data, c, int(v)) for v in cells[:, c]], dtype=object)
                              for c, name in enumerate(names)}
        task_labels = labels[r.task]
        components.update(dict.fromkeys(task_labels))
        n = len(data.cells)
        classes = bool(getattr(data, "n_classes", 0))
        width = 1 if classes or np.ndim(data.y) == 1 else int(np.shape(data.y)[1])
        vector = vector or width > 1
        preds = np.asarray(r.predictions, dtype=float)
        theory = None if r.theory_predictions is None else np.asarray(r.theory_predictions, dtype=float)
        split = np.where(np.asarray(data.test_mask, dtype=bool), "held_out", "train").astype(object)
        part: dict[str, Any] = {"task": np.full(n * width, r.task, dtype=object),
                                "model": np.full(n * width, r.model, dtype=object),
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
    columns = [*PREDICTION_COLUMNS, *components, *(["output"] if vector else []), "y", "prediction", "theory"]
    # One numpy concatenation per column (pandas' concat of 10^4 small frames takes seconds).
    sizes = [len(part["task"]) for part in parts]
    chunks = {c: [(part.get(c), n) for part, n in zip(parts, sizes)] for c in columns}
    return pd.DataFrame({c: _numbers(chunks[c]) if c in _NUMBERS else _text(chunks[c]) for c in columns}, columns=columns)


def _text(chunks: list[tuple[np.ndarray | None, int]]) -> np.ndarray:
    """Object text, None where a chunk has no such column (a component of another task)."""
    if not chunks:
        return np.empty(0, dtype=object)
    return np.concatenate([c if c is not None else np.full(n, None, dtype=object) for c, n in chunks])


def _numbers(chunks: list[tuple[np.ndarray | None, int]]) -> Any:
    """One numeric column: float64 (NaN where missing) if any chunk holds floats, else int64, nullable (Int64) only
    where a chunk is missing (a class model without a theory, the output index of a scalar task beside a vector one)."""
    import pandas as pd

    present = [c for c, _ in chunks if c is not None]
    if not present or any(c.dtype.kind == "f" for c in present):
        return np.concatenate([np.asarray(c, dtype=float) if c is not None else np.full(n, np.nan) for c, n in chunks]) \
            if chunks else np.empty(0)
    values = np.concatenate([c if c is not None else np.zeros(n, dtype=np.int64) for c, n in chunks])
    missing = np.concatenate([np.zeros(n, dtype=bool) if c is not None else np.ones(n, dtype=bool) for c, n in chunks])
    return pd.arrays.IntegerArray(values, missing) if missing.any() else values


def parquet_bytes(frame: Any) -> bytes:
    """`frame` as a parquet file (pyarrow; snappy, pandas' metadata kept, so pd.read_parquet gives its dtypes back)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise PredictionsFormatError(
            "writing predictions.parquet needs pyarrow, a dependency of compbench that is not installed here: "
            "pip install pyarrow, or write the predictions as text with --format predictions-csv") from None
    buf = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), buf)
    return bytes(buf.getvalue())


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
    return label(c, v) if callable(label) else str(v)


__all__ = ["PREDICTION_COLUMNS", "PredictionsFormatError", "csv_frame", "parquet_bytes", "predictions_frame"]
