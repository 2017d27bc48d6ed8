"""One suite's results, read for the site: a results directory or a bundle, through the store's read path (no executor)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compbench.errors import CompbenchError
from compbench.files import read_contained


class SiteError(CompbenchError, ValueError):
    """A path given to `compbench site` holds no compbench results, or its results cannot be read."""


@dataclass(frozen=True)
class ModelCell:
    """A leaderboard row's score on one task: the held-out metric over seeds, its own kernel theory's, and the seeds."""

    task: str
    metric: str
    status: str
    mean: float
    std: float
    theory: float
    n_ok: int
    n_seeds: int
    text: str  # as the leaderboard shows it
    anchor: str  # the id of the cell's row in the suite's page


@dataclass(frozen=True)
class FindingLine:
    """One expectation's verdicts in a line: its id, holds / known / departs, and how many of its verdicts pass."""

    expectation: str
    status: str
    n_pass: int
    n_total: int


@dataclass
class SuiteSite:
    """What the site shows of one suite's results: facts for the index, the leaderboard page, model scores, history."""

    label: str  # the path as the user gave it
    name: str
    profile: str | None
    date: str
    commit: str  # the commit the last recorded run ran at ("not recorded" for a store from before runs were recorded)
    headline: str
    verdicts: str
    findings: list[FindingLine]
    leaderboard: str  # the suite's page, html_report's
    models: dict[str, list[ModelCell]]  # leaderboard row (model, or big sweep) → its cells
    n_runs: int
    history: list[Any] = field(default_factory=list)  # site.history.HistoryPlot, drawn where there are ≥ 2 runs
    slug: str = ""  # its folder in the site (build.py)


def _summary(directory: Path) -> dict[str, Any]:
    try:
        doc = json.loads(read_contained(directory, "summary.json") or b"{}")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _marker_suite(directory: Path) -> str | None:
    from compbench.report.publish import MARKER_FILE

    try:
        doc = json.loads(read_contained(directory, MARKER_FILE) or b"{}")
    except ValueError:
        return None
    return doc.get("suite") if isinstance(doc, dict) and isinstance(doc.get("suite"), str) else None


def _suite_file(view: Any, runs: list[Any]) -> str:
    """The suite to load: a bundle's own file; a directory's last recorded run's file, else its bundled suite by name."""
    if view.suite_file is not None:
        return str(view.suite_file)
    name = _summary(view.directory).get("suite") or _marker_suite(view.directory)
    for run in reversed(runs):
        recorded = run.info.get("suite_file")
        if run.suite == name and isinstance(recorded, str) and Path(recorded).is_file():
            return recorded
    if not isinstance(name, str) or not name:
        raise SiteError(f"{view.label}: holds a compbench store but no summary.json naming its suite; run "
                        "`compbench report --suite S --results DIR` there first, or give a bundle (it carries its suite)")
    return name


def _commit(runs: list[Any]) -> str:
    for run in reversed(runs):
        own = run.info.get("compbench") if isinstance(run.info.get("compbench"), dict) else {}
        sha = own.get("commit")
        if isinstance(sha, str) and sha:
            return sha[:7] + (" (dirty)" if own.get("dirty") else "")
    return "not recorded"


def _model_cells(ctx: Any) -> dict[str, list[ModelCell]]:
    """Every leaderboard row's cells: the ones the suite's leaderboard page shows (the report's statistics)."""
    from compbench.report.tables import cell_anchor

    board = ctx.statistics.leaderboard
    labels, cells = board.labels, board.cells
    out: dict[str, list[ModelCell]] = {}
    for label in labels:
        row = []
        for task in ctx.task_ids:
            c = cells.get((label, task))
            if c is None:
                continue
            row.append(ModelCell(task, c.metric, c.status, c.mean, c.std, c.theory_mean, c.n_ok,
                                 c.n_ok + c.n_error + c.n_skipped, c.text(),
                                 "sweeps" if c.is_sweep else cell_anchor(label, task)))
        if row:
            out[label] = row
    return out


def read_suite(path: Path, home: str) -> SuiteSite:
    """The site's view of the results at `path` (a results directory or a bundle); `home`: the suite page's link to
    the index. SiteError when `path` holds no compbench results."""
    from compbench.bundle import open_results
    from compbench.outcome import stored_outcome
    from compbench.report.legend import run_date
    from compbench.report.publish import stored_summary
    from compbench.report.run_config import recorded_config, with_profile
    from compbench.report.writers import ReportContext, leaderboard_html
    from compbench.site.history import history_plots
    from compbench.store.records import STORE_FILE, ResultStore
    from compbench.suite import load_suite

    path = Path(path)
    if not path.exists():
        raise SiteError(f"{path}: no such file or folder; give results directories (results/<suite>) or bundles")
    with open_results(path) as view:
        if not (view.directory / "store" / STORE_FILE).is_file():
            raise SiteError(f"{view.label}: not compbench results (no store/{STORE_FILE}); give a results directory "
                            "that `compbench run` wrote (results/<suite>) or a bundle (`compbench bundle`)")
        store = ResultStore(view.directory / "store")
        try:
            runs, stored = store.runs(), list(store)
        finally:
            store.close()
        loaded = load_suite(_suite_file(view, runs))
        recorded = recorded_config(view.directory, loaded.name)
        config = with_profile(recorded, recorded.profile if recorded else None)
        if config.profile:
            loaded = load_suite(_suite_file(view, runs), config.profile)
        loaded = config.apply(loaded, Path(view.label) / "summary.json")
        outcome = stored_outcome(loaded, view.directory, profile=config.profile)
        if not outcome.records:
            mine = [r for r in stored if r.suite == loaded.name]
            by = sorted({f"compbench {r.version or '0.1.0'}" for r in mine})
            raise SiteError(f"{view.label}: " + (
                f"none of its {len(mine)} stored records of suite {loaded.name!r} is of a cell the suite asks for "
                f"(they are of other settings, or of other code: written by {', '.join(by)}); run the suite again, "
                "or leave it out" if mine else
                f"its store holds no results of suite {loaded.name!r}"
                + (f" with profile {config.profile!r}" if config.profile else "") + "; run the suite there, or leave it out"))
        summary = stored_summary(view.directory, outcome, config)
        ctx = ReportContext(view.directory, loaded, outcome.records, outcome.verdicts, summary, formats=("html",),
                            source=view.directory)
        found = ctx.findings()
        mine = [r for r in runs if r.suite == loaded.name and r.profile == config.profile]
        return SuiteSite(
            label=view.label, name=loaded.name, profile=config.profile, date=run_date(view.directory),
            commit=_commit(mine), headline=outcome.headline(), verdicts=_verdicts(outcome.verdicts),
            findings=[FindingLine(f.expectation, f.status, f.n_pass, f.n_total) for f in found],
            leaderboard=leaderboard_html(ctx, home=home), models=_model_cells(ctx), n_runs=len(mine),
            history=history_plots(view.directory, mine) if len(mine) >= 2 else [],
        )


def _verdicts(verdicts: list[Any]) -> str:
    from compbench.outcome import verdict_counts

    return f"expectations {verdict_counts(verdicts)}" if verdicts else "no expectations"
