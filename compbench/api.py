"""`compbench.evaluate`: a suite run from Python, results in memory.

    import compbench
    res = compbench.evaluate("kernel-limits", models=[GatedMLP], tasks=["add-*", "te"])
    res.leaderboard()        # models × tasks, held-out score (mean over seeds)
    res.to_pandas()          # one row per cell and seed: every metric, the theory's, errors
    res.verdicts, res.errors, res.passed

It runs exactly what `compbench run` runs (the same runner, store, outcome and verdicts), so its
numbers are the CLI's. Without `out` the store lives in a temporary directory that is removed
when the call returns: nothing is left on disk, and nothing is reused between calls. With `out`
the store (and, with `report=True`, the report) is written there as `compbench run --results
OUT` would, and a later call reuses the cells it holds.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from compbench.outcome import SuiteOutcome
from compbench.records import CellRecord

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
        """Models × tasks: each task's leaderboard metric on held-out cells, mean over seeds (NaN: no score)."""
        import pandas as pd

        from compbench.report.tables import leaderboard_frame

        tasks = list(dict.fromkeys(r.task for r in self.records))
        frame = leaderboard_frame(self.records, tasks)
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


def evaluate(
    suite: str | Path | LoadedSuite,
    models: Iterable[Any] | Mapping[str, Any] | None = None,
    tasks: Iterable[str] | None = None,
    out: str | Path | None = None,
    *,
    profile: str | None = None,
    model_args: Mapping[str, Any] | None = None,
    tags: Iterable[str] = (),
    seeds: int | None = None,
    device: str = "auto",
    force: bool = False,
    report: bool = False,
    progress: bool = False,
    threads: int | None = None,
) -> Results:
    """Run a suite (or part of it) and return its results in memory; the Python face of `compbench run`.

    `models`: which models run. Each item is a suite model's id or glob, a registered adapter's
    name, a reference (`"path/to/file.py:Name"`, `"package.module:Name"`) or an object: an
    `Adapter` subclass or a factory of a `torch.nn.Module` called as `build(in_shape, n_out)` (e.g.
    the module's class). A mapping names its objects: `{"gated": GatedMLP}`. Added models run on
    every task of the suite whose inputs they take, with `model_args` as their parameters (over the
    suite's `added_networks` settings) and `tags` beside their adapter's (e.g. `lazy`). None:
    every model of the suite. `tasks`: task id globs (None: all). `out`: where to keep the store
    (None: a temporary directory, removed on return). `report`: also write the report into `out`.
    `threads`: torch threads per training process (None: compbench's policy, one; 0: torch's default).
    """
    import time

    from compbench.outcome import outcome_of_run
    from compbench.runner.run import run_suite, unselected
    from compbench.suite import add_adapter_models, load_suite, seeds_override
    from compbench.suite.load import LoadedSuite as _Loaded

    if report and out is None:
        raise ValueError("report=True writes the report into `out`: give out=PATH")
    loaded = suite if isinstance(suite, _Loaded) else load_suite(suite, profile)
    items: list[Any] = []
    if models is not None:
        items = [dict(models)] if isinstance(models, Mapping) else list(models)
        if isinstance(models, str):
            raise TypeError(f"models must be a list (models=[{models!r}]), not a str")
    added = add_adapter_models(loaded, items, dict(model_args or {}), tuple(tags)) if items else {}
    if model_args and not added:
        raise ValueError("model_args sets the parameters of models added by `models`; none was added")
    patterns: list[str] | None = None
    if items:  # each item selects its model: a str by id or glob (a reference by the model it added), an object by its name
        patterns = []
        for item in items:
            names = [str(k) for k in item] if isinstance(item, dict) else [item if isinstance(item, str) else str(getattr(item, "__name__", ""))]
            patterns += [added.get(n, n) for n in names]
    from compbench.adapters import get_adapter

    notes = [f"model {model_id!r} has no source compbench can read (defined interactively?): its cells are "
             "recomputed in every session, not reused from the store"
             for model_id in added.values()
             if not getattr(get_adapter(next(m for m in loaded.models if m.id == model_id).adapter), "__compbench_cached__", True)]
    if notes and progress:
        import sys

        for note in notes:
            print(note, file=sys.stderr)
    if seeds is not None:
        seeds_override(loaded, seeds)
    task_patterns = list(tasks) if tasks is not None else None
    if isinstance(tasks, str):
        raise TypeError(f"tasks must be a list (tasks=[{tasks!r}]), not a str")
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="compbench-") if out is None else contextlib.nullcontext() as tmp:
        out_dir = Path(out) if out is not None else Path(tmp) / loaded.name
        whole = unselected(loaded)  # what the report shows after a partial run (publish_run)
        summary = run_suite(loaded, out_dir, device=device, force=force, model_patterns=patterns,
                            task_patterns=task_patterns, progress=progress, threads=threads)
        if patterns and not summary.jobs:
            raise ValueError(f"models {patterns} match no model of suite {loaded.name} on the tasks selected")
        outcome = outcome_of_run(loaded, summary, profile=profile, partial=summary.partial)
        if report:
            from compbench.report.publish import publish_run

            kept = publish_run(out_dir, whole, outcome, dict(vars(summary)), profile=profile).kept
            if kept:
                notes.append(f"the report in {out_dir} was left as it was: it shows {len(kept)} cell(s) outside this "
                             f"selection that its store does not hold (e.g. {kept[0]})")
    for note in notes:
        outcome.notes.append(note)
    return Results(loaded.name, outcome, time.perf_counter() - start, summary.n_run, summary.n_cached,
                   Path(out) if out is not None else None, notes)


__all__ = ["Results", "evaluate"]
