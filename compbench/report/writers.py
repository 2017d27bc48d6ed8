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
    def tables(self) -> list[Any]:
        """Every table of the report (compbench.report.tables.Table), in order."""
        from compbench.report.tables import report_tables

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
        from compbench.scoring.metric_facts import fit_lines, fit_warnings

        return fit_lines(fit_warnings(self.records, self.loaded.suite.fit_threshold))

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
    instance.name = name  # type: ignore[misc]  # the instance's, not the class's: a class registered twice keeps each name
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
        from compbench.report.intro import intro
        from compbench.report.legend import headline
        from compbench.report.tables import markdown_report

        shown = [(f"{p.name}.png", p.caption) for p in ctx.plots] if "png" in ctx.formats else []
        found = ctx.findings([name.removesuffix(".png") for name, _ in shown])
        return [ctx.write_file("leaderboard.md", markdown_report(ctx.loaded.name, ctx.tables, shown, headline(ctx), found,
                                                                intro(ctx.loaded), ctx.fit_warnings))]


@register_reporter("csv")
class CsvWriter(Reporter):
    """leaderboard.csv, theory.csv, records.csv, expectations.csv: typed rows for pandas."""

    def write(self, ctx: ReportContext) -> list[Path]:
        import pandas as pd

        from compbench.claims import Verdict
        from compbench.report.tables import ceiling_models, leaderboard_frame, records_frame, theory_frame

        csvs = {
            "leaderboard.csv": leaderboard_frame(ctx.records, ctx.task_ids, ctx.expected, ceiling_models(ctx.loaded)),
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
        return [ctx.write_file("leaderboard.html", leaderboard_html(ctx))]


def leaderboard_html(ctx: ReportContext, home: str = "") -> str:
    """The suite's self-contained leaderboard page (leaderboard.html, and each suite's page of `compbench site`);
    `home`: a relative link back to the page that lists it ("" for none)."""
    from compbench.report.html import html_report
    from compbench.report.intro import intro
    from compbench.report.legend import headline

    found = ctx.findings([p.name for p in ctx.plots])
    return html_report(ctx.loaded.name, ctx.tables, ctx.plots, headline(ctx), found, intro(ctx.loaded), ctx.fit_warnings,
                       home=home)


PREDICTION_COLUMNS = ("task", "model", "seed", "split")


@register_reporter("predictions")
class PredictionsWriter(Reporter):
    """predictions.csv: one row per (task, model, seed, cell) with the cell's labels, truth, prediction and theory."""

    def write(self, ctx: ReportContext) -> list[Path]:
        import pandas as pd

        # Built a column at a time, per record: a sweep of 1,728 models writes ~10^6 rows.
        parts: list[dict[str, Any]] = []
        components: dict[str, None] = {}
        vector = False
        labels: dict[str, dict[str, np.ndarray]] = {}
        for r in ctx.records:
            if not r.ok or r.predictions is None or r.task not in ctx.tasks:
                continue
            data = ctx.tasks[r.task]
            if r.task not in labels:
                names = [_column(name) for name in _component_names(data)]
                cells = np.asarray(data.cells, dtype=int).reshape(len(data.cells), -1)
                labels[r.task] = {name: np.array([_label(data, c, int(v)) for v in cells[:, c]], dtype=object)
                                  for c, name in enumerate(names)}
            task_labels = labels[r.task]
            components.update(dict.fromkeys(task_labels))
            n = len(data.cells)
            classes = bool(getattr(data, "n_classes", 0))
            width = 1 if classes or np.ndim(data.y) == 1 else int(np.shape(data.y)[1])
            vector = vector or width > 1
            preds = np.asarray(r.predictions, dtype=float)
            theory = None if r.theory_predictions is None else np.asarray(r.theory_predictions, dtype=float)
            split = np.where(np.asarray(data.test_mask, dtype=bool), "held_out", "train").astype(object)
            part: dict[str, Any] = {"task": np.full(n * width, r.task, dtype=object),
                                    "model": np.full(n * width, r.model, dtype=object),
                                    "seed": np.full(n * width, r.seed), "split": np.repeat(split, width)}
            for name, column in task_labels.items():
                part[name] = np.repeat(column, width)
            if classes:  # the class, and the argmax of the per-class outputs
                part["y"] = np.asarray(data.y, dtype=int)
                part["prediction"] = np.argmax(preds.reshape(n, -1), axis=1)
                part["theory"] = np.argmax(theory.reshape(n, -1), axis=1) if theory is not None else np.full(n, None)
            else:
                if width > 1:
                    part["output"] = np.tile(np.arange(width), n)
                part["y"] = np.asarray(data.y, dtype=float).reshape(-1)
                part["prediction"] = preds.reshape(-1)
                part["theory"] = theory.reshape(-1) if theory is not None else np.full(n * width, np.nan)
            parts.append(part)
        columns = [*PREDICTION_COLUMNS, *components, *(["output"] if vector else []), "y", "prediction", "theory"]
        # One numpy concatenation per column (pandas' concat of 10^4 small frames takes seconds).
        sizes = [len(part["task"]) for part in parts]
        frame = pd.DataFrame({c: np.concatenate([part[c] if c in part else np.full(n, None, dtype=object)
                                                 for part, n in zip(parts, sizes)]) if parts else []
                              for c in columns}, columns=columns)
        return [ctx.write_file("predictions.csv", csv_text(frame))]


def _component_names(data: Any) -> list[str]:
    return list(data.component_names) or [f"component {c + 1}" for c in range(data.n_components)]


def _column(name: str) -> str:
    # A component named like a fixed column must not overwrite it.
    return f"component:{name}" if name in (*PREDICTION_COLUMNS, "output", "y", "prediction", "theory") else name


def _label(data: Any, c: int, v: int) -> str:
    label = getattr(data, "label", None)
    return label(c, v) if callable(label) else str(v)
