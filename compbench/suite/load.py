"""Loading a suite: parse, validate completely (tasks, encodings, adapters, sweeps, claims), expand."""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from compbench.limits import SUITE_FILE_BYTES, TooLargeError, check_task_bytes, limits
from compbench.records.metric_facts import metric_allowed
from compbench.suite.expand import MemberIndex, ModelSpec, expand_model, matches, seed_list, sweep_size, sweep_too_large
from compbench.suite.schema import Expectation, Profile, Suite, TaskEntry
from compbench.suite.source import (
    LineMap, SuiteError, SuiteIssue, check_size, decode_suite, parse_yaml, validation_issues,
)

# The bundled suites and their baselines live once, in the repository's top-level suites/ and
# baselines/. A wheel carries them as compbench/_bundled/<kind>/ (setup.py maps the folders into the
# package); an editable install or a source checkout on PYTHONPATH has no such folder and reads the
# repository's. Every lookup of a bundled file goes through bundled_dir, so both installs agree.
BUNDLED_KINDS = ("suites", "baselines")


def bundled_dir(kind: str) -> Path:
    """The folder of the bundled `suites` or `baselines`: the installed wheel's copy, else the source checkout's."""
    import importlib.resources

    if kind not in BUNDLED_KINDS:
        raise ValueError(f"no bundled {kind!r}: one of {', '.join(BUNDLED_KINDS)}")
    # Callers glob and open these as files; compbench is never imported from a zip, so the package's
    # resources are a folder on disk (a pathlib.Path).
    packaged = importlib.resources.files("compbench") / "_bundled" / kind
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged
    root = Path(__file__).resolve().parents[2]
    # Only a compbench checkout counts: for an installed package this is site-packages, where a
    # folder of that name would belong to something else.
    checkout = root / kind
    if (root / "pyproject.toml").is_file() and (root / "compbench").is_dir() and checkout.is_dir():
        return checkout
    raise FileNotFoundError(f"no bundled {kind}: neither {packaged} (an installed wheel) nor {checkout} "
                            f"(a source checkout, next to pyproject.toml) is a folder")


def bundled_suites() -> list[str]:
    """The names of the bundled suites (FileNotFoundError, saying where it looked, when there is no folder)."""
    return sorted(p.stem for p in bundled_dir("suites").glob("*.yaml"))


@dataclass(frozen=True)
class LoadedSuite:
    """A validated suite: the schema object, its source, the expanded models, each task's kind.

    Frozen: every change (`select`, `with_added`, `with_seeds`) returns a new suite, so a caller's suite
    (one given to `compbench.evaluate`, a pytest plugin's) is never altered by a run over it.
    """

    suite: Suite
    path: Path | None
    models: list[ModelSpec] = field(default_factory=list)
    task_kinds: dict[str, str] = field(default_factory=dict)
    _tasks_for: dict[tuple, list[TaskEntry]] = field(default_factory=dict, repr=False, compare=False)

    @property
    def name(self) -> str:
        """The suite's name."""
        return self.suite.name

    def tasks_for(self, model: ModelSpec) -> list[TaskEntry]:
        """The suite's tasks this model runs on."""
        # Asked for every model (thousands in a sweep) by validation, the runner and the report;
        # the members of a sweep share their patterns. Keyed by the task objects themselves.
        key = (model.task_patterns, tuple(map(id, self.suite.tasks)))
        hit = self._tasks_for.get(key)
        if hit is None:
            hit = self._tasks_for[key] = [t for t in self.suite.tasks if matches(t.id, model.task_patterns)]
        return list(hit)

    def copy(self, **changes: Any) -> LoadedSuite:
        """A copy with `changes` (e.g. `models=`) whose `models` list and `Suite` are its own (a shallow copy: they
        are reassigned, never changed in place): how every function that alters a suite (adds models, sets seeds,
        narrows it) leaves its caller's as it was."""
        return replace(self, **{"suite": self.suite.model_copy(), "models": list(self.models), **changes}, _tasks_for={})

    @property
    def tags(self) -> dict[str, set[str]]:
        """Model id → its tags (the adapter's and the suite's), for `@tag` patterns."""
        return {m.id: set(m.tags) for m in self.models}

    def select(self, model_patterns: list[str] | None = None, task_patterns: list[str] | None = None) -> LoadedSuite:
        """A copy narrowed to the models and tasks whose ids match the patterns (globs; None or [] keeps all)."""
        models = [m for m in self.models if matches(m.id, model_patterns, m.group)] if model_patterns else list(self.models)
        suite = self.suite.model_copy(update={"tasks": [t for t in self.suite.tasks if matches(t.id, task_patterns)]}) \
            if task_patterns else self.suite.model_copy()
        return self.copy(suite=suite, models=models)

    def with_added(self, patterns: list[Any], model_args: dict[str, Any] | None = None,
                   tags: list[str] | tuple[str, ...] = ()) -> tuple[LoadedSuite, dict[str, str]]:
        """A copy with the models `patterns` add (`add_adapter_models`), and {pattern as given: id added}."""
        from compbench.suite.edit import add_adapter_models

        return add_adapter_models(self, patterns, model_args, tags)

    def with_seeds(self, n: int, start: int = 0) -> LoadedSuite:
        """A copy whose non-deterministic models run seeds start..start+n-1, deterministic ones seed start alone."""
        from compbench.suite.edit import seeds_override

        return seeds_override(self, n, start)


def _check_tasks(suite: Suite, lines: LineMap, issues: list[SuiteIssue]) -> dict[str, tuple[str, str]]:
    """Validate every task; returns task id → (kind, input kind its encoding produces)."""
    from compbench.encodings import UnknownEncodingError, get_encoding
    from compbench.tasks import TaskParamError, UnknownFamilyError, family_params_model, make_task

    out: dict[str, tuple[str, str]] = {}
    for i, task in enumerate(suite.tasks):
        try:
            model = family_params_model(task.family)
        except UnknownFamilyError as exc:
            issues.append(lines.issue(("tasks", i, "family"), str(exc)))
            continue
        try:
            model.model_validate(task.params)
        except ValidationError as exc:
            issues.extend(validation_issues(exc, lines, ("tasks", i, "params")))
            continue
        data = None
        try:
            data = make_task(task.family, **task.params)
        except TaskParamError as exc:
            issues.append(lines.issue(("tasks", i, "params", *exc.loc), exc.message))
        except TooLargeError as exc:
            issues.append(lines.issue(("tasks", i, "params"), str(exc)))
        except Exception as exc:  # noqa: BLE001 — a plugin family may raise anything; report it, never a traceback
            issues.append(lines.issue(("tasks", i, "params"), f"invalid task: {type(exc).__name__}: {exc}"
                                      if not isinstance(exc, (ValueError, TypeError)) else f"invalid task: {exc}"))
        try:
            enc = get_encoding(task.encoding_name)
        except UnknownEncodingError as exc:
            issues.append(lines.issue(("tasks", i, "encoding"), str(exc)))
            continue
        if enc.params_model is not None:
            try:
                params = enc.params_model.model_validate(task.encoding_params)
            except ValidationError as exc:
                issues.extend(validation_issues(exc, lines, ("tasks", i, "encoding")))
                continue
            per_cell = max(int(getattr(params, "samples_per_cell", 1) or 1), int(getattr(params, "eval_samples_per_cell", 0) or 0))
            if data is not None and per_cell * len(data.cells) > limits().samples_per_task:
                issues.append(lines.issue(("tasks", i, "encoding"), str(TooLargeError(
                    f"{len(data.cells)} cells × {per_cell} samples per cell", per_cell * len(data.cells),
                    limits().samples_per_task, "--max-cells"))))
            count = getattr(params, "input_images", None)  # an image encoding sizes what it will render
            if data is not None and count is not None:
                try:
                    check_task_bytes(f"the {task.encoding_name} encoding's inputs", *count(data))
                except TooLargeError as exc:
                    issues.append(lines.issue(("tasks", i, "encoding"), str(exc)))
        elif task.encoding_params:
            issues.append(lines.issue(("tasks", i, "encoding"), f"encoding {task.encoding_name!r} takes no parameters, got {sorted(task.encoding_params)}"))
        if data is not None:
            out[task.id] = (data.kind, enc.produces)
    return out


def _check_unique(kind: str, ids: list[str], lines: LineMap, issues: list[SuiteIssue]) -> None:
    seen: set[str] = set()
    for i, name in enumerate(ids):
        if name in seen:
            issues.append(lines.issue((kind, i, "id"), f"duplicate id {name!r}"))
        seen.add(name)


def _check_inputs(loaded: LoadedSuite, kinds: dict[str, tuple[str, str]], lines: LineMap, issues: list[SuiteIssue]) -> None:
    """An adapter that cannot take a task's inputs (a convnet on one-hot vectors) is a validation error."""
    from compbench.adapters import get_adapter

    index = {e.id: i for i, e in enumerate(loaded.suite.models)}
    wrong: dict[str, list[str]] = {}
    adapters: dict[str, str] = {}  # group → the adapter its members name (a reference's registered name)
    # A sweep's members share their entry's adapter and tasks: each group is checked once, not each of its members.
    for m in loaded.models:
        if m.group in adapters:
            continue
        adapters[m.group] = m.adapter
        accepts = get_adapter(m.adapter).inputs
        for t in loaded.tasks_for(m):
            produces = kinds.get(t.id, (None, None))[1]
            if produces is not None and produces not in accepts and t.id not in wrong.setdefault(m.group, []):
                wrong[m.group].append(t.id)
    _check_objectives(loaded, kinds, lines, issues)
    for group, tasks in wrong.items():
        if tasks:
            entry = loaded.suite.models[index[group]]
            accepts = get_adapter(adapters[group]).inputs
            issues.append(lines.issue(("models", index[group], "adapter"),
                                      f"adapter {entry.adapter!r} takes {' or '.join(accepts)} inputs, but task(s) "
                                      f"{', '.join(repr(t) for t in tasks)} have other inputs (their encodings); limit the model's `tasks:`"))


def _check_objectives(loaded: LoadedSuite, kinds: dict[str, tuple[str, str]], lines: LineMap, issues: list[SuiteIssue]) -> None:
    """A max-margin (SVM) model or theory needs ±1 targets: on a regression task it cannot run."""
    from compbench.adapters import get_adapter
    from compbench.adapters.base import theory_options_of
    from compbench.losses import CLASS_LOSSES, loss_problem

    index = {e.id: i for i, e in enumerate(loaded.suite.models)}
    reported: set[str] = set()
    # Which of a group's tasks an SVM objective cannot run on (its members share their tasks): when none, no member's
    # objective can be wrong, and thousands of sweep members are not each built to be asked for theirs.
    targets_not_pm1: dict[str, list[str]] = {}
    for m in loaded.models:
        if m.group in reported:
            continue
        if m.group not in targets_not_pm1:
            targets_not_pm1[m.group] = [t.id for t in loaded.tasks_for(m)
                                        if kinds.get(t.id, (None, None))[0] in ("regression", "multiclass")]
        if getattr(m.params, "loss", None) not in CLASS_LOSSES and not targets_not_pm1[m.group]:
            continue
        try:
            objective = theory_options_of(get_adapter(m.adapter)(m.params), m.adapter).objective
        except Exception:  # noqa: BLE001 — a plugin's theory_options is checked per cell at run time
            continue
        loss = getattr(m.params, "loss", None)
        if loss in CLASS_LOSSES:
            scalar = [t.id for t in loaded.tasks_for(m) if loss_problem(loss, kinds.get(t.id, ("multiclass", None))[0])]
            if scalar:
                reported.add(m.group)
                issues.append(lines.issue(("models", index[m.group], "params"),
                                          f"loss: {loss} needs a multiclass task, but task(s) {', '.join(repr(t) for t in scalar)} "
                                          "are not; use loss: mse / logistic, or limit the model's `tasks:`"))
            continue
        if objective != "svm":
            continue
        regression = targets_not_pm1[m.group]
        if regression:
            reported.add(m.group)
            what = "loss: logistic" if "loss" in type(m.params).model_fields else "objective: svm"
            issues.append(lines.issue(("models", index[m.group], "params"),
                                      f"{what} trains a max-margin model that needs ±1 targets, but task(s) "
                                      f"{', '.join(repr(t) for t in regression)} are regression or multiclass; use loss: mse / a "
                                      "regression objective, or limit the model's `tasks:`"))


def _check_expectations(loaded: LoadedSuite, kinds: dict[str, tuple[str, str]], lines: LineMap, issues: list[SuiteIssue]) -> None:
    from compbench.claims import CLAIMS
    from compbench.registry import UnknownNameError

    task_ids = [t.id for t in loaded.suite.tasks]
    known_tags = _all_tags(loaded) | adapter_tags()
    members = MemberIndex.of_models(loaded.models)  # patterns matched per sweep group, not per member
    heads: dict[str, ModelSpec] = {}  # group → its first member: a group's members run the same tasks
    for m in loaded.models:
        heads.setdefault(m.group, m)
    for i, exp in enumerate(loaded.suite.expectations):
        if exp.source is None:
            issues.append(lines.issue(("expectations", i), "names no source: add `source: {paper, where, value, threshold}` "
                                      "(the paper, its figure or table, the number it reports, and how the threshold "
                                      "follows from it) or `source: \"compbench: <how the threshold follows from the "
                                      "theory>\"`; a threshold is never what one run happened to measure"))
        _check_known_failures(loaded, members, known_tags, exp, i, lines, issues)
        try:
            claim = CLAIMS.get(exp.claim)
        except UnknownNameError as exc:
            issues.append(lines.issue(("expectations", i, "claim"), str(exc)))
            continue
        try:
            params = claim.Params.model_validate(exp.claim_options())
        except ValidationError as exc:
            for issue in validation_issues(exc, lines, ("expectations", i)):
                msg = issue.message
                if msg.startswith("unknown field"):
                    msg += f": claim {exp.claim!r} takes {', '.join(claim.Params.model_fields) or 'no parameters'}"
                issues.append(SuiteIssue(issue.file, issue.line, issue.field, msg))
            continue
        exp._params = params
        metric = getattr(params, "metric", None)
        if metric is not None and claim.metrics is not None and not metric_allowed(metric, claim.metrics):
            issues.append(lines.issue(("expectations", i, "metric"),
                                      f"claim {exp.claim!r} does not use metric {metric!r}; one of {', '.join(claim.metrics)}"))
        for fld, msg in claim.validate(params, exp):
            issues.append(lines.issue(("expectations", i, fld), msg))
        every_selector_matches = True
        for j, pat in enumerate(exp.models):
            if members.selected([pat]):
                continue
            every_selector_matches = False
            if not pat.startswith("@"):
                issues.append(lines.issue(("expectations", i, "models", j), f"pattern {pat!r} matches no model"))
            elif pat[1:] not in known_tags:
                # A typo (`@kernal`) must not validate into "expectations 0/0 pass". A tag some adapter
                # declares (`@networks` in a suite of kernels) is for the models users add with --model.
                issues.append(lines.issue(("expectations", i, "models", j), f"tag {pat[1:]!r} is on no model of the "
                                          f"suite and no adapter declares it (tags: {', '.join(sorted(known_tags))})"))
        task_hit = {t for t in task_ids if any(fnmatch.fnmatchcase(t, p) for p in exp.tasks)}
        if every_selector_matches and task_hit and not any(t.id in task_hit for g in members.selected(exp.models)
                                                           for t in loaded.tasks_for(heads[g])):
            issues.append(lines.issue(("expectations", i), f"selects no (model, task) pair the suite runs: models "
                                      f"{', '.join(exp.models)} do not run on tasks {', '.join(exp.tasks)} (see each model's `tasks:`)"))
        for j, pat in enumerate(exp.tasks):
            hit = [t for t in task_ids if fnmatch.fnmatchcase(t, pat)]
            if not hit:
                issues.append(lines.issue(("expectations", i, "tasks", j), f"pattern {pat!r} matches no task"))
            for t in hit:
                kind = kinds.get(t, (None, None))[0]
                if kind is not None and kind not in claim.kinds:
                    issues.append(lines.issue(("expectations", i, "tasks", j),
                                              f"claim {exp.claim!r} applies to {' and '.join(claim.kinds)} tasks; task {t!r} is {kind}"))
                    break


def _check_known_failures(loaded: LoadedSuite, members: MemberIndex, known_tags: set[str], exp: Any, i: int,
                          lines: LineMap, issues: list[SuiteIssue]) -> None:
    """A known failure's scope names profiles, models and tasks the suite has, inside the expectation's own selection."""
    from compbench.suite.schema import DEFAULT_PROFILE

    profiles = {DEFAULT_PROFILE, *loaded.suite.profiles}
    task_ids = [t.id for t in loaded.suite.tasks]
    for k, kf in enumerate(exp.known_failure):
        at = ("expectations", i, "known_failure", k)
        for j, name in enumerate(kf.profiles):
            if name not in profiles:
                issues.append(lines.issue((*at, "profiles", j), f"profile {name!r} is not one of the suite's "
                                          f"({', '.join(sorted(profiles))}; {DEFAULT_PROFILE!r} is a run without --profile)"))
        for j, pat in enumerate(kf.models):
            if pat.startswith("@"):
                if pat[1:] not in known_tags:
                    issues.append(lines.issue((*at, "models", j), f"tag {pat[1:]!r} is on no model of the suite and no adapter declares it"))
            elif not members.selected([pat]):
                issues.append(lines.issue((*at, "models", j), f"pattern {pat!r} matches no model"))
        for j, pat in enumerate(kf.tasks):
            hit = [t for t in task_ids if fnmatch.fnmatchcase(t, pat)]
            if not hit:
                issues.append(lines.issue((*at, "tasks", j), f"pattern {pat!r} matches no task"))
            elif not any(fnmatch.fnmatchcase(t, p) for t in hit for p in exp.tasks):
                issues.append(lines.issue((*at, "tasks", j), f"pattern {pat!r} selects no task of the expectation "
                                          f"({', '.join(exp.tasks)}): a known failure is scoped inside its claim"))


def _all_tags(loaded: LoadedSuite) -> set[str]:
    return {t for m in loaded.models for t in m.tags}


def adapter_tags() -> set[str]:
    """Every tag a registered adapter declares (built-in and plugins)."""
    from compbench.adapters import ADAPTERS

    return {t for e in ADAPTERS.entries() for t in (getattr(e.obj, "tags", ()) or ())}


def resolve_suite_path(name_or_path: str | Path) -> Path:
    """A path is a path; a bare name (no directory, no .yaml) is a bundled suite (see resolve_bundled)."""
    return resolve_bundled("suites", name_or_path, "--suite")


_BUNDLED_SUFFIX = {"suites": (".yaml", ".yml"), "baselines": (".json",)}


def resolve_bundled(kind: str, name_or_path: str | Path, flag: str) -> Path:
    """A path is a path; a bare name (no directory, no suffix) is a bundled suite or baseline.

    The one rule of `--suite NAME` and `--baseline NAME`: a bare name that `./<kind>/NAME<suffix>`
    would also answer, with another file than the bundled one, is an error naming both: a user's
    copy must never be shadowed, or used, silently.
    """
    p = Path(name_or_path)
    text = str(name_or_path)
    suffixes = _BUNDLED_SUFFIX[kind]
    what = kind[:-1]
    if isinstance(name_or_path, Path) or p.suffix in suffixes or "/" in text or "\\" in text or p.is_file():
        return p
    try:
        bundled = bundled_dir(kind) / f"{text}{suffixes[0]}"
    except FileNotFoundError as exc:
        raise SuiteError([SuiteIssue(text, None, flag, f"{exc}; give the {what} file's path")]) from None
    local = Path(kind) / f"{text}{suffixes[0]}"
    if local.is_file() and bundled.is_file() and local.resolve() != bundled.resolve():
        raise SuiteError([SuiteIssue(text, None, flag, f"{text!r} names the bundled {what} {bundled} and also "
                                     f"{local.resolve()} in this directory; give a path to choose ({local} for yours)")])
    if local.is_file() and not bundled.is_file():
        raise SuiteError([SuiteIssue(text, None, flag, f"no bundled {what} {text!r}; to {'run' if kind == 'suites' else 'use'} {local}, give its path")])
    return bundled


def _apply_profile(data: dict[str, Any], name: str, lines: LineMap) -> None:
    profiles = data.get("profiles") or {}
    if name not in profiles:
        known = ", ".join(sorted(profiles)) or "none"
        raise SuiteError([lines.issue(("profiles",), f"no profile {name!r} in this suite (profiles: {known})")])
    profile = Profile.model_validate(profiles[name])
    if profile.seeds is not None:
        data["seeds"] = profile.seeds
    for section, field, what, by_id in (("models", "params", "model", profile.params), ("tasks", "task_params", "task", profile.task_params)):
        entries = [e for e in data.get(section, []) if isinstance(e, dict)]
        ids = [e.get("id") for e in entries]
        for entry_id, overrides in by_id.items():
            if entry_id not in ids:
                raise SuiteError([lines.issue(("profiles", name, field, entry_id), f"profile names unknown {what} {entry_id!r}")])
            entry = entries[ids.index(entry_id)]
            entry["params"] = {**(entry.get("params") or {}), **overrides}
    tasks = [e for e in data.get("tasks", []) if isinstance(e, dict)]
    ids = [e.get("id") for e in tasks]
    for task_id, overrides in profile.encodings.items():
        if task_id != "*" and task_id not in ids:
            raise SuiteError([lines.issue(("profiles", name, "encodings", task_id), f"profile names unknown task {task_id!r}")])
        for entry in tasks if task_id == "*" else [tasks[ids.index(task_id)]]:
            encoding = entry.get("encoding", "onehot")
            base = {"name": encoding} if isinstance(encoding, str) else dict(encoding or {})
            entry["encoding"] = {**base, **overrides}


def parse_suite(
    text: str | bytes, file: str = "<string>", path: Path | None = None, profile: str | None = None
) -> LoadedSuite:
    """Validate suite YAML (text or raw bytes) completely (schema, tasks, adapters, sweeps, expectations)."""
    if isinstance(text, bytes):
        text = decode_suite(text, file)
    data, lines = parse_yaml(text, file)
    if not isinstance(data, dict):
        raise SuiteError([SuiteIssue(file, 1, "", "a suite must be a YAML mapping (name:, tasks:, models:, ...)")])
    try:
        suite = Suite.model_validate(data)
        if profile is not None:
            _apply_profile(data, profile, lines)
            suite = Suite.model_validate(data)
    except ValidationError as exc:
        raise SuiteError(validation_issues(exc, lines, ())) from None
    if profile is None:
        return _check_suite(suite, lines, path)
    try:
        return _check_suite(suite, lines, path)
    except SuiteError as exc:
        # The line is the task's or model's own; the value that fails may be the profile's.
        raise SuiteError([replace(i, message=f"{i.message} (with profile {profile!r})") for i in exc.issues]) from None


def _check_suite(suite: Suite, lines: LineMap, path: Path | None) -> LoadedSuite:
    """Every check after the schema: sizes, tasks, models and sweeps, inputs, expectations."""
    issues: list[SuiteIssue] = []
    _check_unique("tasks", [t.id for t in suite.tasks], lines, issues)
    _check_unique("models", [m.id for m in suite.models], lines, issues)
    # Sized before anything is built: one sweep too large is named at its own line, then the total.
    too_large = [lines.issue(("models", i, "sweep"), str(err)) for i, m in enumerate(suite.models)
                 if (err := sweep_too_large(m)) is not None]
    if too_large:
        raise SuiteError(issues + too_large)
    total = sum(sweep_size(m) for m in suite.models)
    if total > limits().models:
        raise SuiteError(issues + [lines.issue(("models",), str(TooLargeError(
            f"models after sweep expansion ({len(suite.models)} entries)", total, limits().models, "--max-models")))])
    kinds = _check_tasks(suite, lines, issues)
    loaded = LoadedSuite(suite, path, task_kinds={t: k for t, (k, _) in kinds.items()})
    suite_seeds = seed_list(suite.seeds)
    for i, entry in enumerate(suite.models):
        loaded.models.extend(expand_model(i, entry, suite_seeds, lines, issues, path.parent if path is not None else None))
        if not any(matches(t.id, entry.tasks) for t in suite.tasks):
            issues.append(lines.issue(("models", i, "tasks"), f"patterns {entry.tasks} match no task of the suite"))
    _check_member_ids(loaded, lines, issues)
    if not issues:
        _check_inputs(loaded, kinds, lines, issues)
        _check_expectations(loaded, kinds, lines, issues)
    if issues:
        raise SuiteError(issues)
    return loaded


def _check_member_ids(loaded: LoadedSuite, lines: LineMap, issues: list[SuiteIssue]) -> None:
    """Two concrete models may never share an id (their results would be averaged as one)."""
    seen: dict[str, str] = {}
    index = {e.id: i for i, e in enumerate(loaded.suite.models)}
    for m in loaded.models:
        if m.id in seen and seen[m.id] != m.group:
            issues.append(lines.issue(("models", index[m.group], "id"), f"model id {m.id!r} is also a member of {seen[m.id]!r}"))
        seen.setdefault(m.id, m.group)


def load_suite(name_or_path: str | Path, profile: str | None = None) -> LoadedSuite:
    """Load and fully validate a suite by name (suites/NAME.yaml) or path, optionally with a profile."""
    path = resolve_suite_path(name_or_path)
    if not path.is_file():
        try:
            known = ", ".join(bundled_suites()) or "none"
        except FileNotFoundError as exc:
            known = f"none; {exc}"
        what = "is a directory, not a suite file" if path.is_dir() else f"no such suite file (bundled suites: {known})"
        raise SuiteError([SuiteIssue(str(path), None, "", what)])
    try:
        with path.open("rb") as fh:
            check_size(os.fstat(fh.fileno()).st_size, "bytes", str(path))
            data = fh.read(SUITE_FILE_BYTES + 1)  # a file still growing is read no further than the limit
    except OSError as exc:
        raise SuiteError([SuiteIssue(str(path), None, "", f"cannot read the file: {exc.strerror or exc}")]) from None
    return parse_suite(data, str(path), path, profile)


__all__ = [
    "BUNDLED_KINDS", "Expectation", "LoadedSuite", "bundled_dir", "bundled_suites", "load_suite", "parse_suite",
    "resolve_bundled", "resolve_suite_path",
]
