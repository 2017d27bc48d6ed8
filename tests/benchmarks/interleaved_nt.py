"""compbench against neural-tangents in interleaved rounds: speed ratios with their min–max (issue #25).

    python tests/benchmarks/interleaved_nt.py --json nt.json            # the measurement (idle machine)
    python tests/benchmarks/interleaved_nt.py --quick                   # N = 256, 2 rounds: does it work
    python tests/benchmarks/interleaved_nt.py --check --threads one     # full size: the agreement only
    python tests/benchmarks/interleaved_nt.py --only convnet --threads one --rounds 9
    python tests/benchmarks/interleaved_nt.py --only convnet --busy 4 --rounds 5   # beside 4 busy processes

Two comparisons, each on the same inputs (and weights) on both sides, the answers checked to agree
before anything is timed:

* **analytic**: the ReLU NTK and NNGP of an NTK-parameterised MLP with 1, 2, 3 hidden layers on
  N = 2048 Gaussian inputs of dimension 64 (σ_w² = 2, σ_b² = 0.1; float64), compbench's
  `compbench.theory.relu_kernels(x, None, depth, σ_w², σ_b²)` against neural-tangents' jitted
  `kernel_fn(x, None, ("nngp", "ntk"))` of `stax.serial(*[Dense, Relu] * depth, Dense)` (the
  pytest-benchmark tests/benchmarks/test_bench_analytic.py compares the same, best of each). They
  agree off the diagonal to ≤ 1e-12 of the kernel's scale; on the diagonal to ≤ 1e-6
  (neural-tangents' goes through arccos(1 − ulp); compbench's is the closed form).
* **convnet**: the empirical NTK Gram at N = 1024 of the network of kernel-limits-images' `convnet`
  model (the `convnet` adapter at width 0.25: 4 × [Conv 5×5 'same' → ReLU → BatchNorm] with 8, 8,
  16, 16 filters, MaxPool 2, dense 128 → 256 → 1; 110,489 parameters), seed 0's initialisation
  (the adapter's own `_init`, as a cell's seed 0 gets it), on that suite's inputs: two 8×8
  scikit-learn digits side by side (1 × 8 × 16, normalised as compbench's `digits` source does).
  compbench: `compbench.theory.empirical_ntk(net, x)` as the adapter calls it (float32 network,
  float64 Gram). neural-tangents: `nt.empirical_ntk_fn(f, trace_axes=(), vmap_axes=0,
  implementation=nt.NtkImplementation.JACOBIAN_CONTRACTION)` (implementation 1), jitted, where `f`
  is the same network written in JAX (`lax.conv_general_dilated`, `lax.reduce_window`; BatchNorm
  in eval mode as the NTK takes it: an affine map by the running statistics, its scale and shift
  trainable) with the weights exported from torch. `--dtype float32` (default) is compbench's
  dtype: float32 network on both sides, float32 Jacobians, Gram summed in float64 by compbench and
  in float32 by neural-tangents; agreement ≤ 1e-5 relative (max |ΔK| / max |K|). `--dtype float64`
  runs both networks in float64 (`jax_enable_x64`); agreement ≤ 1e-10. It is an agreement check for
  small N (`--n-convnet 32`), not a timing: XLA's CPU backend hands only float32 convolutions to
  Eigen and emits naive loops for float64 ones, so neural-tangents' float64 eNTK takes 9 s at
  N = 32, 37 s at N = 64 and did not finish in 5 minutes at N = 256.

**Rounds.** Each side runs in its own long-lived worker process (this file with `--worker`): it
builds, compiles and warms up each case once, then times one call per request from this process
over a pipe (wall time around a call that blocks until the result is ready; the CPU time and the
number of threads that did the work are reported beside it). Round r times compbench once and then
neural-tangents once, the order reversed every other round, for every case and thread mode in turn,
so that a drift of the machine's speed falls on both sides alike. Reported per case and mode: the
min–max of each side's seconds and the min–max of the per-round ratios compbench / neural-tangents.

**Threads.** `--threads one`: compbench's thread policy (`choose_threads`: torch.set_num_threads(1)
and the BLAS pools limited to 1 by threadpoolctl, OMP/MKL/OPENBLAS_NUM_THREADS=1) and, for JAX,
`XLA_FLAGS="--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"`. Those flags alone
do not make jax 0.4.30's CPU backend single-threaded (a jitted 1500² matmul still kept two threads
busy with them), while a process whose CPU affinity is one core sizes XLA's pool to it; so in this
mode both workers are pinned to the same single core (`--core`, default the highest this process
may use) before they import torch or jax. `--threads default`: every library's own default (torch's
intra-op threads = cores, BLAS and XLA pools unlimited, no pinning). `--threads both` (default):
the two modes, interleaved.

neural-tangents lives in an optional, isolated environment (its pins do not fit compbench's):

    python -m venv /work/nt-venv
    /work/nt-venv/bin/pip install "jax==0.4.30" "jaxlib==0.4.30" "tf2jax==0.3.6" "neural-tangents==0.6.5"

(neural-tangents 0.6.5 does not import with jax ≥ 0.5 nor with tf2jax 0.3.8.) `--nt-python` (or
`COMPBENCH_NT_PYTHON`) names that environment's python; default /work/nt-venv/bin/python.

Run it on an otherwise idle machine: other work on the cores is load this script does not control,
and it lands on either side unevenly (the load average is printed and stored at start and end).
`--json FILE` writes every round's timings, the agreement numbers, the thread settings each worker
found and the versions.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np  # both environments have it

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "suites" / "kernel-limits-images.yaml"

# analytic: as tests/benchmarks/test_bench_analytic.py
ANALYTIC_N, ANALYTIC_D, SIGMA_W2, SIGMA_B2, DEPTHS = 2048, 64, 2.0, 0.1, (1, 2, 3)
CONVNET_N, QUICK_N = 1024, 256
ROUNDS, QUICK_ROUNDS = 5, 2
TOLERANCE = {"float32": 1e-5, "float64": 1e-10}  # convnet: max |ΔK| / max |K|
ANALYTIC_OFF_DIAGONAL, ANALYTIC_DIAGONAL = 1e-12, 1e-6  # of the kernel's scale
XLA_ONE_THREAD = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


def default_nt_python() -> str:
    return os.environ.get("COMPBENCH_NT_PYTHON", "/work/nt-venv/bin/python")


# ------------------------------------------------------------------------------------ both sides


def _thread_ticks() -> dict[str, int]:
    """CPU clock ticks (user + system) of each thread of this process (Linux; empty elsewhere)."""
    ticks = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{tid}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            ticks[tid] = int(fields[11]) + int(fields[12])
    except OSError:
        return {}
    return ticks


class Side:
    """One side's prepared cases (name → a call that returns when its result is ready)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cases: dict[str, Callable[[], Any]] = {}

    def call(self, op: str, **request: Any) -> dict[str, Any]:
        """A request served in this process (as `Worker.call` has it served by a worker)."""
        return getattr(self, op)(**request)

    def time(self, key: str) -> dict[str, Any]:
        """One timed call: wall and CPU seconds, and how many threads did ≥ 10% of its CPU work."""
        fn = self.cases[key]
        gc.collect()
        before, c0, t0 = _thread_ticks(), time.process_time(), time.perf_counter()
        out = fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        after = _thread_ticks()
        del out
        used = [after[t] - before.get(t, 0) for t in after]
        total = sum(used)
        busy = sum(1 for u in used if total and u >= 0.1 * total) if total else None
        return {"wall": wall, "cpu": cpu, "busy_threads": busy}

    def _warm(self, key: str, fn: Callable[[], Any]) -> tuple[Any, float]:
        """Register `fn` under `key` after one untimed call (compilation, first allocations); its result."""
        t0 = time.perf_counter()
        out = fn()
        self.cases[key] = fn
        return out, time.perf_counter() - t0


class CompbenchSide(Side):
    """compbench in this process, under its thread policy (`one`), torch's default (`default`) or as it is (None)."""

    def __init__(self, threads: str | None) -> None:
        super().__init__(f"compbench/{threads}")
        from compbench.runner.threads import apply_in_this_process, choose_threads, usable_cores

        if threads is not None:
            apply_in_this_process(choose_threads(usable_cores(), requested=None if threads == "one" else 0))

    def info(self) -> dict[str, Any]:
        import torch
        from threadpoolctl import threadpool_info

        return {
            "torch": torch.__version__, "numpy": np.__version__, "torch_threads": torch.get_num_threads(),
            "blas": [(p.get("internal_api"), p.get("num_threads")) for p in threadpool_info()],
            "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        }

    def prepare_analytic(self, key: str, x: str, depth: int, save: str) -> dict[str, Any]:
        from compbench.theory import relu_kernels

        xs = np.load(x)
        (nngp, ntk), seconds = self._warm(key, lambda: relu_kernels(xs, None, depth, SIGMA_W2, SIGMA_B2))
        np.savez(save, nngp=nngp, ntk=ntk)
        return {"warmup_s": seconds}

    def prepare_convnet(self, key: str, model: str, n: int, dtype: str, export: str, save: str) -> dict[str, Any]:
        from compbench.theory import empirical_ntk

        net, x, params_of_model = convnet_case(model, n, dtype)
        spec, params, consts = export_network(net, params_of_model.output_scale)
        Path(export).mkdir(parents=True, exist_ok=True)
        np.savez(Path(export) / "params.npz", **params)
        np.savez(Path(export) / "consts.npz", **consts)
        np.save(Path(export) / "x.npy", x.numpy())
        (Path(export) / "spec.json").write_text(json.dumps(spec))
        K, seconds = self._warm(key, lambda: empirical_ntk(net, x, max_memory=params_of_model.ntk_max_memory))
        np.save(save, K.numpy())
        return {"warmup_s": seconds, "n_params": sum(v.size for v in params.values()), "input_shape": list(x.shape),
                "gram_dtype": str(K.dtype).replace("torch.", "")}


def convnet_case(model: str, n: int, dtype: str):
    """Seed 0's network of the suite's `model` (the adapter's own `_init`), n digit pairs, the model's params."""
    import torch
    import yaml

    from compbench.adapters.convnet import ConvNetAdapter
    from compbench.encodings.image_sources import load_source

    models = {m["id"]: m for m in yaml.safe_load(SUITE.read_text())["models"]}
    if models[model]["adapter"] != "convnet":
        raise ValueError(f"{model} is not a convnet model of {SUITE.name}")
    adapter = ConvNetAdapter(ConvNetAdapter.Params.model_validate(models[model].get("params", {})))
    digits = load_source("digits")
    pairs = np.random.default_rng(0).integers(0, len(digits.labels), size=(n, 2))
    images = digits.images(pairs)  # (n, 2, 1, 8, 8): the `side_by_side` layout of two components
    x = torch.as_tensor(np.concatenate([images[:, 0], images[:, 1]], axis=-1))
    net = adapter._init(0, tuple(x.shape[1:]), 0)
    if dtype == "float64":
        net, x = net.double(), x.double()
    return net, x, adapter.params


def export_network(wrapper, scale: float) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The adapter's network (an `output_module` around an nn.Sequential, times `scale`) as a layer list for JAX,
    its trainable parameters and its constants (BatchNorm running statistics) as numpy arrays.

    The NTK is taken in eval mode, where BatchNorm is the affine map of its running statistics; a
    centred output (`center`) subtracts a frozen copy, which has no gradient and leaves the NTK alone.
    """
    from torch import nn

    from compbench.theory.ntk import _conv_padding

    def name(layer: str, attr: str) -> str:
        return f"net.{layer}.{attr}"

    layers: list[dict[str, Any]] = []
    for idx, m in wrapper.net.named_children():
        t = type(m)
        if t is nn.Conv2d:
            if m.groups != 1 or m.padding_mode != "zeros":
                raise ValueError(f"conv {idx}: groups / padding_mode not translated")
            layers.append({"op": "conv", "w": name(idx, "weight"), "b": name(idx, "bias") if m.bias is not None else None,
                           "stride": list(m.stride), "padding": list(_conv_padding(m)), "dilation": list(m.dilation)})
        elif t is nn.ReLU:
            layers.append({"op": "relu"})
        elif t is nn.BatchNorm2d:
            layers.append({"op": "bn", "w": name(idx, "weight"), "b": name(idx, "bias"), "mean": name(idx, "running_mean"),
                           "var": name(idx, "running_var"), "eps": m.eps})
        elif t is nn.MaxPool2d:
            if m.padding != 0 or m.dilation != 1 or m.ceil_mode:
                raise ValueError(f"max-pool {idx}: padding / dilation / ceil_mode not translated")
            layers.append({"op": "maxpool", "size": m.kernel_size, "stride": m.stride})
        elif t is nn.Flatten:
            layers.append({"op": "flatten"})
        elif t is nn.Linear:
            layers.append({"op": "linear", "w": name(idx, "weight"), "b": name(idx, "bias")})
        else:
            raise ValueError(f"layer {idx} ({t.__name__}) is not translated to JAX")
    params = {k: v.detach().cpu().numpy() for k, v in wrapper.named_parameters() if v.requires_grad}
    consts = {k: v.detach().cpu().numpy() for k, v in wrapper.named_buffers() if k.startswith("net.")}
    return {"layers": layers, "scale": scale}, params, consts


class NTSide(Side):
    """neural-tangents (jax, CPU) in the isolated environment."""

    def __init__(self, threads: str) -> None:
        super().__init__(f"nt/{threads}")
        import jax

        jax.config.update("jax_enable_x64", True)  # float64 where asked; float32 arrays stay float32

    def info(self) -> dict[str, Any]:
        import jax
        import jaxlib
        import neural_tangents

        return {
            "jax": jax.__version__, "jaxlib": jaxlib.__version__, "neural_tangents": neural_tangents.__version__,
            "numpy": np.__version__, "xla_flags": os.environ.get("XLA_FLAGS"), "devices": [str(d) for d in jax.devices()],
            "affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        }

    def prepare_analytic(self, key: str, x: str, depth: int, save: str) -> dict[str, Any]:
        import jax
        import jax.numpy as jnp
        from neural_tangents import stax

        xs = jnp.asarray(np.load(x))
        dense = lambda: stax.Dense(1, W_std=SIGMA_W2**0.5, b_std=SIGMA_B2**0.5)
        _, _, kernel_fn = stax.serial(*[layer for _ in range(depth) for layer in (dense(), stax.Relu())], dense())
        kernel_fn = jax.jit(kernel_fn, static_argnames="get")
        k, seconds = self._warm(key, lambda: jax.block_until_ready(kernel_fn(xs, None, get=("nngp", "ntk"))))
        np.savez(save, nngp=np.asarray(k.nngp), ntk=np.asarray(k.ntk))
        return {"warmup_s": seconds}

    def prepare_convnet(self, key: str, export: str, save: str) -> dict[str, Any]:
        import jax
        import jax.numpy as jnp
        import neural_tangents as nt

        spec = json.loads((Path(export) / "spec.json").read_text())
        params = {k: jnp.asarray(v) for k, v in np.load(Path(export) / "params.npz").items()}
        consts = {k: jnp.asarray(v) for k, v in np.load(Path(export) / "consts.npz").items()}
        x = jnp.asarray(np.load(Path(export) / "x.npy"))
        f = jax_network(spec, consts)
        ntk_fn = jax.jit(nt.empirical_ntk_fn(f, trace_axes=(), vmap_axes=0, implementation=nt.NtkImplementation.JACOBIAN_CONTRACTION))
        K, seconds = self._warm(key, lambda: jax.block_until_ready(ntk_fn(x, None, params)))
        K = np.asarray(K).reshape(x.shape[0], x.shape[0])
        np.save(save, K)
        return {"warmup_s": seconds, "gram_dtype": str(K.dtype), "input_dtype": str(x.dtype)}


def jax_network(spec: dict[str, Any], consts: dict[str, Any]) -> Callable[[dict[str, Any], Any], Any]:
    """f(params, x) → one output per sample: the exported network in JAX (NCHW, as torch)."""
    import jax
    from jax import lax

    def f(params: dict[str, Any], x: Any) -> Any:
        h = x
        for layer in spec["layers"]:
            op = layer["op"]
            if op == "conv":
                h = lax.conv_general_dilated(
                    h, params[layer["w"]], window_strides=layer["stride"], padding=[(p, p) for p in layer["padding"]],
                    rhs_dilation=layer["dilation"], dimension_numbers=("NCHW", "OIHW", "NCHW"),
                )
                if layer["b"] is not None:
                    h = h + params[layer["b"]][None, :, None, None]
            elif op == "relu":
                h = jax.nn.relu(h)  # derivative 0 at 0, as torch's
            elif op == "bn":
                mean, var = consts[layer["mean"]][None, :, None, None], consts[layer["var"]][None, :, None, None]
                h = (h - mean) * lax.rsqrt(var + layer["eps"]) * params[layer["w"]][None, :, None, None] + params[layer["b"]][None, :, None, None]
            elif op == "maxpool":
                k, s = layer["size"], layer["stride"]
                # a concrete numpy init value: JAX then takes max-pooling's own derivative (a traced one,
                # as jnp.array would be under jit, makes it a generic reduction that jit cannot differentiate)
                h = lax.reduce_window(h, np.array(-np.inf, h.dtype), lax.max, (1, 1, k, k), (1, 1, s, s), "VALID")
            elif op == "flatten":
                h = h.reshape(h.shape[0], -1)
            elif op == "linear":
                h = h @ params[layer["w"]].T + params[layer["b"]]
        h = h.reshape(h.shape[0])
        return h * spec["scale"] if spec["scale"] != 1.0 else h

    return f


def _worker(side: str, threads: str, core: int | None) -> None:
    """Serve requests (one JSON object a line on stdin, one reply a line) until `quit` or end of input."""
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever the libraries print goes to stderr, not into the replies
    if threads == "one" and core is not None and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {core})  # before jax or torch size their thread pools
    if side == "compbench":
        sys.path.insert(0, str(ROOT))
    impl: Side = CompbenchSide(threads) if side == "compbench" else NTSide(threads)
    for line in sys.stdin:
        request = json.loads(line)
        op = request.pop("op")
        if op == "quit":
            break
        try:
            reply = {"ok": True, **getattr(impl, op)(**request)}
        except Exception:  # noqa: BLE001 - the parent reports it
            reply = {"ok": False, "error": traceback.format_exc()}
        proto.write(json.dumps(reply) + "\n")
    proto.flush()
    sys.stderr.flush()
    os._exit(0)  # nothing left to save: skip the interpreter's teardown of jax / tensorflow / torch (~1 s)


# ------------------------------------------------------------------------------------ the parent


class Worker:
    """A side's worker process under a thread mode, and its request/reply pipe."""

    def __init__(self, python: str, side: str, threads: str, core: int, log_dir: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in (*THREAD_VARS, "XLA_FLAGS")}
        env["JAX_PLATFORMS"] = "cpu"
        env["TF_CPP_MIN_LOG_LEVEL"] = "3"
        # compbench's worker imports this checkout; neural-tangents' sees nothing of compbench's environment
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")])) if side == "compbench" else ""
        if threads == "one":
            env.update({k: "1" for k in THREAD_VARS})
            env["XLA_FLAGS"] = XLA_ONE_THREAD
        self.name = f"{side}/{threads}"
        self.log = log_dir / f"{side}-{threads}.log"
        with self.log.open("w") as log:  # the child keeps its own copy of the descriptor
            self.proc = subprocess.Popen(
                [python, str(Path(__file__).resolve()), "--worker", side, "--threads", threads, "--core", str(core)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True, env=env, cwd=ROOT,
            )

    def call(self, op: str, **request: Any) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps({"op": op, **request}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.name} died; its log ({self.log}):\n{self.log.read_text()[-3000:]}")
        reply = json.loads(line)
        if not reply.pop("ok"):
            raise RuntimeError(f"worker {self.name}, {op}:\n{reply['error']}")
        return reply

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.close()
                self.proc.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()


def analytic_agreement(cb: str, nt: str) -> dict[str, float]:
    """Per kernel: max |Δ| off the diagonal and on it, relative to the kernel's largest entry."""
    ours, theirs = np.load(cb), np.load(nt)
    out = {}
    for kernel in ("nngp", "ntk"):
        a, b = ours[kernel], theirs[kernel]
        scale = np.abs(b).max()
        diff = np.abs(a - b)
        off = ~np.eye(len(a), dtype=bool)
        out[f"{kernel}_off_diagonal"] = float(diff[off].max() / scale)
        out[f"{kernel}_diagonal"] = float(np.diag(diff).max() / scale)
    return out


def analytic_ok(agreement: dict[str, float]) -> bool:
    return all(v <= (ANALYTIC_OFF_DIAGONAL if k.endswith("off_diagonal") else ANALYTIC_DIAGONAL) for k, v in agreement.items())


def convnet_agreement(cb: str, nt: str) -> dict[str, float]:
    """max |ΔK| / max |K| between the two Grams."""
    ours, theirs = np.load(cb), np.load(nt).astype(np.float64)
    return {"relative_max_difference": float(np.abs(ours - theirs).max() / np.abs(theirs).max())}


def summary(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "max": max(values), "median": statistics.median(values)}


def load_average() -> list[float] | None:
    return list(os.getloadavg()) if hasattr(os, "getloadavg") else None


class Disagreement(Exception):
    """compbench's answer and neural-tangents' differ by more than the limits."""


def prepare(cb: Worker | Side, nt: Worker | Side, case: dict[str, Any], tmp: Path, dtype: str) -> dict[str, Any]:
    """Build, compile and warm up one case on both sides; their answers' agreement (`Disagreement` if they differ)."""
    key, tag = case["key"], f"{case['key']}-{cb.name.split('/')[1]}"
    if case["kind"] == "analytic":
        x = tmp / f"x-analytic-{case['n']}.npy"
        if not x.exists():
            np.save(x, np.random.default_rng(0).normal(size=(case["n"], ANALYTIC_D)))
        cb_info = cb.call("prepare_analytic", key=key, x=str(x), depth=case["depth"], save=str(tmp / f"{tag}-cb.npz"))
        nt_info = nt.call("prepare_analytic", key=key, x=str(x), depth=case["depth"], save=str(tmp / f"{tag}-nt.npz"))
        agreement = analytic_agreement(str(tmp / f"{tag}-cb.npz"), str(tmp / f"{tag}-nt.npz"))
        ok = analytic_ok(agreement)
        limits = {"off_diagonal": ANALYTIC_OFF_DIAGONAL, "diagonal": ANALYTIC_DIAGONAL}
    else:
        export = tmp / f"{tag}-export"
        cb_info = cb.call("prepare_convnet", key=key, model=case["model"], n=case["n"], dtype=dtype, export=str(export),
                          save=str(tmp / f"{tag}-cb.npy"))
        nt_info = nt.call("prepare_convnet", key=key, export=str(export), save=str(tmp / f"{tag}-nt.npy"))
        agreement = convnet_agreement(str(tmp / f"{tag}-cb.npy"), str(tmp / f"{tag}-nt.npy"))
        ok = agreement["relative_max_difference"] <= TOLERANCE[dtype]
        limits = {"relative_max_difference": TOLERANCE[dtype]}
    if not ok:
        raise Disagreement(f"{tag}: compbench and neural-tangents disagree: {agreement} (limits {limits}); nothing timed")
    return {"compbench_prepare": cb_info, "nt_prepare": nt_info, "agreement": agreement, "limits": limits}


def cases_for(args: argparse.Namespace) -> list[dict[str, Any]]:
    cases = []
    if args.only in (None, "analytic"):
        n = args.n_analytic or (QUICK_N if args.quick else ANALYTIC_N)
        cases += [{"kind": "analytic", "key": f"analytic-N{n}-depth{d}", "n": n, "depth": d} for d in args.depths]
    if args.only in (None, "convnet"):
        n = args.n_convnet or (QUICK_N if args.quick else CONVNET_N)
        cases.append({"kind": "convnet", "key": f"convnet-{args.model}-N{n}-{args.dtype}", "n": n, "model": args.model})
    return cases


def _start_busy(k: int) -> list[subprocess.Popen]:
    """busy_machine.py's busy loops (this file runs as a script or is loaded by path: import it beside us)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from busy_machine import start_busy

    return start_busy(k)


def _stop_busy(procs: list[subprocess.Popen]) -> None:
    if procs:
        from busy_machine import stop_busy

        stop_busy(procs)


def run(args: argparse.Namespace) -> dict[str, Any]:
    modes = ["one", "default"] if args.threads == "both" else [args.threads]
    cases = cases_for(args)
    rounds = 0 if args.check else args.rounds if args.rounds is not None else (QUICK_ROUNDS if args.quick else ROUNDS)
    started = time.time()
    result: dict[str, Any] = {
        "args": {k: v for k, v in vars(args).items() if k != "worker"}, "rounds": rounds, "core": args.core,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count(), "python": sys.version.split()[0]},
        "load_average_start": load_average(), "cases": {},
    }
    print(f"load average at start: {result['load_average_start']} (this measures only on an idle machine)", flush=True)
    with tempfile.TemporaryDirectory(prefix="compbench-nt-") as tmp_name:
        tmp = Path(tmp_name)
        workers: dict[str, tuple[Worker, Worker]] = {}
        busy: list[subprocess.Popen] = []
        try:
            for mode in modes:
                workers[mode] = (Worker(sys.executable, "compbench", mode, args.core, tmp),
                                 Worker(args.nt_python, "nt", mode, args.core, tmp))
            result["workers"] = {}
            for mode, (cb, nt) in workers.items():
                result["workers"][mode] = {"compbench": cb.call("info"), "neural_tangents": nt.call("info")}
                for case in cases:
                    entry = prepare(cb, nt, case, tmp, args.dtype)
                    entry.update(case=case, threads=mode, compbench=[], neural_tangents=[], order=[])
                    result["cases"][f"{case['key']}/{mode}"] = entry
                    print(f"prepared {case['key']} [{mode}]: agreement {entry['agreement']}", flush=True)
            busy = _start_busy(args.busy) if rounds else []
            result["busy"] = len(busy)
            if busy:
                print(f"timing beside {len(busy)} busy processes", flush=True)
            for r in range(rounds):
                for mode, (cb, nt) in workers.items():
                    for case in cases:
                        entry = result["cases"][f"{case['key']}/{mode}"]
                        sides = [("compbench", cb), ("neural_tangents", nt)]
                        for label, worker in sides if r % 2 == 0 else sides[::-1]:
                            entry[label].append(worker.call("time", key=case["key"]))
                        entry["order"].append("compbench first" if r % 2 == 0 else "neural-tangents first")
                print(f"round {r + 1}/{rounds} done", flush=True)
        finally:
            _stop_busy(busy)
            for pair in workers.values():
                for worker in pair:
                    worker.close()
    for entry in result["cases"].values() if rounds else ():
        cb_s = [t["wall"] for t in entry["compbench"]]
        nt_s = [t["wall"] for t in entry["neural_tangents"]]
        entry["compbench_s"], entry["neural_tangents_s"] = summary(cb_s), summary(nt_s)
        entry["ratio"] = summary([a / b for a, b in zip(cb_s, nt_s)])
        entry["ratios"] = [a / b for a, b in zip(cb_s, nt_s)]
    result["load_average_end"] = load_average()
    result["seconds"] = time.time() - started
    return result


def report(result: dict[str, Any]) -> str:
    lines = []
    for e in result["cases"].values() if result["rounds"] else ():
        cb, nt, ratio = e["compbench_s"], e["neural_tangents_s"], e["ratio"]
        threads = "one thread" if e["threads"] == "one" else "library defaults"
        # threads doing ≥ 10% of a call's CPU (none counted for calls shorter than a clock tick)
        busy = [sorted({t["busy_threads"] for t in e[side]} - {None}) for side in ("compbench", "neural_tangents")]
        lines.append(
            f"{e['case']['key']} [{threads}]: compbench {cb['min']:.4f}–{cb['max']:.4f} s, neural-tangents "
            f"{nt['min']:.4f}–{nt['max']:.4f} s, ratio compbench/neural-tangents {ratio['min']:.3f}–{ratio['max']:.3f} "
            f"over {len(e['ratios'])} interleaved rounds (busy threads {busy[0]} / {busy[1]})"
        )
    if result.get("busy"):
        lines.append(f"timed beside {result['busy']} busy processes (`python -c \"while True: pass\"`)")
    lines.append(f"load average at start {result['load_average_start']}, at end {result['load_average_end']}; "
                 f"{result['seconds']:.0f} s in all")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=None, help=f"interleaved rounds (default {ROUNDS}; --quick {QUICK_ROUNDS})")
    parser.add_argument("--quick", action="store_true", help=f"N = {QUICK_N} for both comparisons, {QUICK_ROUNDS} rounds: checks that it works")
    parser.add_argument("--check", action="store_true", help="build, warm up and check the agreement; time nothing")
    parser.add_argument("--json", type=Path, help="write every timing, the agreement and the settings here")
    parser.add_argument("--threads", choices=["one", "default", "both"], default="both")
    parser.add_argument("--only", choices=["analytic", "convnet"], default=None)
    parser.add_argument("--busy", type=int, default=0,
                        help="time beside this many busy processes (started after the warm-up, killed after the rounds)")
    parser.add_argument("--depths", type=lambda s: [int(d) for d in s.split(",")], default=list(DEPTHS))
    parser.add_argument("--model", default="convnet", help="a convnet model of kernel-limits-images (convnet, convnet-lazy)")
    parser.add_argument("--dtype", choices=["float32", "float64"], default="float32",
                        help="the convnet's dtype on both sides (float64: an agreement check at small N only, see above)")
    parser.add_argument("--n-analytic", type=int, default=None, help=f"samples of the analytic comparison (default {ANALYTIC_N})")
    parser.add_argument("--n-convnet", type=int, default=None, help=f"samples of the convnet comparison (default {CONVNET_N})")
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else [0]
    parser.add_argument("--core", type=int, default=cores[-1], help="the core both workers are pinned to with --threads one")
    parser.add_argument("--nt-python", default=default_nt_python(), help="python of the neural-tangents environment")
    parser.add_argument("--worker", choices=["compbench", "nt"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        _worker(args.worker, args.threads, args.core)
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be ≥ 1")
    if not Path(args.nt_python).exists():
        parser.error(f"no neural-tangents python at {args.nt_python} (see the docstring to build its environment)")
    try:
        result = run(args)
    except Disagreement as exc:
        raise SystemExit(str(exc)) from None
    if args.json:
        args.json.write_text(json.dumps(result, indent=1, default=str))
    print(report(result))
    if args.json:
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
