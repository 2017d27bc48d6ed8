"""Benchmark: lazy-network theory prediction for a small ConvNet at N = 4096 training samples.

Dense: `empirical_ntk` (N × N and N_eval × N Grams, float64) + `kernel_regression` (lstsq).
Matrix-free: `ntk_cg_regression` (CG on K·v products; float32 passes, default tolerance 1e-3).

Each method runs in a fresh subprocess so that its peak resident memory (`ru_maxrss`, which torch's
allocations count in, unlike tracemalloc) can be read; the subprocess reports its own wall time,
the rise of the peak RSS over the baseline after setup, and the agreement with the dense solve is
checked separately on the smaller N of the test suite (tests/test_theory_ntk_matvec.py).
Run with `pytest tests/benchmarks/test_bench_ntk_matvec.py --benchmark-only -s`.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time

import numpy as np
import pytest

N_TRAIN, N_EVAL = 4096, 512


def convnet():  # noqa: ANN201
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(2, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.BatchNorm2d(16),
        torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.BatchNorm2d(16),
        torch.nn.Flatten(), torch.nn.Linear(16 * 8 * 16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1), torch.nn.Flatten(0),
    ).eval()


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def worker(method: str, n: int, n_eval: int) -> dict:
    """Run one method once; wall time, peak RSS and the RSS it added over the setup's."""
    import torch

    from compbench.theory import empirical_ntk, kernel_regression, ntk_cg_regression

    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", "2")))
    net = convnet()
    g = torch.Generator().manual_seed(1)
    x, z = torch.rand(n, 2, 8, 16, generator=g), torch.rand(n_eval, 2, 8, 16, generator=g)
    y = np.sign(np.random.default_rng(0).standard_normal(n))
    with torch.no_grad():
        f0_tr, f0_ev = net(x).double().numpy(), net(z).double().numpy()
    base = _peak_mb()
    t0 = time.perf_counter()
    out: dict = {}
    if method == "dense":
        K, Kc = empirical_ntk(net, x).numpy(), empirical_ntk(net, z, x).numpy()
        t1 = time.perf_counter()
        pred = kernel_regression(K, Kc, y, f0_train=f0_tr, f0_cross=f0_ev)
        out["gram_seconds"], out["solve_seconds"] = t1 - t0, time.perf_counter() - t1
    else:
        pred, info = ntk_cg_regression(net, x, y, z, f0_train=f0_tr, f0_eval=f0_ev)
        out.update(info.summary(), cg_relative_residual=info.relative_residual[0], cg_message=info.message)
    out.update(seconds=time.perf_counter() - t0, peak_rss_mb=_peak_mb(), added_rss_mb=_peak_mb() - base, pred=pred.tolist())
    return out


def run_worker(method: str) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, method, str(N_TRAIN), str(N_EVAL)], capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def results() -> dict:
    return {}


@pytest.mark.parametrize("method", ["dense", "cg"])
def test_ntk_theory_prediction(benchmark, results, method):
    benchmark.group = f"ntk-theory-convnet-N{N_TRAIN}"
    out = benchmark.pedantic(run_worker, args=(method,), rounds=1, iterations=1)
    results[method] = out
    gram_bytes = (N_TRAIN * N_TRAIN + N_EVAL * N_TRAIN) * 8
    benchmark.extra_info.update({k: v for k, v in out.items() if k != "pred"})
    benchmark.extra_info["dense_gram_mb_theoretical"] = gram_bytes / 2**20
    print(f"\n{method}: {json.dumps({k: (float(f'{v:.4g}') if isinstance(v, float) else v) for k, v in out.items() if k != 'pred'})}")
    if len(results) == 2:
        dense, cg = np.array(results["dense"]["pred"]), np.array(results["cg"]["pred"])
        agreement = float(np.linalg.norm(cg - dense) / np.linalg.norm(dense))
        benchmark.extra_info["cg_vs_dense_relative_error"] = agreement
        print(f"cg vs dense predictions: relative error {agreement:.3g}; dense Grams alone {gram_bytes / 2**20:.0f} MiB")
        assert agreement < 1e-2


if __name__ == "__main__":
    print(json.dumps(worker(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))))
