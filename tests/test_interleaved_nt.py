"""compbench and neural-tangents agree on what tests/benchmarks/interleaved_nt.py times, at small N.

The ConvNet's JAX translation (weights exported from torch) against compbench's empirical NTK in
float32 (the adapter's dtype) and float64, and the analytic ReLU NTK + NNGP. Needs the optional
neural-tangents environment (interleaved_nt.py's docstring says how to build it); skipped without it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent / "benchmarks" / "interleaved_nt.py"
_spec = importlib.util.spec_from_file_location("interleaved_nt", SCRIPT)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(bench.default_nt_python()).exists(), reason="no neural-tangents environment"),
]


@pytest.fixture(scope="module")
def sides(tmp_path_factory, one_thread):
    tmp = tmp_path_factory.mktemp("nt")
    nt = bench.Worker(bench.default_nt_python(), "nt", "default", 0, tmp)
    yield bench.CompbenchSide(None), nt, tmp
    nt.close()


@pytest.mark.parametrize(
    ("case", "dtype"),
    [
        ({"kind": "analytic", "key": "analytic", "n": 32, "depth": 2}, "float64"),
        ({"kind": "convnet", "key": "convnet32", "n": 16, "model": "convnet"}, "float32"),
        ({"kind": "convnet", "key": "convnet64", "n": 8, "model": "convnet"}, "float64"),
    ],
    ids=["analytic", "convnet-float32", "convnet-float64"],
)
def test_same_answers(sides, case, dtype) -> None:
    cb, nt, tmp = sides
    entry = bench.prepare(cb, nt, case, tmp, dtype)  # raises Disagreement beyond the limits
    assert entry["agreement"]
    if case["kind"] == "convnet":
        assert entry["compbench_prepare"]["n_params"] == 110_489
        assert entry["nt_prepare"]["gram_dtype"] == dtype  # neural-tangents ran in the dtype asked for
