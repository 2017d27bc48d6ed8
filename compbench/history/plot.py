"""A history as a plot: one line per (model, task), or per model averaged over its tasks when there are many."""

from __future__ import annotations

import io
import math
from collections import defaultdict
from pathlib import Path

from compbench.history.table import History

MAX_LINES = 8  # more lines than this are unreadable: a model family's tasks are then averaged per model
FORMATS = ("png", "svg")


def _series(history: History) -> dict[str, list[float]]:
    """Label → one value per run (NaN where the run did not report it)."""
    if len(history.cells) <= MAX_LINES:
        return {f"{m}/{t} {metric}": [row.cells[(m, t, metric)].mean if (m, t, metric) in row.cells else math.nan
                                      for row in history.rows] for m, t, metric in history.cells}
    groups: dict[str, list[tuple[str, str, str]]] = defaultdict(list)
    for cell in history.cells:
        groups[f"{cell[0]} {cell[2]} (mean over tasks)"].append(cell)
    out = {}
    for label, cells in groups.items():
        values = []
        for row in history.rows:
            got = [row.cells[c].mean for c in cells if c in row.cells and row.cells[c].n]
            values.append(sum(got) / len(got) if got else math.nan)
        out[label] = values
    return out


def history_figure(history: History):  # -> matplotlib.figure.Figure
    """The figure: runs in order on the x axis, labelled by commit and date."""
    from compbench.report.plot_style import _plt

    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(history.rows) + 3), 4.5))
    x = list(range(len(history.rows)))
    for label, values in _series(history).items():
        ax.plot(x, values, marker="o", label=label)
    ax.set_xticks(x, [f"{row.commit}\n{row.date[5:]}" for row in history.rows], rotation=30, ha="right", fontsize=8)
    ax.set_xlabel("run (commit, date UTC)")
    ax.set_ylabel("mean over seeds")
    ax.set_title(f"{history.suite}: history over {len(history.rows)} run(s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def write_history_plot(history: History, path: Path) -> Path:
    """Write the plot to `path` (.png or .svg) atomically (compbench.files); the path written."""
    from compbench.files import write_atomic

    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        from compbench.history.runs import HistoryError

        raise HistoryError(f"--plot {path}: a plot is written as {' or '.join('.' + f for f in FORMATS)}; name the file so")
    fig = history_figure(history)
    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format=fmt, dpi=120)
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return write_atomic(path.parent, path.name, buffer.getvalue())
