"""`compbench.evaluate`: a suite run from Python, results in memory.

    import compbench
    res = compbench.evaluate("kernel-limits", models=[GatedMLP], tasks=["add-*", "te"])
    res.leaderboard()        # models × tasks, held-out score (mean over seeds)
    res.to_pandas()          # one row per cell and seed: every metric, the theory's, errors
    res.verdicts, res.errors, res.passed

It runs exactly what `compbench run` runs (one `compbench.session` request: the same plan, runner,
store, outcome and verdicts), so its numbers are the CLI's. Without `out` the store lives in a temporary directory that is removed
when the call returns: nothing is left on disk, and nothing is reused between calls. With `out`
the store (and, with `report=True`, the report) is written there as `compbench run --results
OUT` would, and a later call reuses the cells it holds.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compbench.outcome import SuiteOutcome
from compbench.records import CellRecord
from compbench.session import RunRequest
from compbench.suite.source import SuiteError, SuiteIssue

if TYPE_CHECKING:
    import pandas as pd

    from compbench.claims.base import Verdict
    from compbench.suite import LoadedSuite


@dataclass
class Results:
    """What `evaluate` ran and found: the records, the outcome and its verdicts, in memory."""

    suite: str
    outcome: SuiteOutcome
    wall_time: float = 0.0
    n_run: int = 0
    n_cached: int = 0
    out: Path | None = None  # where the store (and report) were written; None: nowhere
    notes: list[str] = field(default_factory=list)  # e.g. a model recomputed because it has no source
    # What the leaderboard shows: with an added model, the suite's models the store holds beside it (as `compbench
    # run` shows them); None: the records.
    shown: list[CellRecord] | None = None

    @property
    def records(self) -> list[CellRecord]:
        """Every cell's record (ok, failed, skipped), in suite order."""
        return self.outcome.records

    @property
    def verdicts(self) -> list[Verdict]:
        """Every judged expectation (PASS, FAIL or XFAIL)."""
        return self.outcome.verdicts

    @property
    def errors(self) -> list[CellRecord]:
        """The records of failed cells (each has `.message`, the error's first line, and `.error`)."""
        return [r for r in self.records if r.failed]

    @property
    def passed(self) -> bool:
        """Whether every cell ran and every expectation held: what `compbench run` exits 0 for."""
        return self.outcome.passed

    @property
    def exit_code(self) -> int:
        """The exit code `compbench run` gives for the same outcome."""
        return self.outcome.exit_code

    def to_pandas(self) -> pd.DataFrame:
        """One row per cell and seed: model, task, seed, status, error, every metric (theory ones too)."""
        from compbench.report.tables import records_frame

        return records_frame(self.records)

    def leaderboard(self) -> pd.DataFrame:
        """Models × tasks: each task's leaderboard metric on held-out cells, mean over seeds (NaN: no score); an added
        model beside the suite's models the store holds."""
        import pandas as pd

        from compbench.report.tables import leaderboard_frame

        records = self.records if self.shown is None else self.shown
        tasks = list(dict.fromkeys(r.task for r in records))
        frame = leaderboard_frame(records, tasks)
        if frame.empty:
            return pd.DataFrame()
        table = frame.pivot(index="model", columns="task", values="mean")
        models = list(dict.fromkeys(frame["model"]))
        return table.reindex(index=models, columns=[t for t in tasks if t in table.columns])

    def verdicts_frame(self) -> pd.DataFrame:
        """The verdicts as a table: expectation, claim, subject, task, measured, threshold, status."""
        import pandas as pd

        return pd.DataFrame([{"expectation": v.expectation, "claim": v.claim, "subject": v.subject, "task": v.task,
                              "measured": v.measured, "threshold": v.threshold, "status": v.status}
                             for v in self.verdicts])

    def __repr__(self) -> str:
        return f"<compbench.Results {self.outcome.headline()}>"


EXECUTORS = ("auto", "local", "process", "ray")  # = `compbench run --executor`

# evaluate()'s argument problems are the CLI's usage errors: a SuiteError (a ValueError) whose issues
# name the argument ("evaluate(): tasks: ..."), raised before anything trains. The checks that the
# CLI shares (a suite model's id, a task glob, a seed count) raise it with the CLI's flag as the field;
# _ARG_OF renames those fields to evaluate()'s arguments so a Python user is never told "--model".
WHERE = "evaluate()"
_ARG_OF = {"--model": "models", "--model-args": "model_args", "--model-tags": "tags", "--seeds": "seeds",
           "--seed-start": "seeds", "--task": "tasks"}


def _issue(argument: str, message: str) -> SuiteIssue:
    return SuiteIssue(WHERE, None, argument, message)


def _shown(value: Any) -> str:
    """A value as an error message quotes it: its type, and its repr cut short."""
    text = repr(value)
    return f"{type(value).__name__} {text[:60] + '…' if len(text) > 60 else text}"


def _list_problem(argument: str, value: Any, item_ok: Callable[[Any], bool], item_is: str) -> str | list[Any]:
    """`value` as a list when it is a non-empty list-like of items `item_ok` accepts, else what is wrong."""
    if isinstance(value, (str, bytes)):
        return f"must be a list ({argument}=[{value!r}]), not a {type(value).__name__}"
    if isinstance(value, Mapping) or not isinstance(value, Iterable) or isinstance(value, type):
        return f"must be a list of {item_is}, got {_shown(value)}"
    items = list(value)
    if not items:
        return f"{argument}=[] selects nothing; pass None (the default) for all"
    bad = [(i, x) for i, x in enumerate(items) if not item_ok(x)]
    if bad:
        i, x = bad[0]
        return f"item {i} is {_shown(x)}; each item is {item_is}"
    return items


def _is_model(x: Any) -> bool:
    # A name, a reference or an object compbench can build a model from; which object is checked when it is
    # added (compbench.adapters.user.adapter_for: an nn.Module instance is told to pass its class).
    return (isinstance(x, str) and bool(x)) or (callable(x) and not isinstance(x, bool))


def _check_arguments(suite: Any, models: Any, tasks: Any, out: Any, profile: Any, model_args: Any, tags: Any, seeds: Any,
                    device: Any, force: Any, report: Any, progress: Any, threads: Any, executor: Any = "auto",
                    workers: Any = None) -> None:
    """Refuse evaluate()'s arguments of the wrong type or range, every problem at once, as one SuiteError naming each argument."""
    from compbench.runner.device import DEVICES
    from compbench.runner.threads import MAX_THREADS
    from compbench.suite.load import LoadedSuite as _Loaded
    from compbench.suite.schema import is_tag

    issues: list[SuiteIssue] = []
    if not isinstance(suite, (str, os.PathLike, _Loaded)) or suite == "":
        issues.append(_issue("suite", f"must be a suite's name, a path to its YAML file or a LoadedSuite, got {_shown(suite)}"))
    if models is not None:
        if isinstance(models, Mapping):
            bad_key = next((k for k in models if not (isinstance(k, str) and k)), None)
            if not models:
                issues.append(_issue("models", "models={} selects nothing; pass None (the default) for every model"))
            elif bad_key is not None:
                issues.append(_issue("models", f"a dict names its models: key {_shown(bad_key)} is not a name"))
            elif not all(_is_model(v) for v in models.values()):
                issues.append(_issue("models", f"a dict maps names to models: {_shown(next(v for v in models.values() if not _is_model(v)))} "
                                     "is none (a class, a factory build(in_shape, n_out) or a reference 'file.py:Name')"))
        elif callable(models) and not isinstance(models, str):
            name = getattr(models, "__name__", type(models).__name__)
            issues.append(_issue("models", f"must be a list or a dict, not a single model: models=[{name}]"))
        else:
            problem = _list_problem("models", models, lambda x: _is_model(x) or isinstance(x, Mapping),
                                    "a model id or glob, an adapter's name, a reference 'file.py:Name', or a class "
                                    "or factory build(in_shape, n_out)")
            if isinstance(problem, str):
                issues.append(_issue("models", problem))
    if tasks is not None:
        problem = _list_problem("tasks", tasks, lambda x: isinstance(x, str) and bool(x), "a task id or glob (a str)")
        if isinstance(problem, str):
            issues.append(_issue("tasks", problem))
    if not isinstance(tags, (list, tuple)) or not all(is_tag(t) for t in tags):
        why = (f"must be a list (tags=[{tags!r}]), not a str: a str is not split into tags" if isinstance(tags, str)
               else f"must be a list of tags (letters, digits, '_', '.', '-'), got {_shown(tags)}")
        issues.append(_issue("tags", why))
    if model_args is not None and not (isinstance(model_args, Mapping) and all(isinstance(k, str) for k in model_args)):
        issues.append(_issue("model_args", f"must be a dict of parameter name → value, got {_shown(model_args)}"))
    if not (isinstance(executor, str) and executor in EXECUTORS):
        issues.append(_issue("executor", f"must be one of {', '.join(EXECUTORS)}, got {_shown(executor)}"))
    for name, value, low, high in (("seeds", seeds, 1, None), ("threads", threads, 0, MAX_THREADS), ("workers", workers, 1, None)):
        if value is None:  # seeds: the suite's; threads: the policy; workers: one per usable core
            continue
        if isinstance(value, bool) or not isinstance(value, int):  # True is no seed count, "2" no number
            issues.append(_issue(name, f"must be a whole number (an int) or None, got {_shown(value)}"))
        elif value < low or (high is not None and value > high):
            issues.append(_issue(name, f"must be {low:,} or more" + (f" and at most {high:,}" if high else "") + f", got {value:,}"))
    if out is not None and not isinstance(out, (str, os.PathLike)):
        issues.append(_issue("out", f"must be a path (str or Path) or None, got {_shown(out)}"))
    if profile is not None and not (isinstance(profile, str) and profile):
        issues.append(_issue("profile", f"must be a profile's name (a str) or None, got {_shown(profile)}"))
    if not (isinstance(device, str) and device in DEVICES):
        issues.append(_issue("device", f"must be one of {', '.join(DEVICES)}, got {_shown(device)}"))
    for name, value in (("force", force), ("report", report), ("progress", progress)):
        if not isinstance(value, bool):
            issues.append(_issue(name, f"must be True or False, got {_shown(value)}"))
    if report is True and out is None:
        issues.append(_issue("report", "report=True writes the report into `out`: give out=PATH"))
    if issues:
        raise SuiteError(issues)


@contextlib.contextmanager
def _as_arguments() -> Iterator[None]:
    """A usage error of a check the CLI shares, re-raised naming evaluate()'s argument rather than the CLI's flag."""
    from compbench.session import API_NAMES, RequestError

    try:
        yield
    except RequestError as exc:  # the session's words, naming evaluate()'s arguments
        raise SuiteError([_issue(API_NAMES.get(exc.argument, exc.argument), exc.said(API_NAMES))]) from None
    except SuiteError as exc:
        raise SuiteError([SuiteIssue(i.file, i.line, _ARG_OF.get(i.field, i.field), i.message) for i in exc.issues]) from None


def evaluate(
    suite: str | Path | LoadedSuite,
    models: Iterable[Any] | Mapping[str, Any] | None = None,
    tasks: Iterable[str] | None = None,
    out: str | Path | None = None,
    *,
    profile: str | None = None,
    model_args: Mapping[str, Any] | None = None,
    tags: list[str] | tuple[str, ...] = (),
    seeds: int | None = None,
    device: str = "auto",
    force: bool = False,
    report: bool = False,
    progress: bool = False,
    threads: int | None = None,
    executor: str = "auto",
    workers: int | None = None,
) -> Results:
    """Run a suite (or part of it) and return its results in memory; the Python face of `compbench run`.

    `models`: which models run, a list (or a dict). Each item is a suite model's id or glob, a
    registered adapter's name, a reference (`"path/to/file.py:Name"`, `"package.module:Name"`) or an
    object: an `Adapter` subclass or a factory of a `torch.nn.Module` called as `build(in_shape,
    n_out)` (e.g. the module's class, not an instance). A mapping names its objects: `{"gated":
    GatedMLP}`. Added models run on every task of the suite whose inputs they take, with
    `model_args` as their parameters (over the suite's `added_networks` settings) and `tags` (a
    list: `tags=["lazy"]`) beside their adapter's. None: every model of the suite. `tasks`: a list
    of task id globs (None: all). `out`: where to keep the store (None: a temporary directory,
    removed on return). `report`: also write the report into `out`. `threads`: torch threads per
    training process (None: compbench's policy, one; 0: torch's default). `executor`, `workers`: where the
    cells run, as `compbench run --executor --workers` (auto, the default: a pool of one-thread workers on every
    usable core when there is enough to compute, else this process; local: this process; process: a pool of
    `workers`, default one per usable core; ray).

    Bad arguments raise `compbench.suite.SuiteError` (a ValueError) naming each argument, before
    anything trains: a wrong type (a str where a list is due, a bool for a count), an empty list
    (pass None for "all"), a glob that matches no task or model (a typo), a results folder `out`
    that holds another suite's report when `report=True`.

    Ctrl-C (KeyboardInterrupt) stops it: the cells that finished are kept in `out`'s store (a later
    call with the same `out` resumes from them), then the KeyboardInterrupt is raised again.
    The models it adds are registered for this call only: calls in other threads never see them.
    """
    from compbench.adapters import ADAPTERS
    from compbench.report.writers import DEFAULT_FORMATS

    _check_arguments(suite, models, tasks, out, profile, model_args, tags, seeds, device, force, report, progress, threads,
                     executor, workers)
    items = None if models is None else ((dict(models),) if isinstance(models, Mapping) else tuple(models))
    request = RunRequest(suite, profile=profile, models=items, model_args=dict(model_args) if model_args else None,
                         tags=tuple(tags), tasks=tuple(tasks) if tasks is not None else None, seeds=seeds,
                         device=device, executor=executor, workers=workers, threads=threads,
                         results=Path(out) if out is not None else None, force=force,
                         formats=DEFAULT_FORMATS if report else (), progress=progress,
                         command=f"compbench.evaluate({getattr(suite, 'name', str(suite))!r})")
    with ADAPTERS.scope():
        return _evaluate(request, report=report)


def _evaluate(request: RunRequest, *, report: bool) -> Results:
    """`evaluate` on checked arguments, inside its registration scope; the caller's suite is never changed."""
    import sys
    from dataclasses import replace

    from compbench import session

    keep = request.results is not None
    with tempfile.TemporaryDirectory(prefix="compbench-") if not keep else contextlib.nullcontext() as tmp:
        if tmp is not None:
            request = replace(request, results=Path(tmp) / "results")
        with _as_arguments():
            plan = session.plan(request)
        notes = list(plan.notes)
        if request.progress:
            for note in notes:
                print(note, file=sys.stderr)
        result = session.run(plan)
        if result.summary.interrupted:  # run kept what finished; a notebook or script must stop, not read a partial result
            kept = (f"kept in {plan.out_dir / 'store'}: the same call resumes from them" if keep
                    else "not kept (out=None; give out=PATH to keep finished cells)")
            raise KeyboardInterrupt(f"evaluate() interrupted: {result.facts.n_run} cell(s) had finished, {kept}")
        whole = None
        if report:
            published = session.report(plan, result)
            whole = published.outcome
            if published.kept:
                note = (f"the report in {plan.out_dir} was left as it was: it shows {len(published.kept)} cell(s) "
                        f"outside this selection that its store does not hold (e.g. {published.kept[0]})")
                notes.append(note)
                result.outcome.notes.append(note)
        _, shown = session.shown(plan, result, whole)
    return Results(plan.suite.name, result.outcome, result.facts.wall_time, result.facts.n_run, result.facts.n_cached,
                   plan.out_dir if keep else None, notes, shown)


__all__ = ["Results", "evaluate"]
