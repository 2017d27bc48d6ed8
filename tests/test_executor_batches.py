"""The process pool sends quick jobs ahead in batches (issue #17) and still loses nothing.

A worker that dies, or a job past --cell-timeout, while jobs are queued behind it: that job is
one error record, the queued ones run on a fresh worker, and every result equals the local
executor's.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from compbench.adapters import Adapter, AdapterParams, Fitted, register_adapter
from compbench.runner import executors
from compbench.runner.run import run_suite
from compbench.suite import parse_suite


class BatchParams(AdapterParams):
    ridge: float = 0.1
    die: bool = False
    sleep: float = 0.0


@register_adapter("batch-ridge")
class BatchRidge(Adapter):
    """Kernel ridge regression with the linear kernel; `die` ends its process, `sleep` stalls it."""

    Params = BatchParams
    deterministic = True

    def fit_seeds(self, train, evaluate, seeds):
        if self.params.die:
            os._exit(1)
        time.sleep(self.params.sleep)
        x_tr = np.asarray(train.x, float).reshape(len(train), -1)
        x_ev = np.asarray(evaluate.x, float).reshape(len(evaluate), -1)
        alpha = np.linalg.solve(x_tr @ x_tr.T + self.params.ridge * np.eye(len(train)), train.y)
        return [Fitted(x_ev @ x_tr.T @ alpha) for _ in seeds]

    def theory_options(self):
        return {"objective": "ridge", "ridge": self.params.ridge}


def suite(middle: str) -> str:
    return f"""\
name: batches
tasks:
  - {{id: add, family: additive, params: {{values: [[0, 1, 2, 3], [0, 2, 4, 6]], anchors: [[1], [1]]}}}}
models:
  - {{id: before, adapter: batch-ridge, sweep: {{ridge: {{linspace: [0.1, 1.0, 40]}}}}}}
  - {{id: middle, adapter: batch-ridge, params: {middle}}}
  - {{id: after, adapter: batch-ridge, sweep: {{ridge: {{linspace: [2.0, 3.0, 20]}}}}}}
"""


@pytest.fixture
def batches(monkeypatch):
    """Every batch handed to a worker, as lists of job indices (this process is the pool's parent)."""
    sent: list[list[int]] = []
    give = executors._Worker.give

    def recording(self, batch):
        sent.append([i for i, _ in batch])
        give(self, batch)

    monkeypatch.setattr(executors._Worker, "give", recording)
    return sent


def by_model(records):
    out = {}
    for r in records:
        out.setdefault(r["model"].split("[")[0], []).append(r)
    return out


@pytest.mark.parametrize("middle, timeout, error", [
    ("{die: true}", None, "worker process died: exit code 1"),
    ("{sleep: 60}", 3.0, "exceeded --cell-timeout 3 s (the job was killed)"),
])
@pytest.mark.slow
def test_a_failing_job_with_jobs_queued_behind_it_loses_none_of_them(tmp_path, batches, monkeypatch, middle, timeout, error):
    # Batches as large as allowed whatever the machine's speed ([0], [1..33], then 17 or more from 34):
    # job 40 is always sent with jobs behind it (at the default 50 ms of work, a loaded machine could
    # end a batch at 40 and leave nothing to check).
    monkeypatch.setattr(executors, "AHEAD_SECONDS", 30.0)
    text = suite(middle)
    pool = run_suite(parse_suite(text, "b.yaml"), tmp_path / "p", device="cpu", progress=False, executor="process",
                     workers=1, cell_timeout=timeout)
    recs = by_model(pool.records)
    assert [r.get("error") for r in recs["middle"]] == [error]
    assert [r["status"] for r in recs["before"] + recs["after"]] == ["ok"] * 60
    # The failing job (index 40) was sent with jobs queued behind it; each of those was sent again, to
    # the fresh worker, and ran there.
    behind = [i for b in batches if 40 in b for i in b[b.index(40) + 1:]]
    sent = [i for b in batches for i in b]
    assert behind and all(sent.count(i) == 2 for i in behind), batches
    assert sorted(set(sent)) == list(range(61)) and max(len(b) for b in batches) > 2
    local = run_suite(parse_suite(suite("{ridge: 0.5}"), "b.yaml"), tmp_path / "l", device="cpu", progress=False)
    same = lambda rs: sorted((r["key"], r["predictions"]) for r in rs)  # noqa: E731
    assert same(recs["before"] + recs["after"]) == same(by_model(local.records)["before"] + by_model(local.records)["after"])
    assert len(pool.records) == 61 and pool.n_failed == 1


def test_long_jobs_are_handed_out_one_at_a_time(tmp_path, batches):
    text = """\
name: slow
tasks:
  - {id: add, family: additive, params: {values: [[0, 1, 2, 3], [0, 2, 4, 6]], anchors: [[1], [1]]}}
models:
  - {id: slow, adapter: batch-ridge, params: {sleep: 0.2}, sweep: {ridge: {linspace: [0.1, 1.0, 5]}}}
"""
    run = run_suite(parse_suite(text, "s.yaml"), tmp_path, device="cpu", progress=False, executor="process", workers=1)
    assert run.n_failed == 0 and len(run.records) == 5
    # Jobs of 0.2 s are worth no batch: each is sent when the one before it has reported.
    assert batches == [[0], [1], [2], [3], [4]]
