"""Execute one job: train the model's seeds, compute its theory prediction, score each seed."""

from __future__ import annotations

import time
import traceback
from typing import Any

import numpy as np

from compbench.adapters import InvalidModelError, get_adapter
from compbench.runner.cells import Job
from compbench.runner.device import determinism_settings
from compbench.scoring.metrics import cell_metrics


def _base_record(job: Job, seed: int, key: str, device: str) -> dict[str, Any]:
    t, m = job.task, job.model
    return {
        "key": key,
        "task": t.entry.id,
        "family": t.entry.family,
        "encoding": t.entry.encoding_name,
        "model": m.id,
        "group": m.group,
        "adapter": m.adapter,
        "sweep": m.sweep_values,
        "seed": seed,
        "device": device,
        "n_train": int(t.data.train_mask.sum()),
        "n_test": int((~t.data.train_mask).sum()),
        "determinism": determinism_settings(),
    }


def per_cell(values: np.ndarray, cell_ids: np.ndarray, n_cells: int) -> np.ndarray:
    """Mean over each cell's samples (NaN for a cell without samples)."""
    counts = np.bincount(cell_ids, minlength=n_cells)
    sums = np.bincount(cell_ids, weights=values, minlength=n_cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts


def _failed(job: Job, device: str, status: str, error: str, start: float, **extra: Any) -> list[dict[str, Any]]:
    return [
        {**_base_record(job, s, k, device), "status": status, "error": error, "wall_time": time.perf_counter() - start, **extra}
        for s, k in zip(job.seeds, job.keys)
    ]


def run_job(job: Job, device: str) -> list[dict[str, Any]]:
    """Records for every seed of the job; failures become error (or skipped) records."""
    start = time.perf_counter()
    data = job.task.data
    try:
        enc = job.task.encoded
        adapter = get_adapter(job.model.adapter)(job.model.params, device=device)
        fitted = adapter.fit_seeds(enc.train, enc.evaluate, list(job.seeds))
        shared = None
        if any(f.kernels is None for f in fitted):
            K_tt = adapter.kernel(enc.train, enc.train)
            shared = None if K_tt is None else (K_tt, adapter.kernel(enc.evaluate, enc.train))
        options = adapter.theory_options()
        kernel_name = adapter.theory_kernel_name()
    except InvalidModelError as exc:
        return _failed(job, device, "skipped" if job.model.skip_invalid else "error", str(exc), start)
    except Exception as exc:  # noqa: BLE001 — a crashing cell is recorded, the run goes on
        return _failed(job, device, "error", f"{type(exc).__name__}: {exc}", start, traceback=traceback.format_exc(limit=6))
    train_wall = (time.perf_counter() - start) / len(job.seeds)
    n, ids = len(data.cells), enc.evaluate.cell_ids
    records = []
    for seed, key, fit in zip(job.seeds, job.keys, fitted):
        t0 = time.perf_counter()
        rec = _base_record(job, seed, key, device)
        rec.update(fit.info)
        if fit.error:
            rec.update(status="error", error=fit.error, wall_time=train_wall)
            records.append(rec)
            continue
        preds = per_cell(fit.predictions, ids, n)
        kernels = fit.kernels or shared
        theory_preds = None
        if fit.theory_predictions is not None:
            theory_preds = per_cell(fit.theory_predictions, ids, n)
        elif kernels is not None:
            from compbench.theory.predict import theory_predictions

            regression = options["objective"] in ("min_norm", "ridge")
            sample_theory = theory_predictions(
                kernels[0], kernels[1], enc.train.y,
                f0_train=fit.initial_train if regression else None,
                f0_eval=fit.initial_eval if regression else None,
                **options,
            )
            theory_preds = per_cell(sample_theory, ids, n)
        additivity = float(job.task.additivity.score(preds))
        rec.update(cell_metrics(data.kind, data.y, data.train_mask, preds, theory_preds, additivity))
        rec.update(
            status="ok",
            theory_kernel=kernel_name,
            theory_objective=options["objective"],
            predictions=np.round(preds, 10).tolist(),
            theory_predictions=None if theory_preds is None else np.round(theory_preds, 10).tolist(),
            wall_time=train_wall + time.perf_counter() - t0,
        )
        records.append(rec)
    return records
