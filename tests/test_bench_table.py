"""The benchmark table script: ratios per group and GFLOP/s rows from a pytest-benchmark report."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SPEC = importlib.util.spec_from_file_location("bench_table", Path(__file__).parent / "benchmarks" / "table.py")
bench_table = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bench_table)


def bench(name: str, group: str, median: float, **extra: float) -> dict:
    return {"name": name, "group": group, "stats": {"median": median}, "extra_info": extra}


def test_table_gives_ratio_to_the_fastest_entry_per_group_and_gflops():
    report = {
        "machine_info": {"cpu": {"brand_raw": "Test CPU", "count": 2}, "python_version": "3.11"},
        "benchmarks": [
            bench("test_ntk_gram[loop-1024-mlp]", "ntk-mlp-N1024", 25.0),
            bench("test_ntk_gram[compbench-1024-mlp]", "ntk-mlp-N1024", 0.125),
            bench("test_mlp_16_seeds_sequential", "mlp-16-seeds", 1.6),
            bench("test_mlp_16_seeds_vectorised", "mlp-16-seeds", 0.2),
            bench("test_ntk_gflops[mlp]", "gflops", 0.05, gflop=5.0, gflops=100.0),
        ],
    }
    text = bench_table.table(report)
    assert "Machine: Test CPU, 2 logical CPUs" in text
    assert "| mlp-16-seeds | mlp_16_seeds_vectorised: 200.0 ms (×1.0); mlp_16_seeds_sequential: 1.60 s (×8.0) |" in text
    assert "compbench-1024-mlp: 125.0 ms (×1.0); loop-1024-mlp: 25.00 s (×200.0)" in text
    assert "| mlp | 5.00 | 50.0 ms | 100.0 |" in text
