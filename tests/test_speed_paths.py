"""The fast paths of a cached run give exactly what the plain ones give (issue #17).

Cache keys assembled from per-model and per-task JSON equal key_for's; the device decided without
importing torch equals torch's answer; expectations judged with memoised pattern matching equal
a record-by-record reference; a one-seed mean equals np.mean's.
"""

from __future__ import annotations

import fnmatch
import subprocess
import sys
import textwrap

import numpy as np

from compbench.records import CellRecord, Status, as_records
import pytest

from compbench.claims import get_claim
from compbench.claims.base import Subject, mean_of
from compbench.claims.builtin import Ordered, OrderedParams
from compbench.runner.cells import expand_jobs, key_for, prepare_tasks
from compbench.runner.device import cuda_impossible, resolve_device, torch_build
from compbench.outcome.expectations import evaluate_expectations
from compbench.suite import Expectation, load_suite, matches_model, parse_suite

SWEEP_SUITE = textwrap.dedent("""\
    name: keys
    seeds: [3, 0, 11]
    tasks:
      - {id: add, family: additive, params: {anchors: [[4], [4]]}}
      - {id: te, family: transitive_equivalence, params: {classes: [2, 2], train_items: [1, 1]}}
      - {id: cd-1, family: context_dependence, params: {preset: CD-1}}
    models:
      - id: overlap
        adapter: kernel
        description: "ünïcode and \\"quotes\\" in the suite"
        params: {kernel: overlap, weights: [0.0, 0.0, 0.0, 1.0], relative: {1: 0.0}}
        sweep:
          weights.2: {linspace: [0.0, 0.5, 3]}
          relative.1: [0.0, 0.25]
        tasks: [cd-*]
      - id: relu
        adapter: kernel
        params: {kernel: relu_ntk, depth: 2}
      - id: net
        adapter: mlp
        params: {width: 8, lr: 0.05, max_steps: 3}
        sweep: {init_scale: {geomspace: [1.0e-3, 1.0, 3]}}
        tasks: [add, te]
    """)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_expanded_keys_equal_key_for(device):
    loaded = parse_suite(SWEEP_SUITE, "keys.yaml")
    jobs = expand_jobs(loaded, prepare_tasks(loaded), device)
    assert len(jobs) == 6 * 1 + 3 + 3 * 2  # 6 overlap members on cd-1, relu on 3 tasks, 3 nets on 2 tasks
    for job in jobs:
        assert job.keys == tuple(key_for(job.task.entry, job.model, s, device) for s in job.seeds)
    keys = [k for job in jobs for k in job.keys]
    assert len(set(keys)) == len(keys)  # seeds, members, tasks and devices all enter the key
    other = "cuda" if device == "cpu" else "cpu"
    assert not set(keys) & {k for job in expand_jobs(loaded, prepare_tasks(loaded), other) for k in job.keys}


def test_expanded_keys_of_the_bundled_suite_equal_key_for():
    loaded = load_suite("kernel-limits")
    jobs = expand_jobs(loaded, prepare_tasks(loaded), "cpu")
    for job in jobs[:: max(1, len(jobs) // 300)] + jobs[-5:]:
        assert job.keys == tuple(key_for(job.task.entry, job.model, s, "cpu") for s in job.seeds)


def test_torch_build_flags_are_read_without_importing_torch():
    code = ("import sys; from compbench.runner.device import torch_build, resolve_device, cuda_impossible; "
            "b = torch_build(); d = resolve_device('auto'); print(b['cuda'], b['hip'], d, cuda_impossible(), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout.split()
    import torch

    assert out[:2] == [str(torch.version.cuda), str(getattr(torch.version, "hip", None))]
    assert out[2] == ("cuda" if torch.cuda.is_available() else "cpu")  # the same answer as torch's
    if out[3] == "True":
        assert out[4] == "False"  # decided without importing torch
        assert not torch.cuda.is_available()


def test_auto_device_is_torchs_answer_once_torch_is_imported():
    import torch

    assert torch_build() == {"cuda": torch.version.cuda, "hip": getattr(torch.version, "hip", None)}
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    if cuda_impossible():
        assert not torch.cuda.is_available()


def _records() -> list[dict]:
    """Records of a sweep (members m[i]) and plain models on three tasks, with per-seed metrics."""
    rng = np.random.default_rng(0)
    out = []
    for task in ("cd-1", "cd-2", "te"):
        for member in range(12):
            for seed in range(2):
                out.append({"model": f"sw[w={member}]", "group": "sw", "task": task, "seed": seed, "status": "ok",
                            "heldout_acc": float(rng.integers(0, 2)) if member % 3 else 1.0,
                            "additivity": float(rng.random())})
        for model in ("lazy", "rich", "kernel-a"):
            for seed in range(3):
                out.append({"model": model, "group": model, "task": task, "seed": seed,
                            "status": "skipped" if model == "kernel-a" and seed == 2 else "ok",
                            "heldout_acc": float(rng.random()), "additivity": float(rng.random())})
    return as_records(out)  # typed records, as the store returns them


def _reference_ordered(params, exp, records, selects):
    """Ordered.judge_all as it was before the one-pass grouping (record-by-record filtering)."""
    claim, out = Ordered(), []
    tol = claim.tolerance(params)
    if params.over == "tasks":
        for subject in sorted({r["group"] for r in records if any(selects(r, p) for p in exp.models)}):
            recs = [r for r in records if r["group"] == subject]
            groups = [[r for r in recs if fnmatch.fnmatchcase(r["task"], p)] for p in exp.tasks]
            out.append(claim._verdict(params, exp.id, subject, " > ".join(exp.tasks), groups, tol))
    else:
        for task in sorted({r["task"] for r in records if any(fnmatch.fnmatchcase(r["task"], p) for p in exp.tasks)}):
            recs = [r for r in records if r["task"] == task]
            groups = [[r for r in recs if selects(r, p)] for p in exp.models]
            out.append(claim._verdict(params, exp.id, " > ".join(exp.models), task, groups, tol))
    return out


class _Exp:
    def __init__(self, id, models, tasks):  # noqa: A002
        self.id, self.models, self.tasks = id, models, tasks


@pytest.mark.parametrize("over, models, tasks, statistic", [
    ("tasks", ["sw"], ["cd-1", "cd-2"], "count_perfect"),
    ("tasks", ["sw[[]w=1*", "lazy"], ["cd-*", "te"], "mean"),  # a pattern selecting members: the whole group counts
    ("models", ["lazy", "sw"], ["*"], "mean"),
    ("models", ["rich", "kernel-*", "sw[[]w=0]"], ["cd-?"], "count_perfect"),
])
def test_ordered_one_pass_equals_record_by_record(over, models, tasks, statistic):
    records = [r for r in _records() if r["status"] != "skipped"]
    params = OrderedParams(metric="heldout_acc", over=over, statistic=statistic)
    exp = _Exp("e", models, tasks)

    def selects(r, p):
        return matches_model(r["model"], r["group"], set(), [p])

    got = Ordered().judge_all(params, exp, records, selects)
    want = _reference_ordered(params, exp, records, selects)
    assert repr(got) == repr(want) and len(got) >= 1  # repr: a NaN measurement equals itself
    assert any(v.detail != "no finished cells" for v in got)


def test_per_cell_expectations_equal_record_by_record():
    records = _records()
    exps = [
        Expectation(id="perfect", claim="above", models=["sw[[]w=0]", "sw[[]w=3]", "lazy"], tasks=["*"],
                    metric="heldout_acc", bound=0.5),
        Expectation(id="add", claim="additive", models=["sw", "kernel-*"], tasks=["te", "cd-1"], tolerance=0.9),
    ]
    got = evaluate_expectations(exps, records)
    want = []
    ok = [r for r in records if r["status"] != "skipped"]
    for exp in exps:
        claim, params = get_claim(exp.claim), exp.claim_params()
        groups: dict = {}
        for r in ok:
            if any(matches_model(r["model"], r["group"], set(), [p]) for p in exp.models) and \
                    any(fnmatch.fnmatchcase(r["task"], p) for p in exp.tasks):
                groups.setdefault((r["group"], r["task"]), []).append(r)
        want += [claim.judge(params, exp.id, Subject(s, t, recs)) for (s, t), recs in sorted(groups.items())]
    assert repr(got) == repr(want)
    assert {v.subject for v in got} == {"sw", "lazy", "kernel-a"}


@pytest.mark.parametrize("values", [[0.1], [1e-17], [0.3, 0.1], [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9]])
def test_mean_of_equals_numpy(values):
    def rec(**metrics):
        return CellRecord(key="k", task="t", model="m", seed=0, status=Status.OK, metrics=metrics)

    records = [rec(m=v) for v in values] + [rec(m=float("nan")), rec()]
    assert mean_of(records, "m") == float(np.mean(values))
    assert np.isnan(mean_of([rec()], "m"))


def test_tasks_for_follows_the_suite_tasks():
    loaded = parse_suite(SWEEP_SUITE, "keys.yaml")
    net = next(m for m in loaded.models if m.group == "net")
    first = loaded.tasks_for(net)
    assert [t.id for t in first] == ["add", "te"]
    first.append("not a task")  # the caller's copy: the next answer is unchanged
    assert [t.id for t in loaded.tasks_for(net)] == ["add", "te"]
    loaded.suite.tasks = loaded.suite.tasks[1:]
    assert [t.id for t in loaded.tasks_for(net)] == ["te"]


def test_sweep_params_copy_is_deep_and_equal():
    import copy
    import datetime

    from compbench.suite.expand import _copy

    data = {"a": [1, {"b": [2.5, None, True, "x"]}], "when": datetime.date(2020, 1, 1), "tags": {1, 2}, "blob": b"\x00"}
    out = _copy(data)
    assert out == copy.deepcopy(data)
    assert out["a"] is not data["a"] and out["a"][1] is not data["a"][1] and out["tags"] is not data["tags"]
    out["a"][1]["b"].append(3)
    assert data["a"][1]["b"] == [2.5, None, True, "x"]


@pytest.mark.slow
def test_a_cached_run_imports_neither_pandas_nor_scipy_nor_torch(tmp_path):
    # Each costs a cached run 0.2 s or more of imports; only computing or writing needs them.
    from tiny_suites import TINY

    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY.replace("  - id: lazy\n    adapter: mlp\n    params: {width: 256, init_scale: 1.0, lr: 0.02, max_steps: 3000, loss_tol: 1.0e-3}\n", ""))
    args = ["run", "--suite", str(suite), "--out", str(tmp_path / "out"), "--quiet", "--device", "cpu"]
    code = ("import sys; from compbench.cli import main; code = main(sys.argv[1:]); "
            "print(code, *(m in sys.modules for m in ('pandas', 'scipy', 'sklearn', 'torch', 'matplotlib')))")
    first = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, check=True)
    assert first.stdout.split()[-6:][0] == "0" and "True" in first.stdout.split()[-5:]  # the first run computes and writes
    again = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, check=True)
    assert "0 cells run, 2 reused from the cache" in again.stdout
    assert again.stdout.split()[-6:] == ["0", "False", "False", "False", "False", "False"]
