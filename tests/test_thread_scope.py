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


def test_the_callers_count_is_restored_when_the_call_raises(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    seen = []

    class Boom(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 1)

        def forward(self, x):
            seen.append(torch.get_num_threads())
            if len(seen) > 1:  # the kernel's own pass, after the output-width probe
                raise RuntimeError("boom")
            return self.lin(x)

    try:
        with pytest.raises(RuntimeError, match="boom"):
            empirical_ntk(Boom(), torch.ones(4, 3), structured=False)
        assert set(seen) == {1} and torch.get_num_threads() == 3
        assert (thread_scope._blas.calls, thread_scope._blas.limiter) == (0, None)  # nothing left inside: the next call sets the policy again
    finally:
        torch.set_num_threads(before)


def test_after_evaluate_a_library_call_still_gets_the_policy(tmp_path, monkeypatch):
    """evaluate() trains several jobs in this process; afterwards the caller's count is back and theory calls are scoped again."""
    import compbench
    from tiny_suites import kernel_suite

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    suite = tmp_path / "k.yaml"
    suite.write_text(kernel_suite("k", "leak"))
    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        results = compbench.evaluate(suite, out=tmp_path / "out", executor="local", workers=1)
        assert len(results.to_pandas()) >= 2 and not results.errors  # several jobs trained here
        assert torch.get_num_threads() == 3
        # Before the fix each job after the first marked the run again and only one mark was undone: library
        # calls in this process stayed at the caller's 3 threads for good.
        assert _threads_seen_inside(monkeypatch, None) == (1, 3)
    finally:
        torch.set_num_threads(before)


def test_the_ntk_matvec_closure_runs_at_the_policy(monkeypatch):
    """ntk_matvec returns a function; its products run when it is called, under the policy too."""
    from compbench.theory import ntk_matvec

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    seen = []

    class Probe(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 1, dtype=torch.float64)

        def forward(self, x):
            seen.append(torch.get_num_threads())
            return self.lin(x).squeeze(-1)

    before = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        x = torch.randn(5, 3, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
        module = Probe()
        mv = ntk_matvec(module, x)
        seen.clear()
        v = torch.ones(5, dtype=torch.float64)
        got = mv(v)
        assert seen and set(seen) == {1} and torch.get_num_threads() == 3
        K = empirical_ntk(module, x)
        torch.testing.assert_close(got, K @ v, rtol=1e-10, atol=1e-12)
    finally:
        torch.set_num_threads(before)
