"""Regression checks of model families against recorded baselines."""

from compbench.check.baseline import BASELINE_SCHEMA, Baseline, BaselineError, baseline_from_records, cell_summaries
from compbench.check.compare import CheckRow, compare, failing_lines, format_rows, gate_by_fdr
from compbench.check.fdr import benjamini_hochberg, welch_p

__all__ = [
    "BASELINE_SCHEMA",
    "Baseline",
    "BaselineError",
    "CheckRow",
    "baseline_from_records",
    "cell_summaries",
    "compare",
    "failing_lines",
    "format_rows",
    "gate_by_fdr",
    "benjamini_hochberg",
    "welch_p",
]
