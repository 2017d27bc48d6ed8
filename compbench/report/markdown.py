"""leaderboard.md: every table of the report in order, the fit warnings, the findings and the plots, as markdown."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from compbench.report.escape import md_text
from compbench.report.legend import models_table, run_facts, tasks_table
from compbench.report.tables import (FIT_NOTE, Table, detail_table, errors_table, expectations_table, factor_tables,
                                     leaderboard, summary_table, sweep_table, theory_table)


def report_tables(ctx: Any) -> list[Table]:
    """Every table of the report, in order, from a `compbench.report.writers.ReportContext`."""
    task_ids, expected, records, stats = ctx.task_ids, list(ctx.expected), ctx.records, ctx.statistics
    kinds = {t: d.kind for t, d in ctx.tasks.items()}
    tables = [summary_table(ctx.summary, ctx.verdicts, run_facts(ctx)), tasks_table(ctx), models_table(ctx),
              leaderboard(records, task_ids, expected, kinds, references=stats.references, board=stats.leaderboard),
              *factor_tables(records, task_ids, expected, board=stats.leaderboard),
              theory_table(records, task_ids, expected, theory=stats.theory)]
    sweeps = sweep_table(records)
    if sweeps:
        tables.append(sweeps)
    errors = errors_table(records)
    if errors:
        tables.append(errors)
    tables += [expectations_table(ctx.verdicts), detail_table(records, task_ids, expected, board=stats.leaderboard)]
    return tables


def markdown_warnings(warnings: Sequence[str]) -> list[str]:
    """The fit warnings as a markdown quote block under the headline (nothing when there are none)."""
    if not warnings:
        return []
    return ([f"> **Warning: {len(warnings)} model/task pair(s) did not fit their training cells** ({md_text(FIT_NOTE)})", ">"]
            + [f"> - {md_text(w)}" for w in warnings] + [""])


def markdown_report(suite_name: str, tables: list[Table], plots: Sequence[tuple[str, str]] = (), headline: str = "",
                    findings: Sequence[Any] | None = None, intro: Any = None, warnings: Sequence[str] = ()) -> str:
    """The leaderboard markdown file; plots are (file name under plots/, caption); `headline` under the title.

    `findings` (compbench.report.findings.Finding): the Findings section, first; None leaves it out.
    `intro` (compbench.report.intro.Intro): the suite's description, its papers and what the numbers mean, under the title.
    `warnings`: lines shown under the headline, before everything else (fit warnings).
    """
    from compbench.report.findings import markdown_findings
    from compbench.report.intro import markdown_intro

    lines = [f"# {md_text(suite_name)}: leaderboard", ""] + (markdown_intro(intro) if intro is not None else [])
    lines += [md_text(headline), ""] if headline else []
    lines += markdown_warnings(warnings)
    if findings is not None:
        lines += markdown_findings(findings, plot_files=bool(plots))
    for t in tables:
        if t.html_only:
            continue
        body = t.markdown()
        lines += [f"## {t.title}", ""] + ([t.note, ""] if t.note else []) + ([body, ""] if body else [])
        if t.folded:
            lines += ["<details>", f"<summary>{md_text(t.folded_label)}</summary>", "", t.folded_markdown(), "", "</details>", ""]
    if plots:
        lines += ["## Plots", ""]
        for name, caption in plots:
            lines += [f"![{md_text(caption)}](plots/{name})", "", f"*{md_text(caption)}*", ""]
    return "\n".join(lines)
