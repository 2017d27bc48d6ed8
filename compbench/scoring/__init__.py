"""Scoring: per-cell metrics and suite-level expectation verdicts."""
