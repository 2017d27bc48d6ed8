"""A suite's metrics across the runs its store recorded: one PNG per held-out metric, a line per model (or per
model and task when there are few), each run labelled by its commit."""

from __future__ import annotations

import io
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_LINES = 10  # more (model, task) lines than this: one line per model, its mean over the metric's tasks


@dataclass(frozen=True)
class HistoryPlot:
    """One metric across runs: `name` (its file's stem), a caption, and the PNG's bytes."""

    name: str
    caption: str
    png: bytes


def run_label(run: Any) -> str:
    """A run on the x axis: its commit's short SHA (`+` when dirty), else its id; and its date."""
    own = run.info.get("compbench") if isinstance(run.info.get("compbench"), dict) else {}
    sha = own.get("commit") if isinstance(own.get("commit"), str) else None
    day = time.strftime("%m-%d %H:%M", time.gmtime(run.started)) if run.started else ""
    return f"{sha[:7]}{'+' if own.get('dirty') else ''}\n{day}" if sha else f"{run.id}\n{day}"


def run_means(directory: Path, runs: list[Any]) -> dict[str, dict[tuple[str, str], list[float]]]:
    """metric → (model or sweep, task) → its mean over seeds in each run (NaN where the run has none), from the
    records each run reported (store.ResultStore.run_records)."""
    from compbench.records.metric_facts import headline_metrics
    from compbench.store.records import ResultStore

    store = ResultStore(directory / "store")
    sums: dict[str, dict[tuple[str, str], list[list[float]]]] = {}
    try:
        per_run = [[r for r in store.run_records(run) if r.ok] for run in runs]
    finally:
        store.close()
    heads = headline_metrics(r for recs in per_run for r in recs)  # one headline per task over every run
    for i, recs in enumerate(per_run):
        for r in recs:
            metric = heads[r.task]
            value = r.metric(metric)
            if value is None or not math.isfinite(value):
                continue
            cells = sums.setdefault(metric, {}).setdefault((r.group or r.model, r.task), [[] for _ in runs])
            cells[i].append(float(value))
    return {m: {k: [sum(v) / len(v) if v else math.nan for v in per_run] for k, per_run in cells.items()}
            for m, cells in sums.items()}


def history_plots(directory: Path, runs: list[Any]) -> list[HistoryPlot]:
    """One plot per held-out metric of the runs' records (runs oldest first; callers pass ≥ 2)."""
    from compbench.report.plot_style import _plt, model_colors
    from compbench.records.metric_facts import METRICS

    plt = _plt()
    plots = []
    for metric, lines in run_means(directory, runs).items():
        per_task = len(lines) <= MAX_LINES
        if not per_task:  # one line per model: the mean over its tasks of each run
            by_model: dict[str, list[list[float]]] = {}
            for (model, _), values in lines.items():
                by_model.setdefault(model, []).append(values)
            lines = {(m, ""): [_mean(col) for col in zip(*rows)] for m, rows in by_model.items()}
        colors = model_colors(list(dict.fromkeys(m for m, _ in lines)))
        fig, ax = plt.subplots(figsize=(7.5, 4.2))
        x = list(range(len(runs)))
        for (model, task), values in lines.items():
            ax.plot(x, values, marker="o", color=colors[model], label=f"{model} / {task}" if task else model)
        ax.set_xticks(x, [run_label(r) for r in runs], fontsize=7)
        label = METRICS[metric].label if metric in METRICS else metric
        ax.set_ylabel(label)
        ax.set_xlabel("run (commit, date UTC)")
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
        plt.close(fig)
        what = "each model on each task" if per_task else "each model, mean over its tasks"
        plots.append(HistoryPlot(f"history-{metric}", f"{label} across {len(runs)} runs: {what}, mean over seeds",
                                 buf.getvalue()))
    return plots


def _mean(values: tuple[float, ...]) -> float:
    present = [v for v in values if not math.isnan(v)]
    return sum(present) / len(present) if present else math.nan
