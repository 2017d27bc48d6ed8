"""Fuzzing suites: any YAML text or structure gives a LoadedSuite or a SuiteError, never a traceback."""

from __future__ import annotations

import pytest

import copy

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compbench.suite import SuiteError, parse_suite

VALID = {
    "name": "fuzz",
    "seeds": 2,
    "tasks": [
        {"id": "add", "family": "additive", "params": {"anchors": [[4], [4]]}},
        {"id": "te", "family": "transitive_equivalence", "params": {"classes": [2, 2]}},
    ],
    "models": [
        {"id": "k", "adapter": "kernel", "params": {"kernel": "overlap", "weights": [0.0, 0.3, 1.0]}},
        {"id": "m", "adapter": "mlp", "params": {"width": 8}, "sweep": {"init_scale": [0.1, 1.0]}},
    ],
    "expectations": [{"claim": "at_chance", "models": ["k"], "tasks": ["te"]}],
}

scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10, 10), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.sampled_from(["additive", "kernel", "mlp", "CD-3", "linspace", "*", "-1", "1e309"]),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


def _paths(obj, prefix=()):
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, prefix + (i,))


ALL_PATHS = [p for p in _paths(VALID) if p]


@st.composite
def mutated_suites(draw):
    doc = copy.deepcopy(VALID)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(ALL_PATHS))
        target = doc
        try:
            for part in path[:-1]:
                target = target[part]
            action = draw(st.sampled_from(["replace", "delete", "add"]))
            if action == "replace":
                target[path[-1]] = draw(values)
            elif action == "delete" and isinstance(target, dict):
                target.pop(path[-1], None)
            elif isinstance(target, dict):
                target[draw(st.text(max_size=6))] = draw(values)
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed this path
    return doc


def _parses_or_rejects(text: str) -> None:
    try:
        parse_suite(text, "fuzz.yaml")
    except SuiteError as exc:
        assert exc.issues and all(str(i).startswith("fuzz.yaml") for i in exc.issues)


@pytest.mark.slow
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_suites())
def test_mutated_suites_validate_or_fail_cleanly(doc):
    _parses_or_rejects(yaml.safe_dump(doc, allow_unicode=True))


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_validates_or_fails_cleanly(text):
    _parses_or_rejects(text)
