"""compbench's thread policy reaches library calls (#34 item 4): one thread inside the call, the caller's after it."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from compbench import thread_scope  # noqa: E402
from compbench.theory import empirical_ntk, kernel_regression  # noqa: E402


@pytest.fixture(autouse=True)
def no_run_in_force(monkeypatch):
    """As in a user's own process: no run's plan in force (other tests in this process may leave one, e.g. a worker's)."""
    monkeypatch.setattr(thread_scope, "_RUNS", [0])


def _threads_seen_inside(monkeypatch, env: str | None) -> tuple[int, int]:
    """torch's thread count inside an empirical_ntk call (seen by the module's forward) and after it."""
    if env is None:
        monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    else:
        monkeypatch.setenv("OMP_NUM_THREADS", env)
    seen = []

    class Probe(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 1)

        def forward(self, x):
            seen.append(torch.get_num_threads())
            return self.lin(x)

    empirical_ntk(Probe(), torch.ones(4, 3), structured=False)
    return max(seen), torch.get_num_threads()


def test_a_library_call_runs_one_thread_and_restores_the_callers_count(monkeypatch):
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        inside, after = _threads_seen_inside(monkeypatch, None)
        assert (inside, after) == (1, 3)
        inside, after = _threads_seen_inside(monkeypatch, "2")  # the user's OMP_NUM_THREADS is honoured
        assert (inside, after) == (2, 3)
    finally:
        torch.set_num_threads(before)


def test_inside_a_run_the_runs_plan_governs(monkeypatch):
    before = torch.get_num_threads()
    torch.set_num_threads(3)  # as `--threads 3` would
    thread_scope.run_started()
    try:
        assert _threads_seen_inside(monkeypatch, None) == (3, 3)
    finally:
        thread_scope.run_ended()
        torch.set_num_threads(before)


def test_the_blas_pools_are_limited_inside_and_restored_after(monkeypatch):
    from threadpoolctl import threadpool_info

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    blas = [i for i in threadpool_info() if i["user_api"] == "blas"]
    if not blas or all(i["num_threads"] == 1 for i in blas):
        pytest.skip("no BLAS pool with more than one thread here")
    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    seen = []

    @thread_scope.one_thread
    def probe():
        seen.extend(i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas")

    probe()
    assert set(seen) == {1}
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before


def test_the_answer_is_the_same_with_the_policy():
    rng = np.random.default_rng(0)
    a = rng.normal(size=(20, 5))
    K = a @ a.T + np.eye(20)
    y = rng.normal(size=20)
    got = kernel_regression(K, K[:3], y)
    np.testing.assert_allclose(got, K[:3] @ np.linalg.solve(K, y), rtol=1e-8)
