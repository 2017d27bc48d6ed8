"""Reports: leaderboard tables and record exports."""

from compbench.report.tables import write_report

__all__ = ["write_report"]
