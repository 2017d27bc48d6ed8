"""The end of `compbench run` and `compbench report`: a compact leaderboard, the failing expectations, where the files are.

A rich table on a terminal; plain text (one line per model) when the output is a pipe or a file.
"""

from __future__ import annotations

from compbench.records import CellRecord, as_records

import math
import sys
from pathlib import Path
from typing import Any, TextIO

from compbench.report.statistics import CellStats, ceiling_models, leaderboard_cells
from compbench.report.tables import Table, cell_errors, factor_tables, metric_header
from compbench.records.metric_facts import headline_metric, headline_metrics


def one_line(text: str) -> str:
    """Text as one terminal line: line breaks and other control characters shown escaped, not obeyed."""
    return "".join(c if c.isprintable() else ascii(c)[1:-1] for c in text)


def _cell(c: CellStats | None) -> str:
    if c is None:
        return ""
    if math.isnan(c.mean):
        return c.status
    text = f"{c.mean:.3f}" + (" ±" + f"{c.std:.2f}" if c.n_ok > 1 and not math.isnan(c.std) else "")
    return text + (" (err)" if c.n_error else "")


def _tasks_expected(loaded: Any) -> tuple[list[str], list[tuple[str, str, str]]]:
    return [t.id for t in loaded.suite.tasks], [(m.id, m.group, t.id) for m in loaded.models for t in loaded.tasks_for(m)]


def compact_rows(loaded: Any, records: list[CellRecord]) -> tuple[list[str], list[list[str]], set[tuple[int, int]]]:
    """Headers ('model', 'te acc ↑', …), one row per model, and the (row, column) cells that are best."""
    records = as_records(records)
    tasks, expected = _tasks_expected(loaded)
    labels, cells = leaderboard_cells(records, tasks, expected, ceiling_models(loaded))
    kinds = getattr(loaded, "task_kinds", {}) or {}
    heads = {**{t: headline_metric(k) for t, k in kinds.items()}, **headline_metrics(records)}
    headers = ["model"] + [f"{t} {metric_header(heads[t])}" if t in heads else t for t in tasks]
    rows, best = [], set()
    for i, label in enumerate(labels):
        row = [label]
        for j, t in enumerate(tasks, start=1):
            c = cells.get((label, t))
            row.append(_cell(c))
            if c is not None and c.best:
                best.add((i, j))
        rows.append(row)
    return headers, rows, best


def _plain(headers: list[str], rows: list[list[str]], best: set[tuple[int, int]]) -> str:
    from tabulate import tabulate

    marked = [[f"{c}*" if (i, j) in best else c for j, c in enumerate(r)] for i, r in enumerate(rows)]
    return tabulate(marked, headers=headers, tablefmt="simple", disable_numparse=True)


def factor_table(loaded: Any, records: list[CellRecord]) -> Table | None:
    """The per-factor scores of the multi-factor tasks (R² per factor, shape accuracy; each with its theory's), or None."""
    tables = factor_tables(records, *_tasks_expected(loaded), compact=True)
    return tables[0] if tables else None


def _rich(headers: list[str], rows: list[list[str]], best: set[tuple[int, int]], out: TextIO,
          title: str = "held-out score (mean ± std over seeds; bold = best, above chance)", row_headers: int = 1) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for j, h in enumerate(headers):
        table.add_column(escape(h), justify="left" if j < row_headers else "right", no_wrap=j < row_headers)
    for i, r in enumerate(rows):
        # Sweep member ids hold brackets (`m[init_scale=0.1]`): text, not rich markup.
        table.add_row(*[f"[bold green]{escape(c)}[/]" if (i, j) in best else escape(c) for j, c in enumerate(r)])
    Console(file=out).print(table)


def print_errors(records: list[CellRecord], every: bool = False, out: TextIO | None = None) -> None:
    """'errors:' and one line per (model, task) that failed with its first message (`every`: one per failed seed)."""
    out = out or sys.stdout
    errors = cell_errors(records, every)
    if errors:
        print("errors:" if every else "errors (the first per model and task; all in records.csv):", file=out)
        for model, task, message in errors:
            print(one_line(f"  {model} on {task}: {message}"), file=out)


def print_leaderboard(loaded: Any, records: list[CellRecord], verdicts: list[Any], out: TextIO | None = None,
                      every_error: bool = False, table: bool = True) -> None:
    """The compact leaderboard, every failing expectation, then each failed cell's error (rich on a TTY, plain text otherwise).

    `table=False` (`-q`): the problems only, without the table.
    """
    out = out or sys.stdout
    headers, rows, best = compact_rows(loaded, records) if table else ([], [], set())
    if rows:
        if out.isatty():
            _rich(headers, rows, best, out)
        else:
            print("held-out score (mean ± std over seeds; * = best, above chance)", file=out)
            print(_plain(headers, rows, best), file=out)
    factors = factor_table(loaded, records) if table else None
    if factors is not None:
        title = "held-out score per factor (mean over seeds; the model's theory in parentheses)"
        if out.isatty():
            _rich(factors.headers, factors.rows, set(), out, title, row_headers=2)
        else:
            print(title, file=out)
            print(_plain(factors.headers, factors.rows, set()), file=out)
    for v in verdicts:
        if v.status != "PASS" or v.warning:
            print(one_line(f"  {v.line()}"), file=out)
    print_errors(records, every_error, out)


def print_files(out_dir: Path, paths: list[Path], out: TextIO | None = None) -> None:
    """Where the report is: the leaderboard files first, the count of the others."""
    out = out or sys.stdout
    main = [p for p in paths if p.name in ("leaderboard.html", "leaderboard.md")]
    rest = [p.name for p in paths if p not in main and p.suffix not in (".png", ".svg")]
    n_plots = sum(p.suffix == ".png" for p in paths)
    print(f"report: {', '.join(str(p) for p in main) or out_dir}"
          + (f" (and {', '.join(rest)}" + (f", {n_plots} plots" if n_plots else "") + f" in {out_dir})" if rest or n_plots else ""),
          file=out)


def print_report_end(out_dir: Path, loaded: Any, records: list[CellRecord], verdicts: list[Any], paths: list[Path],
                     out: TextIO | None = None, every_error: bool = False, table: bool = True) -> None:
    """The end of `compbench report`: the compact leaderboard of the stored records, failing expectations, errors, the files."""
    print_leaderboard(loaded, records, verdicts, out, every_error, table)
    print_files(out_dir, paths, out)


def print_fit_warnings(loaded: Any, records: list[CellRecord], out: TextIO | None = None) -> int:
    """Warn (stderr) about each model and task whose training score misses its fit threshold; how many did."""
    from compbench.report.tables import FIT_NOTE
    from compbench.records.metric_facts import fit_lines, fit_warnings

    found = fit_warnings(as_records(records), loaded.suite.fit_threshold)
    out = out or sys.stderr
    for line in fit_lines(found):
        print(one_line(f"warning: {line}"), file=out)
    if found:
        print(f"  ({FIT_NOTE})", file=out)
    return len(found)
