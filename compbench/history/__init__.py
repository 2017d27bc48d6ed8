"""A suite's metrics across the runs its store recorded: a table, a plot, and a check's reference from past runs."""

from compbench.history.reference import history_baseline, parse_history_spec
from compbench.history.runs import HistoryError, commit_label, suite_runs
from compbench.history.table import CellStat, History, HistoryRow, history_of, to_csv, to_json, to_markdown

__all__ = [
    "CellStat", "History", "HistoryError", "HistoryRow", "commit_label", "history_baseline", "history_of",
    "parse_history_spec", "suite_runs", "to_csv", "to_json", "to_markdown",
]
