"""Execute one job: train the model's seeds, compute its theory prediction, score each seed.

Nothing an adapter does can take the run down: every exception (and `sys.exit`) anywhere in a
cell's pipeline, and every break of the adapter contract (`compbench.adapters.base.check_fitted`),
becomes an error record for the cells it touches; only KeyboardInterrupt goes through.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import replace
from typing import Any

import numpy as np

from compbench import __version__
from compbench.adapters import InvalidModelError, get_adapter
from compbench.adapters.base import ContractBreak, Fitted, check_fitted, check_kernels, plain_info, theory_options_of
from compbench.records import CellError, CellRecord, Status
from compbench.runner.cells import Job
from compbench.runner.device import determinism_settings
from compbench.runner.threads import current_threads
from compbench.theory.options import TheoryOptions, TheoryOptionsError
from compbench.scoring import score as scoring


def _job_identity(job: Job, device: str) -> dict[str, Any]:
    """The fields every record of this job carries, whatever became of its cells (each adds its seed and key)."""
    t, m = job.task, job.model
    data = t.data
    return {
        "task": t.entry.id,
        "family": t.entry.family,
        "encoding": t.entry.encoding_name,
        "model": m.id,
        "group": m.group,
        "adapter": m.adapter,
        "sweep": m.sweep_values,
        "params": m.params.model_dump(mode="json"),
        "device": device,
        "kind": data.kind,
        "n_outputs": data.n_outputs,
        "n_classes": data.n_classes or None,
        "n_train": int(data.train_mask.sum()),
        "n_test": data.n_test,
        "determinism": determinism_settings(),
        "threads": current_threads(),
        "version": __version__,
        "code": job.code,
    }


def failed_records(job: Job, device: str, error: str | CellError, *, status: str = "error", wall_time: float = 0.0,
                   error_stage: str | None = None) -> list[CellRecord]:
    """One error (or skipped) record per seed of the job, carrying `error` (a message, or the whole CellError)."""
    err = error if isinstance(error, CellError) else CellError(error, error_stage)
    ident = _job_identity(job, device)
    return [CellRecord(**ident, seed=s, key=k, status=Status(status), error=err, wall_time=wall_time)
            for s, k in zip(job.seeds, job.keys)]


def describe(exc: BaseException) -> str:
    """An exception as a record's error message; `sys.exit(N)` from plugin code says so."""
    if isinstance(exc, SystemExit):
        return f"adapter called sys.exit({exc.code!r})" if exc.code is not None else "adapter called sys.exit()"
    return f"{type(exc).__name__}: {exc}"


def _exception_error(stage: str, exc: BaseException) -> CellError:
    # The adapter's own training reports its exception as is; elsewhere the message says where.
    message = describe(exc) if stage == "fit_seeds" else f"{stage}: {describe(exc)}"
    return CellError(message, stage, (), traceback.format_exc(limit=6))


def _contract_error(adapter: str, problems: list[ContractBreak], seed: int | None = None) -> CellError:
    where = f" (seed {seed})" if seed is not None else ""
    message = f"adapter {adapter!r} broke the adapter contract{where}: " + "; ".join(p.message for p in problems)
    return CellError(message, "contract", tuple(sorted({p.name for p in problems})))


def run_job(job: Job, device: str) -> list[CellRecord]:
    """Records for every seed of the job; failures become error (or skipped) records."""
    start = time.perf_counter()
    name = job.model.adapter
    stage = "encode"
    try:
        enc = job.encoded
        n_train, n_eval = len(enc.train), len(enc.evaluate)
        stage = "adapter construction"
        adapter = get_adapter(name)(job.model.params, device=device)
        stage = "fit_seeds"
        fitted = adapter.fit_seeds(enc.train, enc.evaluate, list(job.seeds))
        if not isinstance(fitted, (list, tuple)) or len(fitted) != len(job.seeds):
            got = f"{len(fitted)} Fitted" if isinstance(fitted, (list, tuple)) else f"a {type(fitted).__name__}"
            problem = ContractBreak("fitted-count", f"fit_seeds returned {got} for {len(job.seeds)} seeds (one per seed expected)")
            return failed_records(job, device, _contract_error(name, [problem]), wall_time=time.perf_counter() - start)
        stage = "theory_options"
        try:
            options, problems = theory_options_of(adapter, name), []
        except TheoryOptionsError as exc:  # recorded as a contract break, with the record's other breaks
            options, problems = TheoryOptions(), [ContractBreak("theory-options", p) for p in exc.problems]
        stage = "theory_kernel_name"
        kernel_name = adapter.theory_kernel_name()
        if not isinstance(kernel_name, str):
            problems.append(ContractBreak("theory-kernel-name", f"theory_kernel_name() must return a str, got {type(kernel_name).__name__}"))
        if problems:
            return failed_records(job, device, _contract_error(name, problems), wall_time=time.perf_counter() - start)
        stage = "kernel"
        shared, shared_problems = None, []
        if any(not isinstance(f, Fitted) or f.kernels is None for f in fitted):
            K_tt = adapter.kernel(enc.train, enc.train)
            if K_tt is not None:
                shared = (K_tt, adapter.kernel(enc.evaluate, enc.train))
                shared_problems = [ContractBreak(p.name, f"kernel(): {p.message}") for p in check_kernels(shared, n_train, n_eval, enc.evaluate.n_outputs if enc.evaluate.vector_output else None)]
        stage = "seed variance"
        shared_factor = _SharedFactor(shared)  # the seeds' Gram, factored at most once for the theory and its spread
        theory_variance, theory_sd = (_seed_variance(adapter, job, shared, options, shared_factor)
                                      if shared is not None and not shared_problems else (None, {}))
    except InvalidModelError as exc:
        return failed_records(job, device, str(exc), status="skipped" if job.model.skip_invalid else "error",
                              wall_time=time.perf_counter() - start)
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 — any failure of a cell (even sys.exit) is recorded, the run goes on
        return failed_records(job, device, _exception_error(stage, exc), wall_time=time.perf_counter() - start)
    train_wall = (time.perf_counter() - start) / len(job.seeds)
    records = []
    ident = _job_identity(job, device)  # once per job: a batch of millisecond jobs pays for every dict
    for seed, key, fit in zip(job.seeds, job.keys, fitted):
        t0 = time.perf_counter()
        base = {**ident, "seed": seed, "key": key}
        problems = check_fitted(fit, n_train, n_eval, enc.evaluate.n_outputs if enc.evaluate.vector_output else None)
        if isinstance(fit, Fitted) and fit.kernels is None and shared is not None:
            problems += shared_problems
        if isinstance(fit, Fitted) and not any(p.name == "info-serialisable" for p in problems):
            # The adapter's extras live under "info": nothing it returns can change the record's identity.
            base["info"] = plain_info(fit.info)
        if problems:
            rec = CellRecord(**base, status=Status.ERROR, error=_contract_error(name, problems, seed), wall_time=train_wall)
        elif fit.error:
            rec = CellRecord(**base, status=Status.ERROR, error=CellError(str(fit.error), "fit_seeds"), wall_time=train_wall)
        else:
            where = ["theory solve"]  # _score moves it on, so a failure says which step raised
            try:
                scored = _score(job, fit, shared, options, kernel_name, enc, where, shared_factor, adapter)
                rec = CellRecord(**base, **scored, theory_variance=theory_variance, theory_sd=theory_sd, status=Status.OK,
                                 wall_time=train_wall + time.perf_counter() - t0)
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # noqa: BLE001 — a theory solve or scoring failure is this seed's error
                rec = CellRecord(**base, status=Status.ERROR, error=_exception_error(where[0], exc),
                                 wall_time=train_wall + time.perf_counter() - t0)
        records.append(rec)
    return records


def _seed_variance(adapter: Any, job: Job, shared: Any, options: TheoryOptions,
                   shared_factor: _SharedFactor) -> tuple[list[float | None] | None, dict[str, float]]:
    """What the NTK-GP (compbench.theory.seed_variance) predicts of the spread over seeds: each held-out cell's
    variance (None elsewhere), and the standard deviation of the held-out score where it has a closed form
    (heldout_r2 of a scalar regression task).

    Only for a min-norm theory on the adapter's own shared kernel with an `init_kernel` (the NNGP of a random f₀):
    (None, {}) otherwise, and beyond SEED_VARIANCE_SAMPLES evaluation samples (its covariance is n × n).
    """
    from compbench.adapters.base import kernel_outputs
    from compbench.limits import SEED_VARIANCE_SAMPLES
    from compbench.theory.regression import kernel_regression
    from compbench.theory.seed_variance import cell_mean_covariance, ntk_gp_covariance, r2_sd

    enc, data = job.encoded, job.task.data
    if not options.min_norm or len(enc.evaluate) > SEED_VARIANCE_SAMPLES:
        return None, {}
    if kernel_outputs(shared, len(enc.train)) != 1:  # a full (n·K)² kernel: no output-shared NNGP to pair it with
        return None, {}
    nngp_train = adapter.init_kernel(enc.train, enc.train)
    if nngp_train is None:
        return None, {}
    factor = shared_factor.get(shared)
    cov = ntk_gp_covariance(shared[0], shared[1], nngp_train, adapter.init_kernel(enc.evaluate, enc.train),
                            adapter.init_kernel(enc.evaluate, enc.evaluate), factor=factor)
    cells = cell_mean_covariance(cov, enc.evaluate.cell_ids, len(data.cells))
    var = np.diag(cells)
    test = np.asarray(data.test_mask, dtype=bool)
    variance = [float(v) if held and np.isfinite(v) else None for v, held in zip(var, test)]
    sd: dict[str, float] = {}
    if data.kind == "regression" and not enc.train.vector_output and data.samples is None:
        # the seeds' mean prediction is the centred theory's, Θ(x,X)Θ⁺y; R² as scoring computes it on the cells
        mean = np.bincount(enc.evaluate.cell_ids, weights=kernel_regression(shared[0], shared[1], enc.train.y, factor=factor),
                           minlength=len(data.cells)) / np.bincount(enc.evaluate.cell_ids, minlength=len(data.cells))
        y = np.asarray(data.y, dtype=np.float64)[test]
        ss_tot = float(np.sum((y - y.mean()) ** 2))
        if ss_tot > 0 and np.all(np.isfinite(cells[np.ix_(test, test)])):
            sd["heldout_r2"] = r2_sd(cells[np.ix_(test, test)], y - mean[test], ss_tot)
    return variance, sd


class _SharedFactor:
    """The seeds' shared training Gram, factored once on first use (each seed's f₀ is its own right-hand side)."""

    def __init__(self, shared: Any) -> None:
        self.shared = shared
        self._factor: Any = None
        self._tried = False

    def get(self, kernels: Any) -> Any:
        """The factor of `kernels[0]` when it is the shared Gram (symmetric, finite), else None."""
        if kernels is not self.shared or self.shared is None:
            return None
        if not self._tried:
            from compbench.theory.regression import factor_of

            self._tried = True
            self._factor = factor_of(self.shared[0])
        return self._factor


def _theory_samples(fit: Fitted, kernels: Any, options: TheoryOptions, enc: Any, factor: Any = None) -> np.ndarray:
    """The kernel-theory prediction on every evaluation sample, shaped like the predictions."""
    from compbench.adapters.base import kernel_outputs

    train = enc.train
    if not train.vector_output:
        return options.predict(kernels[0], kernels[1], train.y, f0_train=fit.initial_train, f0_eval=fit.initial_eval,
                               factor=factor)
    if not options.regression:
        raise ValueError(f"objective {options.objective!r} needs one ±1 (svm) or real (svr) target; this task has {train.n_outputs} outputs")
    # Multi-class: the MSE-on-one-hot network's prediction (argmax scored as the class).
    y = train.target_matrix()
    f0_tr = None if fit.initial_train is None else np.asarray(fit.initial_train, dtype=np.float64)
    f0_ev = None if fit.initial_eval is None else np.asarray(fit.initial_eval, dtype=np.float64)
    k = kernel_outputs(kernels, len(train))
    if k == 1:  # one kernel shared by the outputs (analytic NTK ⊗ I, or the output-averaged eNTK)
        return options.predict(kernels[0], kernels[1], y, f0_train=f0_tr, f0_eval=f0_ev, factor=factor)
    flat = options.predict(kernels[0], kernels[1], y.reshape(-1), f0_train=None if f0_tr is None else f0_tr.reshape(-1),
                           f0_eval=None if f0_ev is None else f0_ev.reshape(-1), factor=factor)
    return flat.reshape(-1, k)


def _representation(job: Job, fit: Fitted, kernels: Any, enc: Any, adapter: Any) -> tuple[np.ndarray | None, list[float | None] | None]:
    """On a task whose outputs are named factors: the linear probe's prediction per cell from the seed's penultimate
    features, and each held-out cell's mean over its samples of the nearest-training similarity under the seed's
    theory kernel (compbench.theory.probe, .similarity); (None, None) elsewhere, None for what the model lacks."""
    from compbench.theory.similarity import kernel_diagonal, nearest_similarity, output_trace

    data = job.task.data
    if not scoring._has_factors(data):
        return None, None
    n, ids = len(data.cells), np.asarray(enc.evaluate.cell_ids)
    probe = None
    if fit.features is not None:
        from compbench.theory.probe import linear_probe

        samples = np.asarray(linear_probe(fit.features[0], enc.train.regression_targets(), fit.features[1]))
        samples = samples.reshape(len(ids), -1)
        probe = np.stack([scoring.per_cell(samples[:, j], ids, n) for j in range(samples.shape[1])], axis=1)
    if kernels is None:
        return probe, None
    n_tr, n_ev = len(enc.train), len(enc.evaluate)
    diag = fit.kernel_diagonal
    if diag is None:  # the model's own kernel on each evaluation sample, where it has one (a kernel machine)
        rows = lambda a, b: replace(enc.evaluate, x=enc.evaluate.x[a:b], cells=enc.evaluate.cells[a:b],  # noqa: E731
                                    cell_ids=enc.evaluate.cell_ids[a:b],
                                    y=None if enc.evaluate.y is None else enc.evaluate.y[a:b],
                                    mask=None if enc.evaluate.mask is None else enc.evaluate.mask[a:b])
        if adapter.kernel(rows(0, 1), rows(0, 1)) is None:
            return probe, None
        diag = kernel_diagonal(lambda a, b: adapter.kernel(rows(a, b), rows(a, b)), n_ev)
    sims = nearest_similarity(output_trace(kernels[1], n_ev, n_tr), np.diagonal(output_trace(kernels[0], n_tr, n_tr)), diag)
    cell = scoring.per_cell(sims, ids, n)
    test = np.asarray(data.test_mask, dtype=bool)
    return probe, [float(v) if held and np.isfinite(v) else None for v, held in zip(cell, test)]


def _score(job: Job, fit: Fitted, shared: Any, options: TheoryOptions, kernel_name: str, enc: Any, where: list[str],
           shared_factor: _SharedFactor | None = None, adapter: Any = None) -> dict[str, Any]:
    """One valid seed's theory prediction, then its scores (scoring.score, from the rounded outputs it stores)."""
    kernels = fit.kernels or shared
    sample_theory = None
    if fit.theory_predictions is not None:
        sample_theory = np.asarray(fit.theory_predictions, dtype=np.float64)
    elif kernels is not None:
        factor = shared_factor.get(kernels) if shared_factor is not None and options.min_norm else None
        sample_theory = _theory_samples(fit, kernels, options, enc, factor)
    where[0] = "representation"
    probe, nearest = _representation(job, fit, kernels, enc, adapter) if adapter is not None else (None, None)
    out = scoring.score_outputs(job.task, fit.predictions, sample_theory, enc.evaluate.cell_ids, where, probe=probe,
                                nearest=nearest)
    return {**out, "theory_kernel": kernel_name, "theory_objective": options.objective, "scoring": scoring.scoring_version()}
