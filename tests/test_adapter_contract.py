"""The adapter contract enforced: every way a plugin can break it is one error record, never a
crashed run; the other cells of the run are ok and cached; the conformance kit names each break."""

from __future__ import annotations

import dataclasses

import os
import sqlite3
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from compbench.adapters import Adapter, AdapterParams, Fitted, get_adapter, register_adapter
from compbench.cli import main
from compbench.runner.run import run_suite
from compbench.store import ResultStore
from compbench.suite import SuiteError, parse_suite
from compbench.testing import check_adapter, check_task_family

# 4 × 4 additive task: 16 cells, 7 trained (one-hot: one sample per cell).
N_EVAL, N_TRAIN = 16, 7
TASK = "  - {id: add, family: additive, params: {values: [[0, 1, 2, 3], [0, 2, 4, 6]], anchors: [[1], [1]]}}\n"


class NoParams(AdapterParams):
    pass


class Ridge(Adapter):
    """A well-behaved adapter: kernel ridge regression with the linear kernel (its own theory)."""

    Params = NoParams

    def kernel(self, a, b):
        return np.asarray(a.x, float).reshape(len(a), -1) @ np.asarray(b.x, float).reshape(len(b), -1).T

    def fitted(self, train, evaluate, seed: int) -> Fitted:
        K_tt, K_et = Ridge.kernel(self, train, train), Ridge.kernel(self, evaluate, train)
        alpha = np.linalg.solve(K_tt + 0.1 * np.eye(len(train)), train.y)
        return Fitted(K_et @ alpha, info={"seed_seen": seed}, kernels=(K_tt, K_et))

    def fit_seeds(self, train, evaluate, seeds):
        return [self.fitted(train, evaluate, s) for s in seeds]

    def theory_options(self):
        return {"objective": "ridge", "ridge": 0.1}


def breaking(name: str, mutate=None, **methods):
    """Register `name` as Ridge with each seed's Fitted passed through `mutate` (and methods replaced)."""
    body = dict(methods)
    if mutate is not None:
        def fit_seeds(self, train, evaluate, seeds):
            return [mutate(self.fitted(train, evaluate, s), s) for s in seeds]
        body["fit_seeds"] = fit_seeds
    cls = type(name.title().replace("-", ""), (Ridge,), body)
    globals()[cls.__qualname__] = cls  # importable as module:qualname, like any adapter class
    return register_adapter(name)(cls)


def _set(**fields):
    def mutate(fit, seed):
        for k, v in fields.items():
            setattr(fit, k, v(fit) if callable(v) else v)
        return fit
    return mutate


def _nan3(fit, seed):
    p = fit.predictions.copy()
    p[[0, 5, 9]] = np.nan
    fit.predictions = p
    return fit


def _nan_on_seed_1(fit, seed):
    return _nan3(fit, seed) if seed == 1 else fit


def _exit(self, train, evaluate, seeds):
    sys.exit(0)


def _raise(self):
    raise RuntimeError("no theory here")


def _sleep(self, train, evaluate, seeds):
    time.sleep(60)
    return Ridge.fit_seeds(self, train, evaluate, seeds)


def _die(self, train, evaluate, seeds):
    os._exit(1)


ContractGood = register_adapter("contract-good")(type("ContractGood", (Ridge,), {}))
BROKEN = {  # adapter name → (contract break named in the record, a fragment of its message)
    "broken-short": ("predictions-length", "predictions must have shape (16,), got shape (15,)"),
    "broken-nan": ("predictions-finite", "non-finite predictions for 3 of 16 samples"),
    "broken-str": ("predictions-dtype", "must be a real float array, got dtype <U"),
    "broken-2d": ("predictions-shape", "got shape (16, 1)"),
    "broken-scalar": ("predictions-shape", "got shape ()"),
    "broken-complex": ("predictions-dtype", "got dtype complex128"),
    "broken-object": ("predictions-dtype", "got dtype object"),
    "broken-fewer": ("fitted-count", "fit_seeds returned 1 Fitted for 2 seeds"),
    "broken-no-objective": ("theory-options", "theory_options() has no 'objective'"),
    "broken-unknown-option": ("theory-options", "unknown keys 'lambda'"),
    "broken-bad-objective": ("theory-options", "objective 'ols' is not one of"),
    "broken-bytes-info": ("info-serialisable", "info['blob'] is not JSON data"),
    "broken-object-info": ("info-serialisable", "info['model_obj'] is not JSON data"),
    "broken-nan-kernel": ("kernel-finite", "non-finite K_train,train for 1 of 49 entries"),
    "broken-kernel-shape": ("kernel-shape", "K_eval,train must have shape (16, 7), got shape (7, 16)"),
    "broken-shared-kernel": ("kernel-shape", "kernel(): K_train,train must have shape (7, 7)"),
    "broken-f0": ("f0-length", "initial_train (f0) must have shape (7,), got shape (6,)"),
    "broken-theory-length": ("theory-length", "theory_predictions must have shape (16,), got shape (3,)"),
}
breaking("broken-short", _set(predictions=lambda f: f.predictions[:-1]))
breaking("broken-nan", _nan3)
breaking("broken-str", _set(predictions=lambda f: f.predictions.astype(str)))
breaking("broken-2d", _set(predictions=lambda f: f.predictions[:, None]))
breaking("broken-scalar", _set(predictions=np.float64(1.0)))
breaking("broken-complex", _set(predictions=lambda f: f.predictions + 1j))
breaking("broken-object", _set(predictions=lambda f: f.predictions.astype(object)))
breaking("broken-fewer", fit_seeds=lambda self, tr, ev, seeds: [self.fitted(tr, ev, seeds[0])])
breaking("broken-no-objective", theory_options=lambda self: {"ridge": 0.1})
breaking("broken-unknown-option", theory_options=lambda self: {"objective": "ridge", "lambda": 0.1})
breaking("broken-bad-objective", theory_options=lambda self: {"objective": "ols"})
breaking("broken-bytes-info", _set(info={"steps": 3, "blob": b"\x00\x01"}))
breaking("broken-object-info", _set(info={"model_obj": object()}))
def _nan_kernel(fit, seed):
    K = fit.kernels[0].copy()
    K[0, 0] = np.nan
    fit.kernels = (K, fit.kernels[1])
    return fit


breaking("broken-nan-kernel", _nan_kernel)
breaking("broken-kernel-shape", _set(kernels=lambda f: (f.kernels[0], f.kernels[1].T)))
breaking("broken-shared-kernel", _set(kernels=None), kernel=lambda self, a, b: np.zeros((3, 3)))
breaking("broken-f0", _set(initial_train=lambda f: np.zeros(N_TRAIN - 1), initial_eval=lambda f: np.zeros(N_EVAL)))
breaking("broken-theory-length", _set(theory_predictions=np.zeros(3)))
breaking("broken-raising-theory", theory_options=_raise)
breaking("broken-exit", fit_seeds=_exit)
breaking("broken-seed1-nan", _nan_on_seed_1)
breaking("broken-identity-info", _set(info={"key": "stolen", "model": "impostor", "status": "ok", "seed": 99}))
breaking("broken-sleeps", fit_seeds=_sleep)
breaking("broken-dies", fit_seeds=_die)


def suite(*models: str, seeds: int = 2) -> str:
    lines = [f"name: contract\nseeds: {seeds}\ntasks:\n{TASK}models:\n"]
    lines += [f"  - {{id: {m}, adapter: {m}}}\n" for m in models]
    return "".join(lines)


def by_model(records) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in sorted(records, key=lambda r: r["seed"]):
        out.setdefault(r["model"], []).append(r)
    return out


def rows_per_key(out: Path) -> dict[str, int]:
    with sqlite3.connect(out / "store" / "records.sqlite") as db:
        return dict(db.execute("SELECT key, COUNT(*) FROM records GROUP BY key").fetchall())


@pytest.fixture(scope="module")
def broken_run(tmp_path_factory):
    """Every local contract break in one suite with two good models, run twice."""
    out = tmp_path_factory.mktemp("contract")
    models = ["contract-good", *BROKEN, "broken-raising-theory", "broken-exit", "broken-seed1-nan"]
    text = suite(*models) + "  - {id: kern, adapter: kernel, params: {kernel: relu_ntk}}\n"
    first = run_suite(parse_suite(text, "contract.yaml"), out, device="cpu", progress=False)
    second = run_suite(parse_suite(text, "contract.yaml"), out, device="cpu", progress=False)
    return out, first, second


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_each_contract_break_is_an_error_record_naming_the_adapter_and_the_break(broken_run, name):
    _, first, _ = broken_run
    recs = by_model(first.records)[name]
    assert [r["seed"] for r in recs] == [0, 1]
    code, fragment = BROKEN[name]
    for r in recs:
        assert r["status"] == "error", r
        assert code in r["contract_breaks"]
        assert r["error"].startswith(f"adapter {name!r} broke the adapter contract")
        assert fragment in r["error"], r["error"]


def test_exceptions_and_sys_exit_anywhere_are_recorded_and_the_run_goes_on(broken_run):
    _, first, _ = broken_run
    recs = by_model(first.records)
    assert [r["error"] for r in recs["broken-raising-theory"]] == ["theory_options: RuntimeError: no theory here"] * 2
    assert [r["error"] for r in recs["broken-exit"]] == ["adapter called sys.exit(0)"] * 2
    assert all(r["error_stage"] == "fit_seeds" for r in recs["broken-exit"])


def test_a_broken_seed_leaves_its_other_seeds_ok(broken_run):
    _, first, _ = broken_run
    ok, bad = by_model(first.records)["broken-seed1-nan"]
    assert ok["status"] == "ok" and ok["theory_max_abs_diff"] < 1e-9
    assert bad["status"] == "error" and "non-finite predictions for 3 of 16 samples" in bad["error"]


def test_good_cells_of_the_same_run_are_ok_and_cached(broken_run):
    out, first, second = broken_run
    recs = by_model(first.records)
    good = recs["contract-good"] + recs["kern"]
    assert [r["status"] for r in good] == ["ok"] * 3  # the kernel machine is deterministic: one seed
    assert recs["contract-good"][0]["theory_max_abs_diff"] < 1e-9  # its fit is its theory
    assert recs["contract-good"][1]["info"] == {"seed_seen": 1}
    assert first.n_failed == 2 * (len(BROKEN) + 2) + 1
    # The second run reuses every good cell (one stored row each: not recomputed).
    assert second.n_cached >= len(good) and second.n_failed == first.n_failed
    rows = rows_per_key(out)
    assert all(rows[r["key"]] == 1 for r in good)


def test_info_cannot_change_a_record_identity_and_the_cell_is_cached(tmp_path):
    text = suite("broken-identity-info", "contract-good")
    first = run_suite(parse_suite(text, "c.yaml"), tmp_path, device="cpu", progress=False)
    second = run_suite(parse_suite(text, "c.yaml"), tmp_path, device="cpu", progress=False)
    recs = by_model(first.records)["broken-identity-info"]
    assert [(r["model"], r["seed"], r["status"]) for r in recs] == [("broken-identity-info", 0, "ok"), ("broken-identity-info", 1, "ok")]
    assert all(r["key"] != "stolen" and r["info"] == {"key": "stolen", "model": "impostor", "status": "ok", "seed": 99} for r in recs)
    assert first.n_run == 4 and second.n_run == 0 and second.n_cached == 4
    assert set(ResultStore(tmp_path / "store").latest()) == {r["key"] for r in first.records}


def test_records_csv_shows_info_as_columns(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text(suite("contract-good"))
    assert main(["run", "--suite", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"), "--quiet", "--format", "csv"]) == 0
    import pandas as pd

    frame = pd.read_csv(tmp_path / "o" / "records.csv")
    assert list(frame["info.seed_seen"]) == [0, 1] and "seed_seen" not in frame.columns


def test_sys_exit_in_a_plugin_fails_the_run_with_exit_1_not_0(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text(suite("broken-exit", "contract-good"))
    assert main(["run", "--suite", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"), "--quiet", "--format", "md"]) == 1
    assert "2 failed" in capsys.readouterr().out


def test_mlp_with_logistic_loss_on_a_regression_task_is_an_error_record(tmp_path):
    text = suite("contract-good") + "  - {id: mlp-log, adapter: mlp, params: {width: 16, loss: logistic, max_steps: 20}}\n"
    with pytest.raises(SuiteError, match="loss: logistic trains a max-margin model that needs ±1 targets"):
        parse_suite(text, "c.yaml")  # validation rejects it first (test_discoverability.py) ...
    # ... and a run that gets it anyway (a suite built in code) isolates it as an error record.
    loaded = parse_suite(suite("contract-good") + "  - {id: mlp-log, adapter: mlp, params: {width: 16, max_steps: 20}}\n", "c.yaml")
    log = next(m for m in loaded.models if m.id == "mlp-log")
    loaded.models[loaded.models.index(log)] = dataclasses.replace(log, params=log.params.model_copy(update={"loss": "logistic"}))
    run = run_suite(loaded, tmp_path, device="cpu", progress=False)
    recs = by_model(run.records)
    assert [r["status"] for r in recs["contract-good"]] == ["ok", "ok"]
    assert [r["error"] for r in recs["mlp-log"]] == ["theory solve: ValueError: kernel_svm needs labels y_train in {-1, +1} (one column)"] * 2


@pytest.mark.slow
def test_cell_timeout_kills_a_hung_job_and_the_rest_of_the_run_goes_on(tmp_path):
    text = suite("broken-sleeps", "contract-good", "broken-dies")
    first = run_suite(parse_suite(text, "c.yaml"), tmp_path, device="cpu", progress=False, executor="process", workers=2, cell_timeout=2)
    recs = by_model(first.records)
    assert [r["error"] for r in recs["broken-sleeps"]] == ["exceeded --cell-timeout 2 s (the job was killed)"] * 2
    assert [r["error"] for r in recs["broken-dies"]] == ["worker process died: exit code 1"] * 2
    assert [r["status"] for r in recs["contract-good"]] == ["ok", "ok"]
    second = run_suite(parse_suite(suite("contract-good"), "c.yaml"), tmp_path, device="cpu", progress=False, executor="process", workers=2)
    assert second.n_cached == 2 and second.n_run == 0


def test_a_crashed_worker_is_one_error_record_and_every_other_job_runs(tmp_path):
    # More jobs than workers, the crash in the middle: the pool is rebuilt and nothing else is lost.
    text = suite("contract-good", "broken-dies", "broken-seed1-nan") + "  - {id: kern, adapter: kernel, params: {kernel: relu_ntk}}\n"
    run = run_suite(parse_suite(text, "c.yaml"), tmp_path, device="cpu", progress=False, executor="process", workers=1)
    recs = by_model(run.records)
    assert [r["error"] for r in recs["broken-dies"]] == ["worker process died: exit code 1"] * 2
    assert [r["status"] for r in recs["contract-good"] + recs["kern"]] == ["ok"] * 3
    assert [r["status"] for r in recs["broken-seed1-nan"]] == ["ok", "error"]
    assert len(ResultStore(tmp_path / "store").latest()) == 7


def test_process_results_equal_local_results_for_the_good_cells(tmp_path):
    text = suite("contract-good", "broken-nan")
    local = run_suite(parse_suite(text, "c.yaml"), tmp_path / "l", device="cpu", progress=False)
    pool = run_suite(parse_suite(text, "c.yaml"), tmp_path / "p", device="cpu", progress=False, executor="process", workers=2)
    strip = lambda recs: sorted((r["key"], r["status"], r.get("predictions"), r.get("error")) for r in recs)  # noqa: E731
    assert strip(local.records) == strip(pool.records)


def test_cell_timeout_with_the_local_executor_is_refused_at_startup(tmp_path, capsys):
    (tmp_path / "s.yaml").write_text(suite("contract-good"))
    code = main(["run", "--suite", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"), "--quiet", "--cell-timeout", "5",
                 "--executor", "local"])
    assert code == 2
    assert "--cell-timeout needs --executor process" in capsys.readouterr().err
    assert not (tmp_path / "o" / "store" / "records.sqlite").exists()
    with pytest.raises(SystemExit) as exc:  # a usage error of the flag itself, from argparse
        main(["run", "--suite", str(tmp_path / "s.yaml"), "--out", str(tmp_path / "o"), "--quiet", "--executor", "process", "--cell-timeout", "-1"])
    assert exc.value.code == 2 and "argument --cell-timeout: must be a finite number > 0" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# The conformance kit


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_conformance_kit_names_each_break(name):
    report = check_adapter(get_adapter(name), images=False)
    assert not report.ok
    assert BROKEN[name][0] in report.names, str(report)
    with pytest.raises(AssertionError, match=BROKEN[name][0]):
        report.raise_if_failed()


class Jittery(Ridge):
    """Predictions depend on a global counter, not on the seed."""

    calls = 0

    def fit_seeds(self, train, evaluate, seeds):
        Jittery.calls += 1
        out = super().fit_seeds(train, evaluate, seeds)
        for f in out:
            f.predictions = f.predictions + 1e-3 * Jittery.calls
        return out


class FalselyDeterministic(Ridge):
    deterministic = True

    def fit_seeds(self, train, evaluate, seeds):
        return [Fitted(self.fitted(train, evaluate, s).predictions + s) for s in seeds]


class NeedsParams(Ridge):
    class Params(AdapterParams):
        width: int


def test_conformance_kit_names_behaviour_breaks():
    assert "deterministic-seeds" in check_adapter(Jittery, images=False).names
    assert "deterministic-flag" in check_adapter(FalselyDeterministic, images=False).names
    assert check_adapter(NeedsParams, images=False).names == {"params-defaults"}
    with_params = check_adapter(NeedsParams, {"width": 3}, images=False)
    assert with_params.ok and any("no usable defaults" in n for n in with_params.notes)
    assert check_adapter(NeedsParams, {"width": "wide"}, images=False).names == {"params-invalid"}
    assert check_adapter(get_adapter("broken-exit"), images=False).names == {"sys-exit"}
    assert check_adapter(get_adapter("broken-raising-theory"), images=False).names == {"raises"}


def test_conformance_kit_passes_the_good_and_the_built_in_adapters():
    good = check_adapter(get_adapter("contract-good"))  # a linear kernel works on images too
    assert good.ok, str(good)
    for params in ({"kernel": "relu_ntk"}, {"kernel": "overlap", "weights": [0.0, 0.0, 1.0], "objective": "svm"}):
        report = check_adapter(get_adapter("kernel"), params, images=False)
        assert report.ok, str(report)
    mlp = check_adapter(get_adapter("mlp"), {"width": 16, "max_steps": 50}, images=False)
    assert mlp.ok, str(mlp)


def test_task_family_kit():
    assert check_task_family("additive").ok and check_task_family("transitive_equivalence").ok
    from compbench.tasks import TaskData

    def no_training():
        return TaskData("x", np.array([[0], [1]]), np.array([1.0, 2.0]), np.array([False, False]), (2,), "regression")

    def ragged():
        return TaskData("x", np.array([[0], [1]]), np.array([1.0]), np.array([True, False]), (2,), "regression")

    state = {"n": 0}

    def drifting():
        state["n"] += 1
        return TaskData("x", np.array([[0], [1]]), np.array([1.0, float(state["n"])]), np.array([True, False]), (2,), "regression", allow_unseen_values=True)

    assert check_task_family(no_training).names == {"split"}
    assert check_task_family(ragged).names == {"taskdata-fields"}
    assert check_task_family(drifting).names == {"deterministic"}
    assert check_task_family(lambda: 1 / 0).names == {"build-raises"}
    assert check_task_family(lambda: "not a task").names == {"taskdata-type"}
