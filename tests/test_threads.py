"""The thread policy (issue #25 item 1, #27 item 5): one torch thread per process that trains unless the
user asks, set in every entry point and recorded in every record, never part of the cache key."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from compbench.records import CellRecord
from compbench.runner import executors, threads
from compbench.runner.threads import MAX_THREADS, ThreadPlan, choose_threads
from compbench.store import ResultStore

ROOT = Path(__file__).resolve().parents[1]
PROBE_DIR = Path(__file__).parent / "fixtures" / "thread_probe"

SUITE = """\
name: thread-probe-demo
tasks:
  - {id: add, family: additive, params: {values: [[0, 1, 2, 3], [0, 2, 4, 6]], anchors: [[1], [1]]}}
models:
  - {id: probe, adapter: thread-probe, sweep: {ridge: {linspace: [0.1, 1.0, 4]}}}
"""


# ------------------------------------------------------------------------------- the policy


@pytest.mark.parametrize("cores, executor, workers, requested, intra, interop, source, warns", [
    # compbench's default: one thread per process, whatever the cores and however many workers
    (2, "local", 1, None, 1, 1, "policy", False),
    (64, "local", 1, None, 1, 1, "policy", False),
    (2, "process", 2, None, 1, 1, "policy", False),
    (16, "process", 8, None, 1, 1, "policy", False),
    (1, "process", 2, None, 1, 1, "policy", False),  # two workers on one core: still one thread each
    (4, "ray", 1, None, 1, 1, "policy", False),
    # --threads 0: torch's own default, nothing set
    (2, "local", 1, 0, None, None, "torch default", False),
    (2, "process", 2, 0, None, None, "torch default", False),
    # --threads N: honoured as asked; a warning when the processes' threads together exceed the cores
    (2, "local", 1, 1, 1, 1, "user", False),
    (2, "local", 1, 2, 2, 1, "user", False),
    (2, "local", 1, 3, 3, 1, "user", True),
    (4, "process", 2, 2, 2, 1, "user", False),
    (4, "process", 3, 2, 2, 1, "user", True),
    (2, "process", 2, 1, 1, 1, "user", False),
    (1, "local", 1, 2, 2, 1, "user", True),
    (2, "ray", 1, 4, 4, 1, "user", True),
])
def test_the_policy_chooses_by_cores_executor_workers_and_request(cores, executor, workers, requested, intra, interop,
                                                                  source, warns):
    plan = choose_threads(cores, executor, workers, requested)
    assert (plan.intra, plan.interop, plan.source) == (intra, interop, source)
    assert (plan.warning is not None) == warns
    if warns:
        assert f"--threads {requested}" in plan.warning and f"{cores} usable core" in plan.warning


def test_the_warning_names_the_pool_and_is_said_once(monkeypatch, capsys):
    plan = choose_threads(4, "process", 3, 2)
    assert "3 worker processes x 2 threads = 6 threads on 4 usable cores" in plan.warning
    monkeypatch.setattr(threads, "usable_cores", lambda: 1)
    monkeypatch.setattr(threads, "_said", set())
    for _ in range(3):
        assert threads.plan_for_run("local", 1, 2).intra == 2  # honoured, not lowered
    err = capsys.readouterr().err
    assert err.count("compbench: --threads 2: 2 threads on 1 usable core;") == 1, err
    threads.plan_for_run("local", 1, None)
    threads.plan_for_run("local", 1, 1)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("bad", [-1, MAX_THREADS + 1, 10**20])
def test_a_request_out_of_range_is_refused(bad):
    with pytest.raises(ValueError, match="--threads must be from 0"):
        choose_threads(2, "local", 1, bad)


def test_the_cgroup_quota_is_read_for_v2_and_v1(tmp_path):
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("150000 100000\n")
    assert threads.cgroup_cpu_limit(v2) == 1.5
    (v2 / "cpu.max").write_text("max 100000\n")
    assert threads.cgroup_cpu_limit(v2) is None
    v1 = tmp_path / "v1"
    (v1 / "cpu,cpuacct").mkdir(parents=True)
    (v1 / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("300000\n")
    (v1 / "cpu,cpuacct" / "cpu.cfs_period_us").write_text("100000\n")
    assert threads.cgroup_cpu_limit(v1) == 3.0
    (v1 / "cpu,cpuacct" / "cpu.cfs_quota_us").write_text("-1\n")
    assert threads.cgroup_cpu_limit(v1) is None
    assert threads.cgroup_cpu_limit(tmp_path / "none") is None


def test_usable_cores_is_the_affinity_lowered_to_the_quota(monkeypatch):
    affinity = len(os.sched_getaffinity(0))
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: None)
    assert threads.usable_cores() == affinity
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: 0.5)
    assert threads.usable_cores() == 1
    monkeypatch.setattr(threads, "cgroup_cpu_limit", lambda: affinity + 8.0)
    assert threads.usable_cores() == affinity
    assert executors.usable_cores() == affinity  # the pool's cap counts the same cores


# ------------------------------------------------------------------------------- run_suite and the pool


@pytest.fixture(scope="module")
def probe():
    sys.path.insert(0, str(PROBE_DIR))
    try:
        import thread_probe

        from compbench.adapters import ADAPTERS, register_adapter

        if "thread-probe" not in ADAPTERS:
            register_adapter("thread-probe")(thread_probe.ThreadProbe)
        yield thread_probe
    finally:
        sys.path.remove(str(PROBE_DIR))


@pytest.fixture
def two_threads_here():
    """This process at two torch threads (as torch's default is on 2 cores); restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


def _run(tmp_path, **kw):
    from compbench.runner.run import run_suite
    from compbench.suite import parse_suite

    return run_suite(parse_suite(SUITE, "t.yaml"), tmp_path, device="cpu", progress=False, **kw)


def test_run_suite_trains_on_one_thread_and_gives_the_callers_count_back(tmp_path, probe, two_threads_here):
    import torch

    summary = _run(tmp_path / "a")
    assert summary.n_run == 4 and summary.threads == 1
    assert {(r.threads, r.info["torch_threads"], r.info["pid"]) for r in summary.records} == {(1, 1, os.getpid())}
    assert torch.get_num_threads() == 2  # the caller's setting, restored
    # threads= asks for another count; the same keys (the thread count is not in the cache key)
    again = _run(tmp_path / "b", threads=2)
    assert {(r.threads, r.info["torch_threads"]) for r in again.records} == {(2, 2)}
    assert sorted(r.key for r in again.records) == sorted(r.key for r in summary.records)
    cached = _run(tmp_path / "a", threads=2)
    assert cached.n_run == 0 and cached.n_cached == 4
    # 0: torch's default, which compbench leaves alone (here: what the caller set)
    default = _run(tmp_path / "c", threads=0, force=True)
    assert default.threads is None and {r.info["torch_threads"] for r in default.records} == {2}
    assert torch.get_num_threads() == 2


@pytest.mark.parametrize("requested, expected", [(None, 1), (2, 2)])
def test_pool_workers_get_the_runs_count(tmp_path, probe, two_threads_here, requested, expected):
    summary = _run(tmp_path, executor="process", workers=2, threads=requested)
    assert summary.n_run == 4 and summary.n_failed == 0
    assert {r.threads for r in summary.records} == {expected}
    assert {r.info["torch_threads"] for r in summary.records} == {expected}
    assert {r.info["omp_num_threads"] for r in summary.records} == {str(expected)}
    assert os.getpid() not in {r.info["pid"] for r in summary.records}


def test_a_ray_worker_applies_the_plan_of_every_call(monkeypatch):
    applied: list[ThreadPlan] = []
    monkeypatch.setattr(executors, "apply_in_worker", applied.append)
    monkeypatch.setattr(executors, "keep_freed_memory", lambda: None)
    monkeypatch.setattr(executors, "_run_in_worker", lambda *args: ["records"])
    monkeypatch.setattr(executors, "_WORKER_TASKS", {})
    first, second = ThreadPlan(1, 1, "policy"), ThreadPlan(3, 1, "user")
    assert executors._run_in_ray({"t": object()}, first, "t", None, (0,), ("k",), "c", "cpu") == ["records"]
    assert executors._run_in_ray({"t": object()}, second, "t", None, (0,), ("k",), "c", "cpu") == ["records"]
    assert applied == [first, second]


def test_a_worker_sets_the_environment_and_torch(monkeypatch):
    import torch

    calls = []
    monkeypatch.setattr(torch, "set_num_threads", calls.append)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 8)
    monkeypatch.setattr(torch, "set_num_interop_threads", lambda n: calls.append(("interop", n)))
    blas = []
    monkeypatch.setattr(threads, "_limit_blas", blas.append)  # the real one would leave this process's BLAS at 3
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)
    threads.apply_in_worker(ThreadPlan(3, 1, "user"))
    assert calls[0] == 3 and blas == [3]
    assert os.environ["OMP_NUM_THREADS"] == os.environ["MKL_NUM_THREADS"] == "3"
    calls.clear()
    threads.apply_in_worker(ThreadPlan(None, None, "torch default"))
    assert calls == []


def test_old_records_read_their_count_from_the_determinism_settings():
    old = {"record_schema": 2, "key": "k", "task": "t", "model": "m", "seed": 0, "status": "ok",
           "determinism": {"threads": 2, "torch_version": "2.4"}}
    assert CellRecord.from_dict(old).threads == 2
    assert CellRecord.from_dict({**old, "determinism": {}}).threads is None
    rec = CellRecord.from_dict({**old, "threads": 1})
    assert rec.threads == 1 and CellRecord.from_dict(rec.to_dict()).threads == 1
    assert rec.flat()["threads"] == 1


# ------------------------------------------------------------------------------- the command line and pytest


@pytest.fixture(scope="module")
def probe_env(tmp_path_factory) -> dict[str, str]:
    """An environment whose Python finds the probe through a `compbench.adapters` entry point."""
    site = tmp_path_factory.mktemp("probe-site")
    dist = site / "thread_probe-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: thread-probe\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[compbench.adapters]\nthread-probe = thread_probe:ThreadProbe\n")
    path = [str(PROBE_DIR), str(site), str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in path if p)}


def _stored(out: Path) -> list[CellRecord]:
    store = ResultStore(out / "store")
    try:
        return list(store.latest().values())
    finally:
        store.close()


@pytest.mark.slow
def test_compbench_run_with_threads_1_records_it_and_runs_its_cells_on_it(tmp_path, probe_env):
    suite = tmp_path / "probe.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "out"

    def run(*extra: str) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "compbench.cli", "run", "--suite", str(suite), "--results", str(out),
                               "--quiet", "--format", "md", *extra], capture_output=True, text=True, env=probe_env,
                              cwd=tmp_path, timeout=300, check=False)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return proc

    run("--threads", "1")
    records = _stored(out)
    assert len(records) == 4
    assert {(r.threads, r.info["torch_threads"]) for r in records} == {(1, 1)}
    assert "0 cells run, 4 reused" in run("--threads", "2").stdout  # not in the cache key
    run("--threads", "2", "--force")
    assert {(r.threads, r.info["torch_threads"]) for r in _stored(out)} == {(2, 2)}


@pytest.mark.slow
def test_the_pytest_plugin_takes_compbench_threads(tmp_path, probe_env):
    suite = tmp_path / "probe.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "pytest", str(suite), "-p", "no:cacheprovider", "-q",
                           "--compbench-results", str(out), "--compbench-threads", "2"],
                          capture_output=True, text=True, cwd=tmp_path, env=probe_env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {(r.threads, r.info["torch_threads"]) for r in _stored(out)} == {(2, 2)}


def test_the_policy_limits_the_blas_pools_too_and_restores_them():
    """Kernel cells run in numpy/scipy: their BLAS pools follow the plan as torch does, and come back after."""
    from threadpoolctl import threadpool_info

    from compbench.runner.threads import ThreadPlan, apply_in_this_process, restore

    def blas() -> set[int]:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    before = blas()
    previous = apply_in_this_process(ThreadPlan(1, 1, "policy"))
    try:
        assert blas() == {1}
    finally:
        restore(previous)
    assert blas() == before


def test_nested_runs_restore_only_what_they_set():
    """A run inside a run (the pytest plugin around `evaluate`, a notebook calling run_suite twice): an inner
    run that set nothing, or the same limit, leaves the outer run's BLAS limit in place; one that set another
    limit gives it back; the outer run's restore brings back the process's own."""
    from threadpoolctl import threadpool_info

    from compbench.runner.threads import ThreadPlan, apply_in_this_process, restore

    def blas() -> set[int]:
        return {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"}

    before = blas()
    outer = apply_in_this_process(ThreadPlan(1, 1, "policy"))
    try:
        assert blas() == {1} and outer.blas is not None
        restore(None)  # an inner run that trained nothing here (every cell cached)
        assert blas() == {1}
        same = apply_in_this_process(ThreadPlan(1, 1, "policy"))
        assert same.blas is None
        restore(same)
        assert blas() == {1}
        other = apply_in_this_process(ThreadPlan(2, 1, "user"))
        assert blas() == {2}
        restore(other)
        assert blas() == {1}
    finally:
        restore(outer)
    assert blas() == before
