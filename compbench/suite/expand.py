"""Sweep and seed expansion: a model entry becomes concrete models (`ModelSpec`), sized before expanding."""

from __future__ import annotations

import copy
import fnmatch
import functools
import itertools
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ValidationError

from compbench.limits import TooLargeError, limits
from compbench.suite.schema import Geomspace, Linspace, ModelEntry, SweepValues
from compbench.suite.source import LineMap, SuiteIssue

_SEGMENT = re.compile(r"^(?:[A-Za-z_][A-Za-z0-9_]*|[0-9]+)$")
# A member id is its entry's id (at most 64 characters) with the swept values in brackets; kept under
# the 255 bytes a file name may have, so any use of it as one (or as part of one) stays possible.
MEMBER_ID_MAX_LENGTH = 200


@dataclass(frozen=True)
class ModelSpec:
    """One concrete model after sweep expansion."""

    id: str
    group: str
    adapter: str
    params: BaseModel
    raw_params: dict[str, Any]
    sweep_values: dict[str, Any]
    task_patterns: tuple[str, ...]
    seeds: tuple[int, ...]
    skip_invalid: bool
    tags: tuple[str, ...] = ()  # sorted: a set's order follows string hashing, which changes from process to process


def matches(name: str, patterns: Iterable[str], group: str | None = None) -> bool:
    """Whether an id (or its sweep group) matches any fnmatch pattern."""
    return any(
        fnmatch.fnmatchcase(name, p) or (group is not None and fnmatch.fnmatchcase(group, p))
        for p in patterns
    )


def matches_model(model: str, group: str, tags: Iterable[str], patterns: Iterable[str]) -> bool:
    """Whether a model matches a pattern: `@tag` selects by tag, anything else globs the id or sweep group."""
    tags = set(tags)
    return any(p[1:] in tags if p.startswith("@") else matches(model, [p], group) for p in patterns)


class MemberIndex:
    """Which models patterns select (as `matches_model` decides), answered per sweep group: a pattern that globs a
    group's name selects all of its members (a sweep's thousands) at once, and each pattern is matched once.

    `members`: (model id, sweep group, tags) of every model asked about; `selects` answers for others too.
    """

    def __init__(self, members: Iterable[tuple[str, str, Iterable[str]]]) -> None:
        self.groups: dict[str, dict[str, frozenset[str]]] = {}  # group → {member id: its tags}, in the order given
        for model, group, tags in members:
            ids = self.groups.setdefault(group, {})
            if model not in ids:
                ids[model] = frozenset(tags)
        self._hits: dict[str, dict[str, frozenset[str] | None]] = {}

    @classmethod
    def of_models(cls, models: Iterable[ModelSpec]) -> MemberIndex:
        """The index of a suite's concrete models."""
        return cls((m.id, m.group, m.tags) for m in models)

    def selected(self, patterns: Iterable[str]) -> dict[str, frozenset[str] | None]:
        """Each group (in order) with a member some pattern selects: the ids selected, None when it is every member."""
        out: dict[str, frozenset[str] | None] = {}
        for p in patterns:
            for group, ids in self._of(p).items():
                if group not in out:
                    out[group] = ids
                elif out[group] is not None:
                    both = None if ids is None else out[group] | ids  # type: ignore[operator]
                    out[group] = None if both is None or len(both) == len(self.groups[group]) else both
        return {g: out[g] for g in self.groups if g in out}

    def selects(self, model: str, group: str, pattern: str) -> bool:
        """Whether the pattern selects this member (`matches_model` with its tags)."""
        members = self.groups.get(group)
        if members is None or model not in members:
            return matches_model(model, group, (), [pattern])
        hit = self._of(pattern)
        return group in hit and (hit[group] is None or model in hit[group])  # type: ignore[operator]

    def _of(self, pattern: str) -> dict[str, frozenset[str] | None]:
        hit = self._hits.get(pattern)
        if hit is not None:
            return hit
        hit = self._hits[pattern] = {}
        tag = pattern[1:] if pattern.startswith("@") else None
        match = re.compile(fnmatch.translate(pattern)).match  # fnmatchcase's own test, compiled once for every id
        for group, members in self.groups.items():
            if tag is None and fnmatch.fnmatchcase(group, pattern):
                hit[group] = None
                continue
            ids = frozenset(m for m, tags in members.items() if tag in tags) if tag is not None \
                else frozenset(filter(match, members))
            if ids:
                hit[group] = None if len(ids) == len(members) else ids
        return hit


def axis_length(spec: SweepValues) -> int:
    """How many values a sweep axis has, without expanding it."""
    if isinstance(spec, Linspace):
        return spec.linspace[2]
    if isinstance(spec, Geomspace):
        return spec.geomspace[2]
    return len(spec)


def sweep_values(spec: SweepValues) -> list[Any]:
    """The concrete values of a sweep axis."""
    if isinstance(spec, Linspace):
        return [float(v) for v in np.linspace(*spec.linspace[:2], spec.linspace[2])]
    if isinstance(spec, Geomspace):
        return [float(v) for v in np.geomspace(*spec.geomspace[:2], spec.geomspace[2])]
    return list(spec)


def _identity(v: Any) -> Any:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return ("number", float(v))
    return (type(v).__name__, repr(v))


def _non_finite(v: Any) -> float | None:
    """The first NaN or infinity anywhere in a value (lists and mappings included), or None."""
    if isinstance(v, float):
        return None if math.isfinite(v) else v
    items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
    for item in items:
        bad = _non_finite(item)
        if bad is not None:
            return bad
    return None


def _axis_problem(values: list[Any]) -> str | None:
    for v in values:
        bad = _non_finite(v)
        if bad is not None:
            return f"sweep values must be finite, got {bad}" + ("" if isinstance(v, float) else f" in {v!r}")
    seen: set[Any] = set()
    for v in values:
        key = _identity(v)
        if key in seen:
            return f"sweep value {v!r} is listed twice: two members would be one model"
        seen.add(key)
    return None


def member_labels(values: list[Any]) -> list[str]:
    """How each value of an axis reads in member ids: 4 significant digits, more where needed to tell them apart."""
    if not all(isinstance(v, float) for v in values):
        return [_plain(v) for v in values]
    for digits in range(4, 18):
        labels = [f"{v:.{digits}g}" for v in values]
        if len(set(labels)) == len(labels):
            return labels
    return [repr(v) for v in values]


def _plain(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


@functools.lru_cache(maxsize=256)
def _path_keys(dotted: str) -> tuple[tuple[str, Any], ...]:
    """Each segment of a sweep path and the key it is (a list index as an int); parsed once for all of a sweep's members."""
    parts = dotted.split(".")
    bad = [p for p in parts if not _SEGMENT.fullmatch(p)]
    if bad:
        raise KeyError(f"path segment {bad[0]!r} is neither a name (letters, digits, _) nor a list index")
    return tuple((part, int(part) if part.isdigit() else part) for part in parts)


def set_path(params: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `params[a][b][0] = value` for 'a.b.0'; KeyError says what is wrong with the path."""
    keys = _path_keys(dotted)
    parts = dotted.split(".")  # the path as written, for the messages
    target: Any = params
    for i, (part, key) in enumerate(keys):
        last = i == len(keys) - 1
        if isinstance(target, list):
            if not isinstance(key, int) or not 0 <= key < len(target):
                raise KeyError(f"index {part!r} is not in the list at {'.'.join(parts[:i]) or 'params'}")
        elif not isinstance(target, dict):
            raise KeyError(f"{'.'.join(parts[:i])} is not a list or mapping")
        if last:
            target[key] = value
        else:
            if isinstance(target, dict) and key not in target:
                target[key] = {}
            target = target[key]


def _copy(value: Any) -> Any:
    """A deep copy of YAML data: dicts and lists rebuilt directly, anything else by copy.deepcopy.

    A 50 × 50 sweep copies its params 2 500 times; copy.deepcopy's bookkeeping was most of loading.
    """
    if type(value) is dict:
        return {k: _copy(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy(v) for v in value]
    if type(value) in (str, int, float, bool) or value is None:
        return value
    return copy.deepcopy(value)


def seed_list(seeds: int | list[int]) -> tuple[int, ...]:
    """A seed count n → (0..n−1); a list as given."""
    return tuple(range(seeds)) if isinstance(seeds, int) else tuple(seeds)


def sweep_size(entry: ModelEntry) -> int:
    """Members of a model entry's sweep (product of axis lengths), computed without expanding."""
    size = 1
    for spec in entry.sweep.values():
        size *= axis_length(spec)
    return size


def sweep_too_large(entry: ModelEntry) -> TooLargeError | None:
    """The error for a sweep with more members than the limit (axis lengths shown), or None."""
    size = sweep_size(entry)
    if size <= limits().models:
        return None
    shape = " × ".join(f"{axis_length(spec):,} ({key})" for key, spec in entry.sweep.items())
    return TooLargeError(f"sweep members {shape}", size, limits().models, "--max-models")


def model_seeds(adapter: Any, seeds: Sequence[int]) -> tuple[int, ...]:
    """The seeds a model of this adapter runs: the first alone for a deterministic adapter, else all (the one seed rule)."""
    # A deterministic model gives the same result for every seed: more would only repeat it.
    return tuple(seeds[:1]) if adapter.deterministic else tuple(seeds)


def expand_model(
    i: int, entry: ModelEntry, suite_seeds: tuple[int, ...], lines: LineMap, issues: list[SuiteIssue],
    base: Path | None = None,
) -> list[ModelSpec]:
    """The concrete models of one entry (one per sweep point); problems go to `issues`.

    `adapter: file.py:Name` (a path from `base`, the suite's folder) or `package.module:Name` is
    loaded as `--model` loads it; its members name the adapter it is registered under.
    """
    from compbench.adapters import UnknownAdapterError, get_adapter
    from compbench.adapters.user import ModelReferenceError, is_reference, load_reference
    from compbench.suite.source import validation_issues

    name = entry.adapter
    try:
        if is_reference(name):
            name = load_reference(name, base=base, option="adapter").adapter
        adapter = get_adapter(name)
    except (UnknownAdapterError, ModelReferenceError) as exc:
        issues.append(lines.issue(("models", i, "adapter"), str(exc)))
        return []
    too_large = sweep_too_large(entry)
    if too_large is not None:
        issues.append(lines.issue(("models", i, "sweep"), str(too_large)))
        return []
    axes: dict[str, list[Any]] = {}
    labels: dict[str, list[str]] = {}
    for key, spec in entry.sweep.items():
        vals = sweep_values(spec)
        if not vals:
            issues.append(lines.issue(("models", i, "sweep", key), "sweep axis has no values"))
            return []
        problem = _axis_problem(vals)
        if problem:
            issues.append(lines.issue(("models", i, "sweep", key), problem))
            return []
        axes[key], labels[key] = vals, member_labels(vals)
    seeds = model_seeds(adapter, seed_list(entry.seeds) if entry.seeds is not None else suite_seeds)
    tags = tuple(sorted(set(adapter.tags) | set(entry.tags)))
    specs: list[ModelSpec] = []
    index_lists = [range(len(v)) for v in axes.values()]
    for combo in itertools.product(*index_lists) if axes else [()]:
        raw = _copy(entry.params)
        values = {k: axes[k][j] for k, j in zip(axes, combo)}
        for key, value in values.items():
            try:
                set_path(raw, key, value)
            except KeyError as exc:
                issues.append(lines.issue(("models", i, "sweep", key), f"cannot set sweep path: {exc.args[0]}"))
                return []
        try:
            params = adapter.Params.model_validate(raw)
        except ValidationError as exc:
            issues.extend(validation_issues(exc, lines, ("models", i, "params")))
            return []
        shown = ",".join(f"{k}={labels[k][j]}" for k, j in zip(axes, combo))
        member_id = entry.id if not values else f"{entry.id}[{shown}]"
        if len(member_id) > MEMBER_ID_MAX_LENGTH:
            issues.append(lines.issue(("models", i, "sweep"), f"sweep member id {member_id[:60]!r}… is {len(member_id):,} "
                                      f"characters; at most {MEMBER_ID_MAX_LENGTH} (shorten the id or the swept values)"))
            return []
        specs.append(ModelSpec(member_id, entry.id, name, params, raw, values, tuple(entry.tasks), seeds,
                               entry.skip_invalid, tags))
    return specs
