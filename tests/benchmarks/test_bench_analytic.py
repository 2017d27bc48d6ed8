"""Benchmarks: analytic ReLU NTK + NNGP at N = 2048, depths 1-3 (issue 25), against neural-tangents.

* `one_pass`: `compbench.theory.relu_kernels(x)` (both kernels from one arc-cosine recursion,
  one triangle of the symmetric Gram, exact diagonal);
* `two_pass`: what compbench did before (`relu_nngp(x)` then `relu_ntk(x)`, each running the whole
  recursion; kept in tests/kernel_reference.py);
* `neural_tangents`: neural-tangents' compiled `kernel_fn(x, None, ("nngp", "ntk"))` for
  `stax.serial(*[Dense(√σ_w², √σ_b²), Relu()] * depth, Dense(√σ_w², √σ_b²))` in float64
  (`jax_enable_x64`), steady state (compiled and warmed up first), timed in its own process
  with the same inputs; its kernels are checked against compbench's (off the diagonal ≤ 1e-12 of
  the kernel's scale; its diagonal carries the arccos round-off compbench's no longer has) and the
  ratio compbench / neural-tangents (best of each) is stored in the `one_pass` benchmark's
  `extra_info` (`ratio_vs_neural_tangents`).

neural-tangents lives in an optional, isolated environment (its pins do not fit compbench's):

    python -m venv /work/nt-venv
    /work/nt-venv/bin/pip install "jax==0.4.30" "jaxlib==0.4.30" "tf2jax==0.3.6" "neural-tangents==0.6.5"

(neural-tangents 0.6.5 does not import with jax ≥ 0.5 nor with tf2jax 0.3.8.) Point
`COMPBENCH_NT_PYTHON` at that environment's python (default /work/nt-venv/bin/python); without it
the neural-tangents comparison is skipped. Run with
`pytest tests/benchmarks/test_bench_analytic.py --benchmark-only`; timings only mean something on
an otherwise idle machine. tests/benchmarks/interleaved_nt.py measures the same ratio (and the
ConvNet eNTK's) in interleaved rounds, with its min–max.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from compbench.theory import relu_kernels

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the reference implementation
from kernel_reference import old_relu_recursion  # noqa: E402

N, D = 2048, 64
SIGMA_W2, SIGMA_B2 = 2.0, 0.1
ROUNDS = 5

NT_SCRIPT = r"""
import json, sys, time
import numpy as np
import jax
jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp
from neural_tangents import stax
x_path, depth, sw2, sb2, rounds, out_dir = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
x = jnp.asarray(np.load(x_path))
layers = []
for _ in range(depth):
    layers += [stax.Dense(1, W_std=sw2 ** 0.5, b_std=sb2 ** 0.5), stax.Relu()]
_, _, kernel_fn = stax.serial(*layers, stax.Dense(1, W_std=sw2 ** 0.5, b_std=sb2 ** 0.5))
kernel_fn = jax.jit(kernel_fn, static_argnames="get")
k = kernel_fn(x, None, get=("nngp", "ntk"))
jax.block_until_ready(k)  # compile + warm-up
times = []
for _ in range(rounds):
    t = time.perf_counter()
    k = kernel_fn(x, None, get=("nngp", "ntk"))
    jax.block_until_ready(k)
    times.append(time.perf_counter() - t)
np.save(out_dir + "/nngp.npy", np.asarray(k.nngp))
np.save(out_dir + "/ntk.npy", np.asarray(k.ntk))
print(json.dumps({"times": times, "jax": jax.__version__}))
"""


def _inputs() -> np.ndarray:
    return np.random.default_rng(0).normal(size=(N, D))


def _nt_python() -> str | None:
    exe = os.environ.get("COMPBENCH_NT_PYTHON", "/work/nt-venv/bin/python")
    if not Path(exe).exists():
        return None
    ok = subprocess.run([exe, "-c", "import neural_tangents"], capture_output=True).returncode == 0
    return exe if ok else None


def _neural_tangents(x: np.ndarray, depth: int, tmp_path: Path) -> tuple[list[float], np.ndarray, np.ndarray]:
    exe = _nt_python()
    if exe is None:
        pytest.skip("neural-tangents is not installed (see this module's docstring to build its environment)")
    np.save(tmp_path / "x.npy", x)
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    done = subprocess.run(
        [exe, "-c", NT_SCRIPT, str(tmp_path / "x.npy"), str(depth), str(SIGMA_W2), str(SIGMA_B2), str(ROUNDS), str(tmp_path)],
        capture_output=True, text=True, env=env, timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    times = json.loads(done.stdout.strip().splitlines()[-1])["times"]
    return times, np.load(tmp_path / "nngp.npy"), np.load(tmp_path / "ntk.npy")


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_one_pass(benchmark, depth: int, tmp_path: Path) -> None:
    x = _inputs()
    benchmark.group = f"relu-ntk-nngp-N{N}-depth{depth}"
    nngp, ntk = benchmark.pedantic(relu_kernels, args=(x, None, depth, SIGMA_W2, SIGMA_B2), rounds=ROUNDS, iterations=1, warmup_rounds=1)
    assert nngp.shape == ntk.shape == (N, N)
    if _nt_python() is not None:
        times, nt_nngp, nt_ntk = _neural_tangents(x, depth, tmp_path)
        off = ~np.eye(N, dtype=bool)
        for ours, theirs in ((nngp, nt_nngp), (ntk, nt_ntk)):
            scale = np.abs(theirs).max()
            assert np.abs(ours - theirs)[off].max() <= 1e-12 * scale
            # neural-tangents' diagonal goes through arccos(1 − ulp), as compbench's did: ~1e-8 off
            assert np.abs(np.diag(ours) - np.diag(theirs)).max() <= 1e-6 * scale
        benchmark.extra_info["neural_tangents_min_s"] = min(times)
        benchmark.extra_info["ratio_vs_neural_tangents"] = benchmark.stats.stats.min / min(times)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_two_pass(benchmark, depth: int) -> None:
    x = _inputs()
    benchmark.group = f"relu-ntk-nngp-N{N}-depth{depth}"

    def two_pass() -> tuple[np.ndarray, np.ndarray]:  # relu_nngp then relu_ntk, as before
        return old_relu_recursion(x, None, depth, SIGMA_W2, SIGMA_B2)[0], old_relu_recursion(x, None, depth, SIGMA_W2, SIGMA_B2)[1]

    nngp, ntk = benchmark.pedantic(two_pass, rounds=2, iterations=1)
    assert nngp.shape == (N, N)
