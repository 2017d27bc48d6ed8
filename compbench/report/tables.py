"""Report tables: built once as (headers, rows), rendered to markdown (tabulate), HTML and CSV."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from tabulate import tabulate

from compbench import __version__
from compbench.scoring.expectations import Verdict

BIG_SWEEP = 12  # sweeps with more members are summarised, not listed member by member
ARRAY_FIELDS = ("predictions", "theory_predictions", "traceback", "determinism")
BEATS_KERNEL = "†"


@dataclass(frozen=True)
class Table:
    """A titled table: headers, rows of strings, and cells to emphasise (row, column)."""

    title: str
    note: str
    headers: list[str]
    rows: list[list[str]]
    best: frozenset[tuple[int, int]] = frozenset()

    def markdown(self) -> str:
        """GitHub markdown (best cells in bold; '|' inside a cell escaped so the table stays intact)."""
        esc = lambda c: c.replace("|", "\\|")  # noqa: E731
        rows = [[f"**{esc(c)}**" if (i, j) in self.best else esc(c) for j, c in enumerate(row)] for i, row in enumerate(self.rows)]
        return tabulate(rows, headers=[esc(h) for h in self.headers], tablefmt="github", disable_numparse=True)


def _score_metric(rec: dict[str, Any]) -> str:
    return "heldout_acc" if "heldout_acc" in rec else "heldout_r2"


def _vals(vals: Sequence[float | None]) -> list[float]:
    return [float(v) for v in vals if v is not None and not math.isnan(v)]


def _mean_std(vals: Sequence[float | None]) -> str:
    v = _vals(vals)
    if not v:
        return "–"
    if len(v) == 1:
        return f"{v[0]:.3f}"
    return f"{np.mean(v):.3f} ± {np.std(v, ddof=1):.3f}"


def _rows_key(records: list[dict[str, Any]]) -> tuple[dict[str, list[str]], set[str]]:
    """Scored (not skipped) members per sweep group, and which groups are big."""
    members: dict[str, dict[str, None]] = defaultdict(dict)
    for r in records:
        if r["status"] != "skipped":
            members[r["group"]][r["model"]] = None
    big = {g for g, ms in members.items() if len(ms) > BIG_SWEEP}
    return {g: list(ms) for g, ms in members.items()}, big


def _beats_kernel(ok: list[dict[str, Any]]) -> bool:
    """Held-out score above the model's own kernel-theory score by > 2 standard errors."""
    metric = _score_metric(ok[0])
    theory = "theory_acc" if metric == "heldout_acc" else "theory_heldout_r2"
    gaps = _vals([r[metric] - r[theory] for r in ok if r.get(theory) is not None])
    if len(gaps) < 2:
        return False
    se = np.std(gaps, ddof=1) / math.sqrt(len(gaps))
    return bool(np.mean(gaps) > 0 and np.mean(gaps) > 2 * se)


def leaderboard(records: list[dict[str, Any]], tasks: list[str]) -> Table:
    """Models × tasks: held-out score mean ± std over seeds; best per column in bold."""
    members, big = _rows_key(records)
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["group"] in big and r["status"] == "skipped":
            continue  # invalid sweep members (e.g. non-PSD kernels) are counted in the sweep table
        row = f"{r['group']} ({len(members[r['group']])} models)" if r["group"] in big else r["model"]
        by[(row, r["task"])].append(r)
    names = list(dict.fromkeys(row for row, _ in by))
    rows, means = [], np.full((len(names), len(tasks)), np.nan)
    for i, name in enumerate(names):
        line = [name]
        for j, task in enumerate(tasks):
            recs = by.get((name, task), [])
            ok = [r for r in recs if r["status"] == "ok"]
            if not recs:
                line.append("")
            elif not ok:
                line.append("skipped" if all(r["status"] == "skipped" for r in recs) else "error")
            else:
                scores = [r[_score_metric(r)] for r in ok]
                means[i, j] = np.mean(_vals(scores)) if _vals(scores) else np.nan
                n_err = sum(r["status"] == "error" for r in recs)
                mark = f" {BEATS_KERNEL}" if name not in big and _beats_kernel(ok) else ""
                line.append(_mean_std(scores) + mark + (f" ({n_err} error)" if n_err else ""))
        rows.append(line)
    best = set()
    for j in range(len(tasks)):
        col = means[:, j]
        if np.isfinite(col).any():
            top = np.nanmax(col)
            best |= {(i, j + 1) for i in np.flatnonzero(np.isclose(col, top, atol=5e-4))}
    note = (
        "Mean ± std over seeds: accuracy on held-out cells for ±1 tasks (a tie at 0 counts ½), R² against the truth "
        f"for regression tasks. Best per column in bold; {BEATS_KERNEL} = beats its own kernel-theory prediction by "
        "more than 2 standard errors over seeds."
    )
    return Table("Held-out score", note, ["model", *tasks], rows, frozenset(best))


def theory_table(records: list[dict[str, Any]]) -> Table:
    """Per model and task: kernel used, agreement with its theory prediction, additivity, slopes."""
    members, big = _rows_key(records)
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["status"] == "ok":
            by[(r["group"] if r["group"] in big else r["model"], r["task"])].append(r)
    rows = []
    for (name, task), recs in by.items():
        r0 = recs[0]
        worst = name in big
        nan = float("nan")
        rows.append([
            f"{name} (worst of {len(members[name])})" if worst else name,
            task,
            f"{r0.get('theory_kernel', '–')}/{r0.get('theory_objective', '–')}",
            _mean_std([min(r.get("theory_r2", nan) for r in recs)] if worst else [r.get("theory_r2", nan) for r in recs]),
            f"{max(r.get('theory_max_abs_diff', nan) for r in recs):.2e}",
            _mean_std([min(r["additivity"] for r in recs)] if worst else [r["additivity"] for r in recs]),
            _mean_std([r.get("slope", nan) for r in recs]),
            _mean_std([r.get("theory_slope", nan) for r in recs]),
        ])
    note = (
        "R² and max |Δ| compare each model's held-out predictions with the kernel-theory prediction for the same split "
        "(its own kernel and objective); additivity is the held-out R² of the conjunction-wise additive fit."
    )
    headers = ["model", "task", "theory kernel/objective", "R²(model, theory)", "max |model − theory|", "additivity R²", "slope", "theory slope"]
    return Table("Agreement with the kernel theory and conjunction-wise additivity", note, headers, rows)


def sweep_table(records: list[dict[str, Any]]) -> Table | None:
    """Big sweeps: per task, how many members reach a perfect held-out score."""
    members, big = _rows_key(records)
    if not big:
        return None
    by: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r["group"] in big and r["status"] == "ok":
            by[(r["group"], r["task"])][r["model"]].append(r[_score_metric(r)])
    rows = []
    for (group, task), per_member in sorted(by.items()):
        means = [float(np.mean(v)) for v in per_member.values()]
        skipped = len({r["model"] for r in records if r["group"] == group and r["task"] == task and r["status"] == "skipped"})
        rows.append([group, task, str(len(means)), str(skipped), str(sum(m >= 1 - 1e-9 for m in means)), f"{np.mean(means):.3f}"])
    headers = ["sweep", "task", "models scored", "skipped (invalid)", "perfect held-out", "mean held-out"]
    return Table("Sweeps", "", headers, rows)


def expectations_table(verdicts: list[Verdict]) -> Table:
    """Each claim checked: subject, task, measured value, threshold, PASS/FAIL."""
    rows = [[v.expectation, v.claim, v.subject, v.task, f"{v.measured:.4g}", v.threshold, v.status, v.detail] for v in verdicts]
    headers = ["expectation", "claim", "model", "task", "measured", "threshold", "verdict", "detail"]
    return Table("Expectations", "", headers, rows)


def summary_table(summary: dict[str, Any], verdicts: list[Verdict]) -> Table:
    """Run summary: device, wall time, cells, version, verdicts."""
    n_pass = sum(v.passed for v in verdicts)
    wall = summary.get("wall_time", float("nan"))
    rows = [
        ["compbench", __version__],
        ["device", str(summary.get("device", "?"))],
        ["executor", str(summary.get("executor", "local"))],
        ["wall time", f"{wall:.1f} s" if isinstance(wall, (int, float)) and math.isfinite(wall) else "–"],
        ["cells run", str(summary.get("n_run", 0))],
        ["cells cached", str(summary.get("n_cached", 0))],
        ["cells failed", str(summary.get("n_failed", 0))],
        ["cells skipped", str(summary.get("n_skipped", 0))],
        ["expectations", f"{n_pass}/{len(verdicts)} pass"],
    ]
    return Table("Run summary", "", ["", ""], rows)


def report_tables(
    task_ids: list[str], records: list[dict[str, Any]], verdicts: list[Verdict], summary: dict[str, Any]
) -> list[Table]:
    """Every table of the report, in order."""
    tables = [summary_table(summary, verdicts), leaderboard(records, task_ids), theory_table(records)]
    sweeps = sweep_table(records)
    if sweeps:
        tables.append(sweeps)
    tables.append(expectations_table(verdicts))
    return tables


def markdown_report(suite_name: str, tables: list[Table], plots: Sequence[str] = ()) -> str:
    """The leaderboard markdown file."""
    lines = [f"# {suite_name}: leaderboard", ""]
    for t in tables:
        lines += [f"## {t.title}", ""] + ([t.note, ""] if t.note else []) + [t.markdown(), ""]
    if plots:
        lines += ["## Plots", ""] + [f"![{p}](plots/{p})" for p in plots] + [""]
    return "\n".join(lines)


def records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Records as a flat table (prediction arrays dropped; sweep values as columns)."""
    rows = []
    for r in records:
        row = {k: v for k, v in r.items() if k not in ARRAY_FIELDS and k != "sweep"}
        for k, v in (r.get("sweep") or {}).items():
            row[f"sweep.{k}"] = v
        rows.append(row)
    return pd.DataFrame(rows)
