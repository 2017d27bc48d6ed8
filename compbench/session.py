"""The run use case, once: a `RunRequest` → `plan()` → `run()` → `report()`, and `stored()` to read without running.

`compbench run`, `compbench check`/`baseline record`, `compbench.evaluate` and the pytest plugin are faces of this
module: each translates its own arguments into a `RunRequest` and shows what comes back. So the same request gives
the same records, outcome and report from every face, and every face refuses the same misuse in the same words
(`RequestError`, which each face names by its own spelling of the argument: `--model`, `models`, `--compbench-model`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compbench.errors import CompbenchError

if TYPE_CHECKING:
    from compbench.outcome import SuiteOutcome
    from compbench.records import CellRecord
    from compbench.report.publish import Published
    from compbench.report.run_config import RunConfig
    from compbench.runner.cells import Job, PreparedTask
    from compbench.runner.run import RunSummary
    from compbench.suite import LoadedSuite

# Each face's name of a request's fields, used to word a RequestError for that face.
CLI_NAMES = {"models": "--model", "model_args": "--model-args", "tags": "--model-tags", "tasks": "--task",
             "seeds": "--seeds", "seed_start": "--seed-start", "executor": "--executor", "fail_fast": "--fail-fast",
             "cell_timeout": "--cell-timeout", "results": "--results"}
API_NAMES = {"models": "models", "model_args": "model_args", "tags": "tags", "tasks": "tasks", "seeds": "seeds",
             "seed_start": "seed_start", "executor": "executor", "fail_fast": "fail_fast", "cell_timeout": "cell_timeout",
             "results": "out"}
PLUGIN_NAMES = {**CLI_NAMES, "models": "--compbench-model", "seeds": "--compbench-seeds"}


class RequestError(CompbenchError, ValueError):
    """A request refused before anything trains; `text` names other arguments as `{field}`, worded per face by `worded`."""

    def __init__(self, argument: str, text: str, *, lead: bool = True) -> None:
        self.argument, self.text, self.lead = argument, text, lead
        super().__init__(self.worded(CLI_NAMES))

    def said(self, names: Mapping[str, str]) -> str:
        """The message without the argument's name in front (the face names it its own way)."""
        text = self.text
        for key, name in names.items():  # not str.format: a user's glob may hold braces
            text = text.replace("{" + key + "}", name)
        return text

    def worded(self, names: Mapping[str, str]) -> str:
        """The message as a face says it: its name of the argument, then what is wrong (`names`: that face's names)."""
        said = self.said(names)
        return f"{names.get(self.argument, self.argument)} {said}" if self.lead else said


@dataclass(frozen=True)
class RunRequest:
    """Everything a run is asked for, by any face: suite, selection, models to add, seeds, where and how it runs."""

    suite: str | Path | LoadedSuite
    profile: str | None = None
    models: tuple[Any, ...] | None = None  # ids or globs, adapters' names, references, objects, {name: object} dicts
    model_args: Mapping[str, Any] | None = None
    tags: tuple[str, ...] = ()
    tasks: tuple[str, ...] | None = None
    seeds: int | None = None
    seed_start: int | None = None
    device: str = "auto"
    executor: str = "auto"  # runner.schedule: a pool of one-thread workers on every usable core when there is enough to compute
    workers: int | None = None  # a pool's size (None: one per usable core)
    address: str | None = None
    gpus_per_job: float = 0.25
    cell_timeout: float | None = None
    threads: int | None = None
    results: Path | None = None  # None: results/<suite name>
    force: bool = False
    fail_fast: bool = False
    formats: tuple[str, ...] = ()  # () : no report, and the results folder may hold another suite's report
    progress: bool = False
    verbose: bool = False
    command: str | None = None  # what the store's runs table records as the command
    select_models: bool = True  # False: `models` are added beside the suite's and the whole suite runs (pytest plugin)
    # A report of what the store holds, nothing run (`compbench report`): the results folder is only read, the report
    # goes to `report_dir` (None: the results folder), claimed only when written, and states `config`, the
    # configuration the suite was rebuilt with (report.run_config; None: the request's own).
    stored_only: bool = False
    report_dir: Path | None = None
    config: RunConfig | None = None


@dataclass(frozen=True)
class Selection:
    """The suites a request asks for, checked, before anything is built: the whole one and what of it runs."""

    whole: LoadedSuite  # the suite with the added models and the seeds: what the report shows (a new one, never the caller's)
    suite: LoadedSuite  # `whole` narrowed to the request's models and tasks: what runs and is judged
    added: Mapping[str, str]  # {model as given: id of the model added}
    model_patterns: tuple[str, ...] | None
    task_patterns: tuple[str, ...] | None
    config: RunConfig
    notes: tuple[str, ...] = ()  # e.g. an added model recomputed on every run because it has no source


@dataclass(frozen=True)
class Plan:
    """A request made concrete before anything trains: its selection (the suites, the models added), the tasks
    (built once), the jobs."""

    request: RunRequest
    selection: Selection
    out_dir: Path
    device: str
    tasks: Mapping[str, PreparedTask]
    jobs: tuple[Job, ...]

    whole = property(lambda self: self.selection.whole, doc="The suite with the added models and the seeds: what the report shows.")
    suite = property(lambda self: self.selection.suite, doc="`whole` narrowed to the request's models and tasks: what runs.")
    added = property(lambda self: self.selection.added, doc="{model as given: id of the model added}.")
    model_patterns = property(lambda self: self.selection.model_patterns, doc="The request's model selection, by id.")
    task_patterns = property(lambda self: self.selection.task_patterns, doc="The request's task selection.")
    config = property(lambda self: self.selection.config, doc="What `compbench report` needs to rebuild the run's report.")
    report_dir = property(lambda self: self.request.report_dir or self.out_dir, doc="Where `report` writes.")
    notes = property(lambda self: self.selection.notes, doc="Notes the outcome carries (e.g. a model with no source).")

    @property
    def partial(self) -> bool:
        """Whether only part of the suite runs (models or tasks selected)."""
        return bool(self.model_patterns or self.task_patterns)


@dataclass(frozen=True)
class RunFacts:
    """A run's summary as summary.json records it (typed, so nothing else of the runner's state leaks into the file)."""

    device: str
    executor: str  # what ran the cells: local, process or ray (`auto` resolved)
    workers: int  # processes that computed at once
    executor_reason: str | None  # why `auto` chose so (None: the executor was asked for)
    wall_time: float
    n_run: int
    n_cached: int
    n_rescored: int
    n_failed: int
    n_skipped: int
    interrupted: bool  # Ctrl-C, SIGTERM, or a --fail-fast stop
    selection: str | None  # the selection of a partial run, as the command line writes it


@dataclass(frozen=True)
class RunResult:
    """What `run` did: the typed facts, the outcome of what ran, and the runner's own summary."""

    facts: RunFacts
    outcome: SuiteOutcome
    summary: RunSummary = field(repr=False)

    def summary_facts(self, plan: Plan) -> dict[str, Any]:
        """summary.json's entries of this run: its facts and the configuration `compbench report` rebuilds."""
        facts = {k: v for k, v in vars(self.facts).items() if k != "selection" or v}
        return {**facts, **plan.config.facts()}


def _patterns(items: list[Any], added: Mapping[str, str]) -> list[str]:
    """Each item's selection: a str by id or glob (a reference by the model it added), an object or dict by its name."""
    patterns: list[str] = []
    for item in items:
        names = [str(k) for k in item] if isinstance(item, Mapping) else \
            [item if isinstance(item, str) else str(getattr(item, "__name__", ""))]
        patterns += [added.get(n, n) for n in names]
    return patterns


def choose(request: RunRequest) -> Selection:
    """The suites the request asks for (loaded, models added, seeds set, narrowed), checked; nothing is built or written.

    A request compbench refuses raises RequestError (or the SuiteError of the suite or of a model it cannot add).
    """
    from compbench.adapters import get_adapter
    from compbench.adapters.user import caching_note
    from compbench.report.run_config import config_of
    from compbench.runner.executors import check_cell_timeout
    from compbench.suite import load_suite, matches, unmatched_tasks
    from compbench.suite.edit import no_model_message
    from compbench.suite.load import LoadedSuite

    loaded = request.suite.copy() if isinstance(request.suite, LoadedSuite) else load_suite(request.suite, request.profile)
    items = list(request.models or ())
    if request.model_args and not items:
        raise RequestError("model_args", "sets the parameters of a model added with {models}: give {models} too")
    if request.tags and not items:
        raise RequestError("tags", "are the tags of a model added with {models}: give {models} too")
    model_args = dict(request.model_args or {})
    loaded, added = loaded.with_added(items, model_args, request.tags) if items else (loaded, {})
    if request.tags and not added:
        raise RequestError("tags", "applies only to a model added with {models} (no model of the suite); none was added")
    if model_args and not added:
        raise RequestError("model_args", "applies only to a model added with {models} (no model of the suite); none "
                           "was added: to change a suite model's parameters, edit a copy of the suite")
    if request.executor == "ray":
        # A model from a file or a Python object, added or declared by the suite (`adapter: file.py:Name`), carries its
        # source digest; Ray's workers import adapters by name, so they cannot build it.
        from_file = [m.id for m in loaded.models if getattr(get_adapter(m.adapter), "__compbench_code__", None)]
        if from_file:
            raise RequestError("executor", f"model {from_file[0]!r} comes from a file or module (file.py:Name) or a "
                               "Python object, which runs on the local or process executor; Ray workers cannot import "
                               "it: package it with an entry point (docs/how-to/extending.md) to use Ray", lead=False)
    if request.fail_fast and request.executor not in ("local", "auto"):
        raise RequestError("fail_fast", f"works with {{executor}} local only (a {request.executor} executor has other "
                           "cells in flight when one fails); drop one of them")
    check_cell_timeout(request.executor, request.cell_timeout)
    config = request.config or config_of(loaded, added, profile=request.profile, model_args=model_args, tags=request.tags,
                                         seeds=request.seeds)
    if request.seed_start is not None and request.seeds is None:
        raise RequestError("seed_start", "needs {seeds} (seeds {seed_start} .. {seed_start} + N - 1); without it the "
                           "suite's own seeds run")
    if request.seeds is not None:
        loaded = loaded.with_seeds(request.seeds, request.seed_start or 0)
    task_patterns = tuple(request.tasks) if request.tasks is not None else None
    unmatched_task = unmatched_tasks(loaded, list(task_patterns)) if task_patterns else None
    if unmatched_task:
        raise RequestError("tasks", unmatched_task)
    patterns = tuple(_patterns(items, added)) if items else None
    if patterns:
        unmatched = [p for p in patterns if not any(matches(m.id, [p], m.group) for m in loaded.models)]
        if unmatched:
            raise RequestError("models", no_model_message(loaded, unmatched))
    model_patterns = patterns if request.select_models else None
    narrowed = loaded.select(list(model_patterns or ()), list(task_patterns or ()))
    notes = tuple(note for model_id in added.values()
                  if (note := caching_note(get_adapter(next(m for m in loaded.models if m.id == model_id).adapter), model_id)))
    return Selection(loaded, narrowed, dict(added), model_patterns, task_patterns, config, notes)


def plan(request: RunRequest, chosen: Selection | None = None) -> Plan:
    """Check the request and make it concrete before anything trains: its suites (`chosen`, when `choose` made them
    already), the tasks built once, the jobs, the results folder refused if it is not for this run."""
    from compbench.outcome import report_devices
    from compbench.runner.cells import expand_jobs, prepare_tasks
    from compbench.runner.device import resolve_device

    chosen = chosen if chosen is not None else choose(request)
    loaded, narrowed, task_patterns, model_patterns = chosen.whole, chosen.suite, chosen.task_patterns, chosen.model_patterns
    out_dir = Path(request.results) if request.results is not None else Path("results") / loaded.name
    # Stored results are the jobs of the device their last run used (no torch import to ask for one).
    device = report_devices(out_dir)[0] if request.stored_only else resolve_device(request.device)
    tasks = prepare_tasks(loaded)  # the whole suite's, once: the run and a partial run's report share them
    jobs = tuple(expand_jobs(narrowed, tasks, device))
    if not jobs:
        if task_patterns:
            raise RequestError("tasks", f"no model of suite {loaded.name} selected runs on the tasks {{tasks}} "
                               f"{' '.join(task_patterns)} selects", lead=False)
        raise RequestError("models", f"{' '.join(model_patterns or ())} run on none of the tasks of suite {loaded.name}")
    if request.stored_only:  # read, never claimed; the report's folder is claimed when the report is written
        _gate(request.report_dir or out_dir, loaded, report=True, claim=False)
    else:
        _gate(out_dir, loaded, report=bool(request.formats))
    return Plan(request, chosen, out_dir, device, tasks, jobs)


def _gate(out_dir: Path, loaded: LoadedSuite, *, report: bool, claim: bool = True) -> None:
    """Refuse a results folder before anything trains: one that is not compbench's, and for a report another suite's."""
    from compbench.report.publish import check_owner, claim_results_dir

    # A store is shared by cell keys, so a run that writes no report may use another suite's folder.
    (check_owner if report else claim_results_dir)(out_dir, loaded, claim=claim)


def run(plan: Plan) -> RunResult:
    """Run the plan's jobs not already stored (Ctrl-C keeps what finished), and judge what ran."""
    from compbench.outcome import outcome_of_run, record_verdicts
    from compbench.runner import run as runner

    r = plan.request
    summary = runner.run_suite(
        plan.whole, plan.out_dir, device=plan.device, force=r.force, model_patterns=list(plan.model_patterns or ()),
        task_patterns=list(plan.task_patterns or ()), progress=r.progress, verbose=r.verbose, fail_fast=r.fail_fast,
        executor=r.executor, workers=r.workers, address=r.address, gpus_per_job=r.gpus_per_job,
        cell_timeout=r.cell_timeout, threads=r.threads, command=r.command, profile=r.profile, tasks=plan.tasks,
        jobs=plan.jobs)
    # With models or tasks selected only part of the suite ran: expectations are judged on the cells that ran, and
    # those that match none of them are left out rather than failed.
    outcome = outcome_of_run(plan.suite, summary, profile=r.profile, partial=summary.partial)
    for note in plan.notes:
        outcome.notes.append(note)
    record_verdicts(plan.out_dir, summary.run_id, outcome.verdicts)
    # As the command line selects it: a reference as given (file.py:Name), an object by its name.
    given = [x for item in r.models or () for x in ([item] if isinstance(item, str) else _patterns([item], {}))] \
        if plan.model_patterns else []
    selection = " ".join([*(f"--task {t}" for t in plan.task_patterns or ()),
                          *(f"--model {m}" for m in given)]) if plan.partial else None
    facts = RunFacts(summary.device, summary.executor, summary.workers, summary.executor_reason, summary.wall_time, summary.n_run, summary.n_cached,
                     summary.n_rescored, summary.n_failed, summary.n_skipped,
                     summary.interrupted or summary.failed_cell is not None, selection)
    return RunResult(facts, outcome, summary)


def report(plan: Plan, result: RunResult | None = None, skipped: list[str] | None = None) -> Published:
    """Write the report of a run (`result`) into its results folder: of the whole suite, as the store holds it after a
    partial run. With no result, the report of what the store holds (`stored`), nothing run, into `plan.report_dir`:
    the run summary as the last run wrote it, its cell counts as the store has them now."""
    from compbench.report.publish import NoResultsError, Published, publish, publish_run, stored_summary

    r = plan.request
    if result is not None:
        return publish_run(plan.out_dir, plan.whole, result.outcome, result.summary_facts(plan), formats=r.formats,
                           skipped=skipped, profile=r.profile, tasks=plan.tasks)
    outcome = stored(plan)
    if not outcome.records:
        again = f"compbench run --suite {plan.whole.name}" + (f" --profile {r.profile}" if r.profile else "")
        raise NoResultsError(f"no stored results for suite {plan.whole.name!r}" + (f" with profile {r.profile!r}" if r.profile else "")
                             + f" in {plan.out_dir / 'store'}; run `{again}` first")
    summary = stored_summary(plan.out_dir, outcome, plan.config)
    paths = publish(plan.report_dir, plan.whole, outcome.records, summary, formats=r.formats, skipped=skipped,
                    verdicts=outcome.verdicts, source=plan.out_dir)
    return Published(outcome, paths, [])


def stored(plan: Plan) -> SuiteOutcome:
    """The outcome of the plan's suite (the whole one, added models included) as its store holds it: read through a
    read-only view of the store (runner.stored.StoreView), nothing runs."""
    from compbench.outcome import report_devices, stored_outcome

    devices = report_devices(plan.out_dir)
    # A report's plan expanded the whole suite's jobs on the device the store's last run used: not expanded again.
    mine = plan.request.stored_only and not plan.partial and plan.device == devices[0]
    return stored_outcome(plan.whole, plan.out_dir, profile=plan.request.profile, partial=plan.partial, tasks=plan.tasks,
                          devices=devices, jobs=plan.jobs if mine else None)


def shown(plan: Plan, result: RunResult, whole: SuiteOutcome | None = None) -> tuple[LoadedSuite, list[CellRecord]]:
    """The models and records to show after a run: those that ran and, beside a model it added, the suite's models the
    store holds (`whole`: the whole suite's outcome, when the report already read it)."""
    if not plan.added:
        return plan.suite, result.outcome.records
    if whole is None or not whole.partial:  # the report's outcome is the whole suite's only after a partial run
        whole = _beside(plan, result)
    have = {r.model for r in whole.records}
    return plan.whole.copy(models=[m for m in plan.whole.models if m.id in have]), whole.records


def _beside(plan: Plan, result: RunResult) -> SuiteOutcome:
    """The whole suite's outcome: the run's cells as it found them, the others as the store holds them."""
    from compbench.outcome import whole_outcome

    return whole_outcome(plan.whole, result.outcome, plan.out_dir, profile=plan.request.profile,
                         device=result.facts.device, tasks=plan.tasks)


__all__ = ["Plan", "Selection", "choose", "RequestError", "RunFacts", "RunRequest", "RunResult", "plan", "report", "run", "shown", "stored"]
