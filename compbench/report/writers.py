"""Report writers as a registered kind (`compbench.reporters` entry points); `--format` takes any name.

A writer gets a `ReportContext` (the suite, its records and verdicts, the run summary, and the
tables and plots computed once for every writer that wants them) and returns the files it wrote.
Writers write through `ctx.write_file` (compbench.files.write_atomic): atomically, inside the
results directory, never through a symbolic link.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

from compbench.records import CellRecord
from compbench.files import write_atomic
from compbench.registry import PluginError, Registry, named_instance, require_subclass
from compbench.report.escape import csv_text

ENTRY_POINT_GROUP = "compbench.reporters"
DEFAULT_FORMATS = ("md", "csv", "html", "png", "predictions")


@dataclass
class ReportContext:
    """What every writer may use; tables, plots and tasks are computed once, on first use."""

    out_dir: Path
    loaded: Any  # compbench.suite.LoadedSuite
    records: list[CellRecord]
    verdicts: list[Any]  # compbench.claims.Verdict
    summary: dict[str, Any]
    formats: tuple[str, ...] = DEFAULT_FORMATS
    extra: dict[str, Any] = field(default_factory=dict)
    selected: frozenset[tuple[str, str]] | None = None  # a partial run's (model, task) pairs: plots of others are kept
    source: Path | None = None  # the folder the results were read from (a bundle's copy), when not out_dir

    def write_file(self, relative: str, data: bytes | str) -> Path:
        """Write a report file under out_dir atomically (see compbench.files); return its path."""
        return write_atomic(self.out_dir, relative, data)

    @property
    def task_ids(self) -> list[str]:
        """The suite's task ids, in order."""
        return [t.id for t in self.loaded.suite.tasks]

    @cached_property
    def expected(self) -> list[tuple[str, str, str]]:
        """(model id, sweep group, task id) for every cell the suite asks for, in suite order."""
        return [(m.id, m.group, t.id) for m in self.loaded.models for t in self.loaded.tasks_for(m)]

    @cached_property
    def statistics(self) -> Any:
        """The report's statistics (compbench.report.statistics.ReportStatistics): computed once, read by every writer."""
        from compbench.report.statistics import ReportStatistics, ceiling_models

        return ReportStatistics(self.records, self.task_ids, self.expected, ceiling_models(self.loaded),
                                lambda: {t: d.test_mask for t, d in self.tasks.items()})

    @cached_property
    def tables(self) -> list[Any]:
        """Every table of the report (compbench.report.tables.Table), in order."""
        from compbench.report.markdown import report_tables

        return report_tables(self)

    @cached_property
    def plots(self) -> list[Any]:
        """The report's plots (drawn once; written under plots/ only when `png` is among the formats)."""
        from compbench.report.plots import write_plots

        return write_plots(self.out_dir if "png" in self.formats else None, self.loaded, self.records, self.selected)

    def findings(self, plots: list[str] | tuple[str, ...] = ()) -> list[Any]:
        """One finding per judged expectation (compbench.report.findings), linked to those of `plots` that show it."""
        from compbench.report.findings import findings

        families = {t.id: t.family for t in self.loaded.suite.tasks}
        return findings(self.loaded.suite.expectations, self.verdicts, plots, families)

    @cached_property
    def fit_warnings(self) -> list[str]:
        """One line per model and task whose training score misses its fit threshold (metric_facts.fit_warnings)."""
        from compbench.records.metric_facts import fit_lines, fit_warnings

        return fit_lines(fit_warnings(self.records, self.loaded.suite.fit_threshold))

    @cached_property
    def tasks(self) -> dict[str, Any]:
        """Task id → its TaskData (cells, targets, split, labels)."""
        from compbench.tasks import make_task

        return {t.id: make_task(t.family, **t.params) for t in self.loaded.suite.tasks}


class Reporter:
    """Base of report writers: a `write(ctx)` returning the paths it wrote."""

    name: ClassVar[str] = ""
    # Files this writer wrote in an earlier compbench under another name: removed when it runs again (publish), so a
    # report does not keep a stale copy beside the new file.
    retired: ClassVar[tuple[str, ...]] = ()

    def write(self, ctx: ReportContext) -> list[Path]:
        """Write this format's files under ctx.out_dir."""
        raise NotImplementedError


def _check_reporter(name: str, obj: object) -> Reporter:
    obj = require_subclass("report writer", name, obj, Reporter, "compbench.report.Reporter")
    if obj.write is Reporter.write:
        raise PluginError(f"report writer {name!r} does not implement write(ctx)")
    return named_instance(obj, name)


REPORTERS: Registry[Reporter] = Registry("report writer", ENTRY_POINT_GROUP, _check_reporter)


def register_reporter(name: str) -> Callable[[type[Reporter]], type[Reporter]]:
    """Class decorator registering a report writer under `name`."""
    return REPORTERS.register(name)  # type: ignore[return-value]


@register_reporter("png")
class PlotsWriter(Reporter):
    """plots/*.png and plots/*.svg (matplotlib)."""

    def write(self, ctx: ReportContext) -> list[Path]:
        return [ctx.out_dir / "plots" / f"{p.name}.png" for p in ctx.plots]  # each with its .svg beside it


@register_reporter("md")
class MarkdownWriter(Reporter):
    """leaderboard.md: every table, and the plots when png is written too."""

    def write(self, ctx: ReportContext) -> list[Path]:
        from compbench.report.markdown import markdown_report

        tables, head, about, warnings = _before_plots(ctx)
        shown = [(f"{p.name}.png", p.caption) for p in ctx.plots] if "png" in ctx.formats else []
        found = ctx.findings([name.removesuffix(".png") for name, _ in shown])
        return [ctx.write_file("leaderboard.md", markdown_report(ctx.loaded.name, tables, shown, head, found, about,
                                                                warnings))]


def _before_plots(ctx: ReportContext) -> tuple[list[Any], str, Any, list[str]]:
    """What a page shows beside its plots (tables, headline, introduction, fit warnings), built before it asks for the
    plots: while other processes draw them (report.publish), this one builds the tables instead of waiting first."""
    from compbench.report.intro import intro
    from compbench.report.legend import headline

    return ctx.tables, headline(ctx), intro(ctx.loaded), ctx.fit_warnings


@register_reporter("csv")
class CsvWriter(Reporter):
    """leaderboard.csv, theory.csv, records.csv, expectations.csv: typed rows for pandas."""

    def write(self, ctx: ReportContext) -> list[Path]:
        import pandas as pd

        from compbench.claims import Verdict
        from compbench.report.tables import leaderboard_frame, records_frame, theory_frame

        stats = ctx.statistics
        csvs = {
            "leaderboard.csv": leaderboard_frame(ctx.records, ctx.task_ids, board=stats.leaderboard),
            "theory.csv": theory_frame(ctx.records, ctx.task_ids, theory=stats.theory),
            "records.csv": records_frame(ctx.records),
            "expectations.csv": pd.DataFrame([{**v.__dict__, "verdict": v.status} for v in ctx.verdicts],
                                             columns=[*Verdict.__dataclass_fields__, "verdict"]),
        }
        return [ctx.write_file(name, csv_text(frame)) for name, frame in csvs.items()]


@register_reporter("html")
class HtmlWriter(Reporter):
    """leaderboard.html: one self-contained page (tables and plots inline)."""

    def write(self, ctx: ReportContext) -> list[Path]:
        return [ctx.write_file("leaderboard.html", leaderboard_html(ctx))]


def leaderboard_html(ctx: ReportContext, home: str = "") -> str:
    """The suite's self-contained leaderboard page (leaderboard.html, and each suite's page of `compbench site`);
    `home`: a relative link back to the page that lists it ("" for none)."""
    from compbench.report.html import html_report

    tables, head, about, warnings = _before_plots(ctx)
    found = ctx.findings([p.name for p in ctx.plots])
    return html_report(ctx.loaded.name, tables, ctx.plots, head, found, about, warnings, home=home)


@register_reporter("predictions")
class PredictionsWriter(Reporter):
    """predictions.parquet: one row per (task, model, seed, cell) with the cell's labels, truth, prediction and theory."""

    retired = ("predictions.csv",)  # what it wrote until issue #34: now the opt-in `predictions-csv` writer's

    def write(self, ctx: ReportContext) -> list[Path]:
        from compbench.report.predictions import parquet_bytes, predictions_table

        # Binary and typed: formatting ~10^6 floats as text was most of a cold report's table writing.
        return [ctx.write_file("predictions.parquet", parquet_bytes(predictions_table(ctx)))]


@register_reporter("predictions-csv")
class PredictionsCsvWriter(Reporter):
    """predictions.csv: the rows of predictions.parquet as text, for spreadsheets (not written unless asked for)."""

    def write(self, ctx: ReportContext) -> list[Path]:
        from compbench.report.predictions import csv_frame, predictions_frame

        return [ctx.write_file("predictions.csv", csv_text(csv_frame(predictions_frame(ctx))))]
