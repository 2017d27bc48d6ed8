"""A cell's scores, derived from what its record stores: the rounded predictions of the model and its theory.

Scoring is a pure function of a prepared task and those stored outputs, so a record computed by
the same model code but scored by other scoring code is rescored when it is read, never retrained
(`rescore`): editing a metric changes the numbers a report shows, not which cells are trained.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np

from compbench.records import CellRecord
from compbench.records.metric_facts import additivity_not_applicable, r2_not_applicable, share_not_applicable
from compbench.scoring.metrics import cell_metrics, sign_accuracy

DECIMALS = 10  # predictions are stored, and scored, rounded to this many decimals
SCORING_ENTRY = "compbench.scoring.score"


def scoring_code_files() -> tuple[Path, ...]:
    """The compbench source files that score stored outputs: this module and every compbench module it imports."""
    from compbench.codehash import NOT_RESULT_CODE, code_closure

    # The metric facts' n/a rules decide what a cell's score says, so the walk enters records/ (where
    # they live) although records/ produces no prediction.
    return code_closure(SCORING_ENTRY, tuple(n for n in NOT_RESULT_CODE if n != "compbench.records"))


@functools.lru_cache(maxsize=None)
def scoring_version() -> str:
    """Hash of the code that scores stored outputs (`scoring_code_files`)."""
    from compbench.codehash import _source_hash

    return _source_hash(tuple(str(p) for p in scoring_code_files()))


def per_cell(values: np.ndarray, cell_ids: np.ndarray, n_cells: int) -> np.ndarray:
    """Mean over each cell's samples (NaN for a cell without samples)."""
    counts = np.bincount(cell_ids, minlength=n_cells)
    sums = np.bincount(cell_ids, weights=np.asarray(values, dtype=np.float64), minlength=n_cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts


def _needs_samples(data: Any, n_eval: int) -> bool:
    """Whether scoring reads each evaluation sample (top-1 accuracy, function-valued cells, a ±1 task's accuracy
    over samples when cells have several), not only cell means."""
    several = data.kind == "classification" and n_eval > len(data.cells)
    return data.kind == "multiclass" or data.samples is not None or several


def score_outputs(task: Any, predictions: Any, theory: Any, eval_cells: Any, where: list[str] | None = None,
                  probe: Any = None, nearest: list[float | None] | None = None) -> dict[str, Any]:
    """A record's scores and stored outputs from a model's (and its theory's) prediction on every evaluation sample.

    `task`: a runner.cells.PreparedTask (its data and additivity fit). Outputs are rounded to
    DECIMALS first: the metrics are those of the stored numbers, so `rescore` gives them again.
    On a task whose outputs are named factors, `probe` (the linear probe's prediction per cell) and
    `nearest` (each held-out cell's nearest-training similarity) are scored and stored beside them.
    """
    where = where if where is not None else [""]
    data = task.data
    ids = np.asarray(eval_cells)
    preds = np.round(np.asarray(predictions, dtype=np.float64), DECIMALS)
    th = None if theory is None else np.round(np.asarray(theory, dtype=np.float64), DECIMALS)
    if data.vector_output or data.samples is not None:
        out = _score_shaped(task, preds, th, ids, where)
    else:
        out = _score_scalar(task, preds, th, ids, where)
    if _has_factors(data):
        from compbench.scoring.metrics import representation_metrics

        probe = None if probe is None else np.round(np.asarray(probe, dtype=np.float64), DECIMALS)
        nearest = None if nearest is None else [None if v is None else round(float(v), DECIMALS) for v in nearest]
        metrics, na = representation_metrics(data.output_names, np.asarray(data.y, dtype=np.float64), data.test_mask,
                                             probe, nearest)
        out["metrics"].update(metrics)
        out["not_applicable"].update(na)
        out["probe_predictions"] = None if probe is None else probe.tolist()
        out["nearest_train"] = nearest
    if _needs_samples(data, len(ids)):
        n_eval = len(ids)
        out["samples"] = {"cells": ids.tolist(), "predictions": preds.reshape(n_eval, -1).tolist(),
                          "theory": None if th is None else th.reshape(n_eval, -1).tolist()}
    return out


def _has_factors(data: Any) -> bool:
    """Whether the task's outputs are named factors, scored per cell (where the representation diagnostics apply)."""
    return bool(data.output_names) and data.samples is None and data.kind != "multiclass"


def rescore(task: Any, record: CellRecord) -> CellRecord:
    """The record scored by this compbench's scoring code, from the outputs it stores (no training)."""
    from dataclasses import replace

    data = task.data
    if record.samples is not None:
        s = record.samples
        ids = np.asarray(s["cells"], dtype=np.int64)
        preds = np.asarray(s["predictions"], dtype=np.float64)
        theory = None if s.get("theory") is None else np.asarray(s["theory"], dtype=np.float64)
        if not data.vector_output:
            preds = preds[:, 0]
            theory = None if theory is None else theory[:, 0]
    else:  # cell means are all scoring reads here: one row per cell, in order
        preds = np.asarray(record.predictions, dtype=np.float64)
        theory = None if record.theory_predictions is None else np.asarray(record.theory_predictions, dtype=np.float64)
        ids = np.arange(len(data.cells))
    out = score_outputs(task, preds, theory, ids, probe=record.probe_predictions, nearest=record.nearest_train)
    return replace(record, **out, scoring=scoring_version())


def _score_scalar(task: Any, sample_preds: np.ndarray, sample_theory: np.ndarray | None, ids: np.ndarray,
                  where: list[str]) -> dict[str, Any]:
    data = task.data
    n = len(data.cells)
    preds = np.round(per_cell(sample_preds, ids, n), DECIMALS)
    theory_preds = None if sample_theory is None else np.round(per_cell(sample_theory, ids, n), DECIMALS)
    where[0] = "additivity"
    fitter = task.additivity
    additivity = float(fitter.score(preds)) if fitter is not None else float("nan")
    where[0] = "scoring"
    metrics = cell_metrics(data.kind, data.y, data.train_mask, preds, theory_preds, additivity, test_mask=data.test_mask)
    if fitter is None:
        del metrics["additivity"]
    if data.kind == "classification" and len(ids) > n:
        held = np.asarray(data.test_mask, dtype=bool)[ids]
        truth = np.asarray(data.y, dtype=np.float64)[ids][held]
        metrics["heldout_acc_samples"] = sign_accuracy(sample_preds[held], truth)
        if sample_theory is not None:  # its theory twin: the leaderboard shows the two side by side
            metrics["theory_acc_samples"] = sign_accuracy(sample_theory[held], truth)
    metrics.update(_irrelevant(task, preds[None, :], None if theory_preds is None else theory_preds[None, :]))
    test = data.test_mask
    return {
        "metrics": metrics,
        "not_applicable": _not_applicable(metrics, int(test.sum()), None if theory_preds is None else theory_preds[test], fitter),
        "predictions": preds.tolist(),
        "theory_predictions": None if theory_preds is None else theory_preds.tolist(),
    }


def _irrelevant(task: Any, rows: np.ndarray, theory_rows: np.ndarray | None) -> dict[str, float]:
    """The irrelevant share of the model (and of its theory), for tasks that declare `relevant`."""
    data, fitter = task.data, task.additivity
    if fitter is None or not data.irrelevant:
        return {}
    from compbench.theory.additivity import irrelevant_share

    out = {"irrelevant_share": float(irrelevant_share(fitter, rows, data.irrelevant))}
    if theory_rows is not None:
        out["theory_irrelevant_share"] = float(irrelevant_share(fitter, theory_rows, data.irrelevant))
    return out


def _score_shaped(task: Any, preds_in: np.ndarray, theory_in: np.ndarray | None, ids: np.ndarray,
                  where: list[str]) -> dict[str, Any]:
    """Metrics of a multi-class, K-output or function-valued task (scoring/metrics.shaped_metrics)."""
    from compbench.scoring.metrics import shaped_metrics
    from compbench.theory.additivity import pooled_score

    data = task.data
    n = len(data.cells)
    n_eval = len(ids)
    preds = preds_in.reshape(n_eval, -1)
    theory = None if theory_in is None else theory_in.reshape(n_eval, -1)
    k = preds.shape[1]
    test_cells, train_cells = np.flatnonzero(data.test_mask), np.flatnonzero(data.train_mask)
    s = data.samples
    if s is not None:
        m = s.n_eval
        if not np.array_equal(ids, np.repeat(np.arange(n), m)):
            raise ValueError("function-valued cells: the evaluation batch must hold every cell at the shared x_eval, cell by cell")
        # rows for the additive decomposition: one per (x, output), columns the cells
        cube = preds.reshape(n, m, k)
        rows = cube.transpose(1, 2, 0).reshape(m * k, n)
        th_rows = None if theory is None else theory.reshape(n, m, k).transpose(1, 2, 0).reshape(m * k, n)
        target = np.asarray(s.y_eval).reshape(n * m, *np.shape(s.y_eval)[2:])
        stored, stored_th = cube.mean(axis=1), None if theory is None else theory.reshape(n, m, k).mean(axis=1)
        row_cells = ids
        score_preds, score_theory = preds, theory
    else:
        cell_preds = np.stack([per_cell(preds[:, j], ids, n) for j in range(k)], axis=1)
        cell_th = None if theory is None else np.stack([per_cell(theory[:, j], ids, n) for j in range(k)], axis=1)
        rows, th_rows = cell_preds.T, None if cell_th is None else cell_th.T
        stored, stored_th = cell_preds, cell_th
        if data.kind == "multiclass":  # top-1 accuracy per sample, then per cell
            row_cells, target, score_preds, score_theory = ids, np.asarray(data.y)[ids], preds, theory
        else:
            row_cells, target, score_preds, score_theory = np.arange(n), np.asarray(data.y), cell_preds, cell_th
    where[0] = "scoring"
    metrics, per_output = shaped_metrics(data.kind, test_cells, train_cells, target, score_preds, score_theory, row_cells,
                                         per_task_r2=s is not None)
    if data.output_names and s is None and data.kind != "multiclass":
        from compbench.scoring.metrics import factor_metrics

        metrics.update(factor_metrics(data.output_names, np.asarray(data.y, dtype=np.float64), data.test_mask, cell_preds, cell_th))
    where[0] = "additivity"
    if task.additivity is not None:
        metrics["additivity"] = float(pooled_score(task.additivity, rows))
    metrics.update(_irrelevant(task, rows, th_rows))
    squeeze = (lambda a: a[:, 0]) if (k == 1 and not data.vector_output) else (lambda a: a)
    out: dict[str, Any] = {
        "metrics": metrics,
        "not_applicable": _not_applicable(metrics, len(test_cells), None if stored_th is None else stored_th[test_cells],
                                          task.additivity),
        "predictions": np.round(squeeze(stored), DECIMALS).tolist(),
        "theory_predictions": None if stored_th is None else np.round(squeeze(stored_th), DECIMALS).tolist(),
        "per_output": per_output or None,
        "theory_note": "theory: the MSE-on-one-hot network (kernel regression on one-hot targets, argmax)"
        if data.kind == "multiclass" else None,
    }
    return out


def _not_applicable(metrics: dict[str, float], n_heldout: int, theory_heldout: np.ndarray | None,
                    fitter: Any = None) -> dict[str, str]:
    """Metrics this cell carries whose value says nothing here (records.metric_facts' rules), with why."""
    out = {}
    if "theory_r2" in metrics:
        why = r2_not_applicable(n_heldout, theory_heldout)
        if why:
            out["theory_r2"] = why
    if "additivity" in metrics and fitter is not None:
        why = additivity_not_applicable(fitter.vacuous)
        if why:
            out["additivity"] = why
    for share in ("irrelevant_share", "theory_irrelevant_share"):
        why = share_not_applicable(n_heldout) if share in metrics else None
        if why:
            out[share] = why
    return out
