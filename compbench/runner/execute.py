"""Execute one job: train the model's seeds, compute its theory prediction, score each seed."""

from __future__ import annotations

import time
import traceback
from typing import Any

import numpy as np

from compbench.adapters import InvalidModelError, get_adapter
from compbench.runner.cells import Job
from compbench.scoring.metrics import cell_metrics


def _base_record(job: Job, seed: int, key: str, device: str) -> dict[str, Any]:
    t, m = job.task, job.model
    return {
        "key": key,
        "task": t.entry.id,
        "family": t.entry.family,
        "encoding": t.entry.encoding,
        "model": m.id,
        "group": m.group,
        "adapter": m.adapter,
        "sweep": m.sweep_values,
        "seed": seed,
        "device": device,
        "n_train": int(t.data.train_mask.sum()),
        "n_test": int((~t.data.train_mask).sum()),
    }


def run_job(job: Job, device: str) -> list[dict[str, Any]]:
    """Records for every seed of the job; failures become error (or skipped) records."""
    start = time.perf_counter()
    data = job.task.data
    try:
        adapter = get_adapter(job.model.adapter)(job.model.params, device=device)
        fitted = adapter.fit_seeds(job.task.inputs, data.y, data.train_mask, list(job.seeds))
        shared_kernel = None
        if any(f.kernel is None for f in fitted):
            shared_kernel = adapter.kernel(job.task.inputs)
        options = adapter.theory_options()
        kernel_name = adapter.theory_kernel_name()
    except InvalidModelError as exc:
        status = "skipped" if job.model.skip_invalid else "error"
        return [
            {**_base_record(job, s, k, device), "status": status, "error": str(exc), "wall_time": time.perf_counter() - start}
            for s, k in zip(job.seeds, job.keys)
        ]
    except Exception as exc:  # noqa: BLE001 — a crashing cell is recorded, the run goes on
        msg = f"{type(exc).__name__}: {exc}"
        tb = traceback.format_exc(limit=6)
        return [
            {**_base_record(job, s, k, device), "status": "error", "error": msg, "traceback": tb, "wall_time": time.perf_counter() - start}
            for s, k in zip(job.seeds, job.keys)
        ]
    train_wall = (time.perf_counter() - start) / len(job.seeds)
    records = []
    for seed, key, fit in zip(job.seeds, job.keys, fitted):
        t0 = time.perf_counter()
        rec = _base_record(job, seed, key, device)
        rec.update(fit.info)
        if fit.error:
            rec.update(status="error", error=fit.error, wall_time=train_wall)
            records.append(rec)
            continue
        K = fit.kernel if fit.kernel is not None else shared_kernel
        theory_preds = None
        if K is not None:
            from compbench.theory.predict import theory_predictions

            f0 = fit.initial_predictions if options["objective"] in ("min_norm", "ridge") else None
            theory_preds = theory_predictions(K, data.y, data.train_mask, f0=f0, **options)
        additivity = float(job.task.additivity.score(fit.predictions))
        rec.update(cell_metrics(data.kind, data.y, data.train_mask, fit.predictions, theory_preds, additivity))
        rec.update(
            status="ok",
            theory_kernel=kernel_name,
            theory_objective=options["objective"],
            predictions=np.round(fit.predictions, 10),
            theory_predictions=None if theory_preds is None else np.round(theory_preds, 10),
            wall_time=train_wall + time.perf_counter() - t0,
        )
        records.append(rec)
    return records
