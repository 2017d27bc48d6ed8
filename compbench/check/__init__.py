"""Regression checks of model families against recorded baselines."""

from compbench.check.baseline import BASELINE_SCHEMA, Baseline, BaselineError, baseline_from_records, cell_summaries
from compbench.check.compare import CheckRow, compare, failing_lines, format_rows

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
]
