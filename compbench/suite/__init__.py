"""Suites: schema (pydantic), reading files (source), sweep expansion (expand), validation and loading (load),
a command's edits of a loaded suite (edit)."""

from compbench.suite.edit import add_adapter_models, parse_model_args, seeds_override, unmatched_tasks
from compbench.suite.expand import ModelSpec, matches, matches_model, member_labels, seed_list, set_path, sweep_values
from compbench.suite.load import (
    BUNDLED_KINDS,
    LoadedSuite,
    bundled_dir,
    bundled_suites,
    load_suite,
    parse_suite,
    resolve_bundled,
    resolve_suite_path,
)
from compbench.suite.schema import Expectation, Geomspace, Linspace, ModelEntry, Profile, Suite, TaskEntry
from compbench.suite.source import SuiteError, SuiteIssue

__all__ = [
    "BUNDLED_KINDS", "Expectation", "Geomspace", "Linspace", "LoadedSuite", "ModelEntry", "ModelSpec", "Profile", "Suite",
    "SuiteError", "SuiteIssue", "TaskEntry", "add_adapter_models", "bundled_dir", "bundled_suites", "load_suite", "matches", "matches_model",
    "member_labels", "parse_model_args", "parse_suite", "resolve_bundled", "resolve_suite_path", "seed_list", "seeds_override", "set_path",
    "sweep_values", "unmatched_tasks",
]
