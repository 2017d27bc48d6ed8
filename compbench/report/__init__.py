"""Reports: leaderboard tables (markdown, CSV, HTML), plots, predictions; writers are a registered kind."""

from compbench.report.publish import NoResultsError, publish
from compbench.report.writers import DEFAULT_FORMATS, REPORTERS, ReportContext, Reporter, register_reporter

FORMATS = DEFAULT_FORMATS

__all__ = ["DEFAULT_FORMATS", "FORMATS", "NoResultsError", "REPORTERS", "ReportContext", "Reporter", "publish",
           "register_reporter"]
