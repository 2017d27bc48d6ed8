"""Workers for a CUDA run start by spawn (a GPU run on a lent H100 failed every cell under fork).

A forked child cannot use CUDA once its parent has initialised it ("Cannot re-initialize CUDA in forked
subprocess"), and the parent may have: its provenance, memory check or report touch the device. So a CUDA
pool spawns its workers and sends them the tasks pickled; on the CPU the platform's default stays.
"""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

import compbench
from compbench.runner import executors


def test_a_cuda_pool_spawns_and_a_cpu_pool_keeps_the_default():
    assert executors.worker_context("cuda").get_start_method() == "spawn"
    assert executors.worker_context("cuda:1").get_start_method() == "spawn"
    assert executors.worker_context("cpu").get_start_method() == multiprocessing.get_start_method()


@pytest.mark.slow
def test_spawned_workers_give_the_records_of_forked_ones(monkeypatch, tmp_path):
    def run(where):
        res = compbench.evaluate("kernel-limits", models=["mlp-lazy", "kernel-relu"], tasks=["add-extrap", "cd-1"],
                                 out=tmp_path / where, executor="process", workers=2, seeds=2)
        assert not res.errors
        return {(r.model, r.task, r.seed): np.asarray(r.predictions) for r in res.records}

    forked = run("fork")
    monkeypatch.setattr(executors, "worker_context", lambda device: multiprocessing.get_context("spawn"))
    spawned = run("spawn")
    assert sorted(spawned) == sorted(forked) and len(forked) == 6
    for key, pred in forked.items():
        np.testing.assert_array_equal(spawned[key], pred)
