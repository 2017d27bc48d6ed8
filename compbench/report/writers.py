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

import numpy as np

from compbench.records import CellRecord
from compbench.files import write_atomic
from compbench.registry import PluginError, Registry, require_subclass
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
    def tables(self) -> list[Any]:
        """Every table of the report (compbench.report.tables.Table), in order."""
        from compbench.report.tables import report_tables

        return report_tables(self)

    @cached_property
    def plots(self) -> list[Any]:
        """The report's plots (drawn once; written under plots/ only when `png` is among the formats)."""
        from compbench.report.plots import write_plots

        return write_plots(self.out_dir if "png" in self.formats else None, self.loaded, self.records)

    def findings(self, plots: list[str] | tuple[str, ...] = ()) -> list[Any]:
        """One finding per judged expectation (compbench.report.findings), linked to those of `plots` that show it."""
        from compbench.report.findings import findings

        families = {t.id: t.family for t in self.loaded.suite.tasks}
        return findings(self.loaded.suite.expectations, self.verdicts, plots, families)

    @cached_property
    def tasks(self) -> dict[str, Any]:
        """Task id → its TaskData (cells, targets, split, labels)."""
        from compbench.tasks import make_task

        return {t.id: make_task(t.family, **t.params) for t in self.loaded.suite.tasks}


class Reporter:
    """Base of report writers: a `write(ctx)` returning the paths it wrote."""

    name: ClassVar[str] = ""

    def write(self, ctx: ReportContext) -> list[Path]:
        """Write this format's files under ctx.out_dir."""
        raise NotImplementedError


def _check_reporter(name: str, obj: object) -> Reporter:
    obj = require_subclass("report writer", name, obj, Reporter, "compbench.report.Reporter")
    if obj.write is Reporter.write:
        raise PluginError(f"report writer {name!r} does not implement write(ctx)")
    instance = obj()
    instance.name = name  # the instance's, not the class's: a class registered twice keeps each name
    return instance


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
        from compbench.report.legend import headline
        from compbench.report.tables import markdown_report

        shown = [(f"{p.name}.png", p.caption) for p in ctx.plots] if "png" in ctx.formats else []
        found = ctx.findings([name.removesuffix(".png") for name, _ in shown])
        return [ctx.write_file("leaderboard.md", markdown_report(ctx.loaded.name, ctx.tables, shown, headline(ctx), found))]


@register_reporter("csv")
class CsvWriter(Reporter):
    """leaderboard.csv, theory.csv, records.csv, expectations.csv: typed rows for pandas."""

    def write(self, ctx: ReportContext) -> list[Path]:
        import pandas as pd

        from compbench.claims import Verdict
        from compbench.report.tables import leaderboard_frame, records_frame, theory_frame

        csvs = {
            "leaderboard.csv": leaderboard_frame(ctx.records, ctx.task_ids, ctx.expected),
            "theory.csv": theory_frame(ctx.records, ctx.task_ids, ctx.expected, {t: d.test_mask for t, d in ctx.tasks.items()}),
            "records.csv": records_frame(ctx.records),
            "expectations.csv": pd.DataFrame([{**v.__dict__, "verdict": v.status} for v in ctx.verdicts],
                                             columns=[*Verdict.__dataclass_fields__, "verdict"]),
        }
        return [ctx.write_file(name, csv_text(frame)) for name, frame in csvs.items()]


@register_reporter("html")
class HtmlWriter(Reporter):
    """leaderboard.html: one self-contained page (tables and plots inline)."""

    def write(self, ctx: ReportContext) -> list[Path]:
        from compbench.report.html import html_report
        from compbench.report.legend import headline

        found = ctx.findings([p.name for p in ctx.plots])
        return [ctx.write_file("leaderboard.html", html_report(ctx.loaded.name, ctx.tables, ctx.plots, headline(ctx), found))]


PREDICTION_COLUMNS = ("task", "model", "seed", "split")


@register_reporter("predictions")
class PredictionsWriter(Reporter):
    """predictions.csv: one row per (task, model, seed, cell) with the cell's labels, truth, prediction and theory."""

    def write(self, ctx: ReportContext) -> list[Path]:
        import pandas as pd

        rows = []
        components: dict[str, None] = {}
        vector = False
        for r in ctx.records:
            if not r.ok or r.predictions is None or r.task not in ctx.tasks:
                continue
            data = ctx.tasks[r.task]
            names = [_column(name) for name in _component_names(data)]
            components.update(dict.fromkeys(names))
            preds = r.predictions
            theory = r.theory_predictions
            classes = bool(getattr(data, "n_classes", 0))
            width = 1 if classes or np.ndim(data.y) == 1 else int(np.shape(data.y)[1])
            vector = vector or width > 1
            test = data.test_mask
            for i, cell in enumerate(data.cells):
                for k in range(width):
                    row: dict[str, Any] = {"task": r.task, "model": r.model, "seed": r.seed,
                                           "split": "held_out" if test[i] else "train"}
                    for c, name in enumerate(names):
                        row[name] = _label(data, c, int(cell[c]))
                    if classes:  # the class, and the argmax of the per-class outputs
                        row["y"] = int(data.y[i])
                        row["prediction"] = int(np.argmax(preds[i]))
                        row["theory"] = int(np.argmax(theory[i])) if theory is not None else None
                    elif width > 1:
                        row["output"] = k
                        row["y"] = float(data.y[i][k])
                        row["prediction"] = preds[i][k]
                        row["theory"] = theory[i][k] if theory is not None else None
                    else:
                        row["y"] = float(data.y[i])
                        row["prediction"] = preds[i]
                        row["theory"] = theory[i] if theory is not None else None
                    rows.append(row)
        columns = [*PREDICTION_COLUMNS, *components, *(["output"] if vector else []), "y", "prediction", "theory"]
        return [ctx.write_file("predictions.csv", csv_text(pd.DataFrame(rows, columns=columns)))]


def _component_names(data: Any) -> list[str]:
    return list(data.component_names) or [f"component {c + 1}" for c in range(data.n_components)]


def _column(name: str) -> str:
    # A component named like a fixed column must not overwrite it.
    return f"component:{name}" if name in (*PREDICTION_COLUMNS, "output", "y", "prediction", "theory") else name


def _label(data: Any, c: int, v: int) -> str:
    label = getattr(data, "label", None)
    return label(c, v) if callable(label) else str(v)
