"""Execute one job: train the model's seeds, compute its theory prediction, score each seed.

Nothing an adapter does can take the run down: every exception (and `sys.exit`) anywhere in a
cell's pipeline, and every break of the adapter contract (`compbench.adapters.base.check_fitted`),
becomes an error record for the cells it touches; only KeyboardInterrupt goes through.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

import numpy as np

from compbench.adapters import InvalidModelError, get_adapter
from compbench.adapters.base import ContractBreak, Fitted, check_fitted, check_kernels, check_theory_options, plain_info
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
    sums = np.bincount(cell_ids, weights=np.asarray(values, dtype=np.float64), minlength=n_cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        return sums / counts


def failed_records(job: Job, device: str, error: str, *, status: str = "error", wall_time: float = 0.0, **extra: Any) -> list[dict[str, Any]]:
    """One error (or skipped) record per seed of the job, carrying `error` as its message."""
    return [
        {**_base_record(job, s, k, device), "status": status, "error": error, "wall_time": wall_time, **extra}
        for s, k in zip(job.seeds, job.keys)
    ]


def describe(exc: BaseException) -> str:
    """An exception as a record's error message; `sys.exit(N)` from plugin code says so."""
    if isinstance(exc, SystemExit):
        return f"adapter called sys.exit({exc.code!r})" if exc.code is not None else "adapter called sys.exit()"
    return f"{type(exc).__name__}: {exc}"


def _exception_fields(stage: str, exc: BaseException) -> dict[str, Any]:
    # The adapter's own training reports its exception as is; elsewhere the message says where.
    message = describe(exc) if stage == "fit_seeds" else f"{stage}: {describe(exc)}"
    return {"error": message, "error_stage": stage, "traceback": traceback.format_exc(limit=6)}


def _contract_fields(adapter: str, problems: list[ContractBreak], seed: int | None = None) -> dict[str, Any]:
    where = f" (seed {seed})" if seed is not None else ""
    message = f"adapter {adapter!r} broke the adapter contract{where}: " + "; ".join(p.message for p in problems)
    return {"error": message, "error_stage": "contract", "contract_breaks": sorted({p.name for p in problems})}


def run_job(job: Job, device: str) -> list[dict[str, Any]]:
    """Records for every seed of the job; failures become error (or skipped) records."""
    start = time.perf_counter()
    name = job.model.adapter
    stage = "encode"
    try:
        enc = job.task.encoded
        n_train, n_eval = len(enc.train), len(enc.evaluate)
        stage = "adapter construction"
        adapter = get_adapter(name)(job.model.params, device=device)
        stage = "fit_seeds"
        fitted = adapter.fit_seeds(enc.train, enc.evaluate, list(job.seeds))
        if not isinstance(fitted, (list, tuple)) or len(fitted) != len(job.seeds):
            got = f"{len(fitted)} Fitted" if isinstance(fitted, (list, tuple)) else f"a {type(fitted).__name__}"
            problem = ContractBreak("fitted-count", f"fit_seeds returned {got} for {len(job.seeds)} seeds (one per seed expected)")
            return failed_records(job, device, wall_time=time.perf_counter() - start, **_contract_fields(name, [problem]))
        stage = "theory_options"
        options = adapter.theory_options()
        problems = check_theory_options(options)
        stage = "theory_kernel_name"
        kernel_name = adapter.theory_kernel_name()
        if not isinstance(kernel_name, str):
            problems.append(ContractBreak("theory-kernel-name", f"theory_kernel_name() must return a str, got {type(kernel_name).__name__}"))
        if problems:
            return failed_records(job, device, wall_time=time.perf_counter() - start, **_contract_fields(name, problems))
        stage = "kernel"
        shared, shared_problems = None, []
        if any(not isinstance(f, Fitted) or f.kernels is None for f in fitted):
            K_tt = adapter.kernel(enc.train, enc.train)
            if K_tt is not None:
                shared = (K_tt, adapter.kernel(enc.evaluate, enc.train))
                shared_problems = [ContractBreak(p.name, f"kernel(): {p.message}") for p in check_kernels(shared, n_train, n_eval)]
    except InvalidModelError as exc:
        return failed_records(job, device, str(exc), status="skipped" if job.model.skip_invalid else "error",
                              wall_time=time.perf_counter() - start)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 — any failure of a cell (even sys.exit) is recorded, the run goes on
        return failed_records(job, device, wall_time=time.perf_counter() - start, **_exception_fields(stage, exc))
    train_wall = (time.perf_counter() - start) / len(job.seeds)
    records = []
    for seed, key, fit in zip(job.seeds, job.keys, fitted):
        t0 = time.perf_counter()
        rec = _base_record(job, seed, key, device)
        problems = check_fitted(fit, n_train, n_eval)
        if isinstance(fit, Fitted) and fit.kernels is None and shared is not None:
            problems += shared_problems
        if isinstance(fit, Fitted) and not any(p.name == "info-serialisable" for p in problems):
            # The adapter's extras live under "info": nothing it returns can change the record's identity.
            rec["info"] = plain_info(fit.info)
        if problems:
            rec.update(status="error", wall_time=train_wall, **_contract_fields(name, problems, seed))
        elif fit.error:
            rec.update(status="error", error=fit.error, error_stage="fit_seeds", wall_time=train_wall)
        else:
            where = ["theory solve"]  # _score moves it on, so a failure says which step raised
            try:
                rec.update(_score(job, fit, shared, options, kernel_name, enc, where))
                rec["wall_time"] = train_wall + time.perf_counter() - t0
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 — a theory solve or scoring failure is this seed's error
                rec.update(status="error", wall_time=train_wall + time.perf_counter() - t0, **_exception_fields(where[0], exc))
        records.append(rec)
    return records


def _score(job: Job, fit: Fitted, shared: Any, options: dict[str, Any], kernel_name: str, enc: Any, where: list[str]) -> dict[str, Any]:
    """One valid seed's metrics: theory prediction, additivity, scores."""
    data = job.task.data
    n, ids = len(data.cells), enc.evaluate.cell_ids
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
    where[0] = "additivity"
    additivity = float(job.task.additivity.score(preds))
    where[0] = "scoring"
    metrics = cell_metrics(data.kind, data.y, data.train_mask, preds, theory_preds, additivity)
    return {
        **metrics,
        "status": "ok",
        "theory_kernel": kernel_name,
        "theory_objective": options["objective"],
        "predictions": np.round(preds, 10).tolist(),
        "theory_predictions": None if theory_preds is None else np.round(theory_preds, 10).tolist(),
    }

