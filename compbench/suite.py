"""Suite schema (pydantic) and YAML loading whose errors name the file, line and field."""

from __future__ import annotations

import copy
import fnmatch
import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

SUITES_DIR = Path(__file__).resolve().parent.parent / "suites"

Claim = Literal["matches_kernel", "at_chance", "beats_kernel", "additive", "slope_below_one", "ordered"]
_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:+-]*$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Linspace(_Strict):
    """`{linspace: [start, stop, num]}`: evenly spaced sweep values (numpy.linspace)."""

    linspace: tuple[float, float, int]


class Geomspace(_Strict):
    """`{geomspace: [start, stop, num]}`: log-spaced sweep values (numpy.geomspace)."""

    geomspace: tuple[float, float, int]


SweepValues = list[Any] | Linspace | Geomspace


class TaskEntry(_Strict):
    """One task of a suite: a family with its parameters and an input encoding."""

    id: str = Field(pattern=_ID_PATTERN)
    family: str
    params: dict[str, Any] = Field(default_factory=dict)
    encoding: str | dict[str, Any] = Field(
        default="onehot", description="an encoding name, or {name: ..., <encoding params>}"
    )
    description: str = ""

    @property
    def encoding_name(self) -> str:
        """The encoding's registered name."""
        return self.encoding if isinstance(self.encoding, str) else str(self.encoding.get("name", ""))

    @property
    def encoding_params(self) -> dict[str, Any]:
        """The encoding's parameters (everything but its name)."""
        return {} if isinstance(self.encoding, str) else {k: v for k, v in self.encoding.items() if k != "name"}


class ModelEntry(_Strict):
    """One model (or a sweep of models) of a suite: an adapter with parameters."""

    id: str = Field(pattern=_ID_PATTERN)
    adapter: str
    params: dict[str, Any] = Field(default_factory=dict)
    sweep: dict[str, SweepValues] = Field(
        default_factory=dict, description="grid over params: dotted path -> values (product)"
    )
    tasks: list[str] = Field(default_factory=lambda: ["*"], description="task id patterns to run on")
    seeds: int | list[int] | None = None
    skip_invalid: bool = Field(
        default=False, description="drop sweep members whose model is invalid for a task (non-PSD kernel)"
    )
    description: str = ""


class Expectation(_Strict):
    """A claim of the theory as data, checked on the scored records."""

    id: str | None = None
    claim: Claim
    models: list[str] = Field(min_length=1)
    tasks: list[str] = Field(min_length=1)
    tolerance: float | None = Field(default=None, ge=0)
    max_abs_diff: float | None = Field(default=None, ge=0)
    metric: str | None = None
    over: Literal["tasks", "models"] = "tasks"
    statistic: Literal["mean", "count_perfect"] = "mean"
    description: str = ""


class Profile(_Strict):
    """Named overrides (e.g. `full` for GPU runs): seeds and per-model params."""

    description: str = ""
    seeds: int | list[int] | None = None
    params: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="model id -> params merged over that model's params"
    )


class Suite(_Strict):
    """A benchmark suite: tasks × models × seeds, plus expectations."""

    name: str = Field(pattern=_ID_PATTERN)
    description: str = ""
    seeds: int | list[int] = 3
    tasks: list[TaskEntry] = Field(min_length=1)
    models: list[ModelEntry] = Field(min_length=1)
    expectations: list[Expectation] = Field(default_factory=list)
    profiles: dict[str, Profile] = Field(default_factory=dict)

    @field_validator("seeds")
    @classmethod
    def _positive_seeds(cls, v: int | list[int]) -> int | list[int]:
        if isinstance(v, int) and v < 1:
            raise ValueError("seeds must be ≥ 1 (a count) or a list of seed integers")
        if isinstance(v, list) and (not v or len(set(v)) != len(v)):
            raise ValueError("seed list must be non-empty and without repeats")
        return v


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


@dataclass
class LoadedSuite:
    """A validated suite: the schema object, its source, and the expanded models."""

    suite: Suite
    path: Path | None
    models: list[ModelSpec] = field(default_factory=list)

    @property
    def name(self) -> str:
        """The suite's name."""
        return self.suite.name

    def tasks_for(self, model: ModelSpec) -> list[TaskEntry]:
        """The suite's tasks this model runs on."""
        return [t for t in self.suite.tasks if matches(t.id, model.task_patterns)]


@dataclass(frozen=True)
class SuiteIssue:
    """One problem in a suite file, located by line and field path."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: {self.field}: {self.message}" if self.field else f"{where}: {self.message}"


class SuiteError(ValueError):
    """A suite failed to load or validate; `issues` lists every problem found."""

    def __init__(self, issues: list[SuiteIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


def matches(name: str, patterns: tuple[str, ...] | list[str], group: str | None = None) -> bool:
    """Whether an id (or its sweep group) matches any fnmatch pattern."""
    return any(
        fnmatch.fnmatchcase(name, p) or (group is not None and fnmatch.fnmatchcase(group, p))
        for p in patterns
    )


def _format_loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _LineMap:
    """Line numbers of every key/item of a YAML document, by path."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.lines: dict[tuple[Any, ...], int] = {}

    def record(self, node: yaml.Node, path: tuple[Any, ...]) -> None:
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = key_node.value
                if isinstance(key_node, yaml.ScalarNode) and key_node.tag.endswith(":int"):
                    key = int(key)
                self.lines[path + (key,)] = key_node.start_mark.line + 1
                self.record(value_node, path + (key,))
        elif isinstance(node, yaml.SequenceNode):
            for i, item in enumerate(node.value):
                self.record(item, path + (i,))

    def line(self, loc: tuple[Any, ...]) -> int | None:
        for n in range(len(loc), -1, -1):
            if tuple(loc[:n]) in self.lines:
                return self.lines[tuple(loc[:n])]
        return None

    def issue(self, loc: tuple[Any, ...], message: str) -> SuiteIssue:
        return SuiteIssue(self.file, self.line(loc), _format_loc(loc), message)


def _parse_yaml(text: str, file: str) -> tuple[Any, _LineMap]:
    lines = _LineMap(file)
    loader = None
    try:
        loader = yaml.SafeLoader(text)
        node = loader.get_single_node()
        if node is None:
            raise SuiteError([SuiteIssue(file, None, "", "the file is empty")])
        lines.record(node, ())
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        msg = " ".join(str(p) for p in (exc.context, exc.problem) if p)
        raise SuiteError([SuiteIssue(file, mark.line + 1 if mark else None, "", f"invalid YAML: {msg}")]) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise SuiteError([SuiteIssue(file, line, "", f"invalid YAML: {exc.reason} (character {exc.character!r})")]) from None
    except yaml.YAMLError as exc:
        raise SuiteError([SuiteIssue(file, None, "", f"invalid YAML: {exc}")]) from None
    except RecursionError:
        raise SuiteError([SuiteIssue(file, None, "", "invalid YAML: nested too deeply")]) from None
    finally:
        if loader is not None:
            loader.dispose()
    return data, lines


def _validation_issues(exc: ValidationError, lines: _LineMap, prefix: tuple[Any, ...]) -> list[SuiteIssue]:
    out = []
    for err in exc.errors():
        # pydantic inserts union-member tags (e.g. 'list[int]') into loc; keep only real keys,
        # plus a missing field's own name.
        loc = prefix
        parts = err["loc"]
        for j, part in enumerate(parts):
            if isinstance(part, int) or loc + (part,) in lines.lines or (j == len(parts) - 1 and err["type"] == "missing"):
                loc = loc + (part,)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = f"unknown field {parts[-1]!r}"
        out.append(lines.issue(loc, msg))
    return out


def sweep_values(spec: SweepValues) -> list[Any]:
    """The concrete values of a sweep axis."""
    if isinstance(spec, Linspace):
        return [float(v) for v in np.linspace(*spec.linspace[:2], spec.linspace[2])]
    if isinstance(spec, Geomspace):
        return [float(v) for v in np.geomspace(*spec.geomspace[:2], spec.geomspace[2])]
    return list(spec)


def _set_path(params: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    target: Any = params
    for i, part in enumerate(parts):
        key: Any = int(part) if part.isdigit() else part
        last = i == len(parts) - 1
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


def _fmt(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def _seed_list(seeds: int | list[int]) -> tuple[int, ...]:
    return tuple(range(seeds)) if isinstance(seeds, int) else tuple(seeds)


def _expand_model(
    i: int, entry: ModelEntry, suite_seeds: tuple[int, ...], lines: _LineMap, issues: list[SuiteIssue]
) -> list[ModelSpec]:
    from compbench.adapters import UnknownAdapterError, get_adapter

    try:
        adapter = get_adapter(entry.adapter)
    except UnknownAdapterError as exc:
        issues.append(lines.issue(("models", i, "adapter"), str(exc)))
        return []
    axes = {k: sweep_values(v) for k, v in entry.sweep.items()}
    for key, vals in axes.items():
        if not vals:
            issues.append(lines.issue(("models", i, "sweep", key), "sweep axis has no values"))
            return []
    seeds = _seed_list(entry.seeds) if entry.seeds is not None else suite_seeds
    if adapter.deterministic:
        seeds = seeds[:1]  # a deterministic model gives the same result for every seed
    specs: list[ModelSpec] = []
    for combo in itertools.product(*axes.values()) if axes else [()]:
        raw = copy.deepcopy(entry.params)
        values = dict(zip(axes, combo))
        for key, value in values.items():
            try:
                _set_path(raw, key, value)
            except KeyError as exc:
                issues.append(lines.issue(("models", i, "sweep", key), f"cannot set sweep path: {exc.args[0]}"))
                return []
        try:
            params = adapter.Params.model_validate(raw)
        except ValidationError as exc:
            issues.extend(_validation_issues(exc, lines, ("models", i, "params")))
            return []
        member_id = entry.id if not values else f"{entry.id}[{','.join(f'{k}={_fmt(v)}' for k, v in values.items())}]"
        specs.append(
            ModelSpec(member_id, entry.id, entry.adapter, params, raw, values, tuple(entry.tasks), seeds, entry.skip_invalid)
        )
    return specs


def _check_tasks(suite: Suite, lines: _LineMap, issues: list[SuiteIssue]) -> None:
    from compbench.encodings import ENCODINGS
    from compbench.tasks import TaskParamError, UnknownFamilyError, family_params_model, make_task

    for i, task in enumerate(suite.tasks):
        try:
            model = family_params_model(task.family)
        except UnknownFamilyError as exc:
            issues.append(lines.issue(("tasks", i, "family"), str(exc)))
            continue
        try:
            model.model_validate(task.params)
        except ValidationError as exc:
            issues.extend(_validation_issues(exc, lines, ("tasks", i, "params")))
            continue
        try:
            make_task(task.family, **task.params)
        except TaskParamError as exc:
            issues.append(lines.issue(("tasks", i, "params", *exc.loc), exc.message))
        except (ValueError, TypeError) as exc:
            issues.append(lines.issue(("tasks", i, "params"), f"invalid task: {exc}"))
        if task.encoding_name not in ENCODINGS:
            issues.append(
                lines.issue(
                    ("tasks", i, "encoding"),
                    f"unknown encoding {task.encoding_name!r}; known: {', '.join(sorted(ENCODINGS))}",
                )
            )
            continue
        params_model = getattr(ENCODINGS[task.encoding_name], "params_model", None)
        if params_model is not None:
            try:
                params_model.model_validate(task.encoding_params)
            except ValidationError as exc:
                issues.extend(_validation_issues(exc, lines, ("tasks", i, "encoding")))
        elif task.encoding_params:
            issues.append(
                lines.issue(("tasks", i, "encoding"), f"encoding {task.encoding_name!r} takes no parameters, got {sorted(task.encoding_params)}")
            )


def _check_unique(kind: str, ids: list[str], lines: _LineMap, issues: list[SuiteIssue]) -> None:
    seen: set[str] = set()
    for i, name in enumerate(ids):
        if name in seen:
            issues.append(lines.issue((kind, i, "id"), f"duplicate id {name!r}"))
        seen.add(name)


_ORDERED_METRICS = {
    "heldout_acc", "heldout_r2", "heldout_mse", "slope", "additivity", "theory_r2", "theory_acc", "separation",
}


def _check_expectations(loaded: LoadedSuite, lines: _LineMap, issues: list[SuiteIssue]) -> None:
    task_ids = [t.id for t in loaded.suite.tasks]
    for i, exp in enumerate(loaded.suite.expectations):
        for j, pat in enumerate(exp.models):
            if not any(matches(m.id, [pat], m.group) for m in loaded.models):
                issues.append(lines.issue(("expectations", i, "models", j), f"pattern {pat!r} matches no model"))
        for j, pat in enumerate(exp.tasks):
            if not any(fnmatch.fnmatchcase(t, pat) for t in task_ids):
                issues.append(lines.issue(("expectations", i, "tasks", j), f"pattern {pat!r} matches no task"))
        if exp.claim == "ordered":
            ordered = exp.tasks if exp.over == "tasks" else exp.models
            if len(ordered) < 2:
                issues.append(lines.issue(("expectations", i, exp.over), "'ordered' needs at least 2 entries, in decreasing order"))
            if exp.metric is None or exp.metric not in _ORDERED_METRICS:
                issues.append(
                    lines.issue(("expectations", i, "metric"), f"'ordered' needs a metric, one of {', '.join(sorted(_ORDERED_METRICS))}")
                )


def resolve_suite_path(name_or_path: str | Path) -> Path:
    """A suite name (looked up in suites/) or a path to a YAML file."""
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    return SUITES_DIR / f"{name_or_path}.yaml"


def _apply_profile(data: dict[str, Any], name: str, lines: _LineMap) -> None:
    profiles = data.get("profiles") or {}
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise SuiteError([lines.issue(("profiles",), f"no profile {name!r} in this suite (profiles: {known})")])
    profile = Profile.model_validate(profiles[name])
    if profile.seeds is not None:
        data["seeds"] = profile.seeds
    ids = [m.get("id") for m in data.get("models", []) if isinstance(m, dict)]
    for model_id, overrides in profile.params.items():
        if model_id not in ids:
            raise SuiteError([lines.issue(("profiles", name, "params", model_id), f"profile names unknown model {model_id!r}")])
        entry = data["models"][ids.index(model_id)]
        entry["params"] = {**(entry.get("params") or {}), **overrides}


def parse_suite(
    text: str, file: str = "<string>", path: Path | None = None, profile: str | None = None
) -> LoadedSuite:
    """Validate suite YAML text completely (schema, tasks, adapters, sweeps, expectations)."""
    data, lines = _parse_yaml(text, file)
    if not isinstance(data, dict):
        raise SuiteError([SuiteIssue(file, 1, "", "a suite must be a YAML mapping (name:, tasks:, models:, ...)")])
    try:
        suite = Suite.model_validate(data)
        if profile is not None:
            _apply_profile(data, profile, lines)
            suite = Suite.model_validate(data)
    except ValidationError as exc:
        raise SuiteError(_validation_issues(exc, lines, ())) from None
    issues: list[SuiteIssue] = []
    _check_unique("tasks", [t.id for t in suite.tasks], lines, issues)
    _check_unique("models", [m.id for m in suite.models], lines, issues)
    _check_tasks(suite, lines, issues)
    loaded = LoadedSuite(suite, path)
    suite_seeds = _seed_list(suite.seeds)
    for i, entry in enumerate(suite.models):
        loaded.models.extend(_expand_model(i, entry, suite_seeds, lines, issues))
        if not any(matches(t.id, entry.tasks) for t in suite.tasks):
            issues.append(lines.issue(("models", i, "tasks"), f"patterns {entry.tasks} match no task of the suite"))
    if not issues:
        _check_expectations(loaded, lines, issues)
    if issues:
        raise SuiteError(issues)
    return loaded


def load_suite(name_or_path: str | Path, profile: str | None = None) -> LoadedSuite:
    """Load and fully validate a suite by name (suites/NAME.yaml) or path, optionally with a profile."""
    path = resolve_suite_path(name_or_path)
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in SUITES_DIR.glob("*.yaml"))) or "none"
        raise SuiteError([SuiteIssue(str(path), None, "", f"no such suite file (bundled suites: {known})")])
    return parse_suite(path.read_text(encoding="utf-8"), str(path), path, profile)


def seeds_override(loaded: LoadedSuite, n: int, start: int = 0) -> None:
    """Replace every non-deterministic model's seeds by start..start+n-1 (CLI --seeds)."""
    from compbench.adapters import get_adapter

    loaded.models = [
        ModelSpec(
            m.id, m.group, m.adapter, m.params, m.raw_params, m.sweep_values, m.task_patterns,
            (start,) if get_adapter(m.adapter).deterministic else tuple(range(start, start + n)), m.skip_invalid,
        )
        for m in loaded.models
    ]


def add_adapter_models(loaded: LoadedSuite, patterns: list[str]) -> list[str]:
    """Add a default-parameter model, on every task, for each pattern that is an adapter's name but
    no model of the suite (`compbench run --suite S --model my-arch`); returns the names added.

    Raises SuiteError when such an adapter cannot be built from its defaults alone.
    """
    from compbench.adapters import UnknownAdapterError, adapter_names, get_adapter

    added = []
    known = set(adapter_names())
    for name in patterns:
        if any(matches(m.id, [name], m.group) for m in loaded.models):
            continue
        if name not in known and not name.startswith("timm:"):
            continue
        try:
            adapter = get_adapter(name)
        except UnknownAdapterError as exc:
            raise SuiteError([SuiteIssue(str(loaded.path or loaded.name), None, "--model", str(exc))]) from None
        try:
            params = adapter.Params.model_validate({})
        except ValidationError as exc:
            msgs = "; ".join(f"{_format_loc(e['loc'])}: {e['msg']}" for e in exc.errors())
            raise SuiteError([SuiteIssue(
                str(loaded.path or loaded.name), None, "--model",
                f"adapter {name!r} has no usable defaults ({msgs}); add it with params to a copy of the suite",
            )]) from None
        seeds = _seed_list(loaded.suite.seeds)
        loaded.models.append(
            ModelSpec(name, name, name, params, {}, {}, ("*",), seeds[:1] if adapter.deterministic else seeds, False)
        )
        added.append(name)
    return added
