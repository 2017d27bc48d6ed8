"""Reports: leaderboard tables (markdown, CSV, HTML) and plots."""

from compbench.report.publish import FORMATS, NoResultsError, publish, rebuild

__all__ = ["FORMATS", "NoResultsError", "publish", "rebuild"]
