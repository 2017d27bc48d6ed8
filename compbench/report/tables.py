"""Report tables: computed once as typed cell statistics, rendered to markdown (tabulate), HTML and CSV."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from tabulate import tabulate

from compbench import __version__
from compbench.scoring.expectations import Verdict

BIG_SWEEP = 12  # sweeps with more members are summarised, not listed member by member
ARRAY_FIELDS = ("predictions", "theory_predictions", "traceback", "determinism")
BEATS_KERNEL = "†"
NOT_RUN = ""  # the suite does not pair this model with this task
MISSING = "missing"  # the suite pairs them, but the store has no record (e.g. an interrupted run)

Expected = Iterable[tuple[str, str, str]]  # (model id, sweep group, task id) pairs the suite asks for


@dataclass(frozen=True)
class Table:
    """A titled table: headers, rows of strings, cells to emphasise (row, column), numeric sort keys."""

    title: str
    note: str
    headers: list[str]
    rows: list[list[str]]
    best: frozenset[tuple[int, int]] = frozenset()
    sort_keys: dict[tuple[int, int], float] = field(default_factory=dict)

    def markdown(self) -> str:
        """GitHub markdown (best cells in bold; '|' inside a cell escaped so the table stays intact)."""
        esc = lambda c: c.replace("|", "\\|")  # noqa: E731
        rows = [[f"**{esc(c)}**" if (i, j) in self.best else esc(c) for j, c in enumerate(row)] for i, row in enumerate(self.rows)]
        return tabulate(rows, headers=[esc(h) for h in self.headers], tablefmt="github", disable_numparse=True)


def _score_metric(rec: dict[str, Any]) -> str:
    return "heldout_acc" if "heldout_acc" in rec else "heldout_r2"


def _theory_metric(metric: str) -> str:
    return "theory_acc" if metric == "heldout_acc" else "theory_heldout_r2"


def _vals(vals: Iterable[Any]) -> list[float]:
    out = []
    for v in vals:
        if v is None:
            continue
        f = float(v)
        if not math.isnan(f):
            out.append(f)
    return out


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


def _status_of(recs: list[dict[str, Any]]) -> str:
    """ok (every record scored), partial (some failed), error, skipped, or missing (no record)."""
    if not recs:
        return MISSING
    statuses = {r["status"] for r in recs}
    if statuses == {"ok"}:
        return "ok"
    if "ok" in statuses:
        return "partial"
    return "error" if "error" in statuses else "skipped"


@dataclass
class CellStats:
    """One leaderboard cell: a model (or a big sweep, over its members) on a task, over seeds."""

    model: str
    task: str
    status: str  # ok | partial | error | skipped | missing
    metric: str = ""
    n_ok: int = 0
    n_error: int = 0
    n_skipped: int = 0
    mean: float = math.nan
    std: float = math.nan
    theory_mean: float = math.nan
    gap_mean: float = math.nan
    gap_se: float = math.nan
    beats_kernel: bool = False
    best: bool = False
    is_sweep: bool = False
    n_members: int = 1
    error: str = ""

    def text(self) -> str:
        """How the cell reads in the leaderboard."""
        if self.status in ("error", "skipped", MISSING):
            return self.status
        vals = f"{self.mean:.3f}" if self.n_ok == 1 or math.isnan(self.std) else f"{self.mean:.3f} ± {self.std:.3f}"
        mark = f" {BEATS_KERNEL}" if self.beats_kernel else ""
        failed = (f" ({self.n_error} error)" if self.n_error else "") + (f" ({self.n_skipped} skipped)" if self.n_skipped else "")
        return vals + mark + failed


def _beats(ok: list[dict[str, Any]], metric: str) -> tuple[float, float, float, bool]:
    """(theory mean, mean gap, SE of the gap, beats): score above the model's own kernel-theory score
    by more than 2 standard errors over seeds, and above 0 (needs ≥ 2 seeds to judge the noise)."""
    theory = _theory_metric(metric)
    th = _vals(r.get(theory) for r in ok)
    gaps = _vals(r[metric] - r[theory] for r in ok if r.get(theory) is not None and r.get(metric) is not None)
    if not gaps:
        return (float(np.mean(th)) if th else math.nan), math.nan, math.nan, False
    mean = float(np.mean(gaps))
    se = float(np.std(gaps, ddof=1) / math.sqrt(len(gaps))) if len(gaps) > 1 else math.nan
    return float(np.mean(th)), mean, se, bool(len(gaps) > 1 and mean > 0 and mean > 2 * se)


def _row_order(records: list[dict[str, Any]], expected: list[tuple[str, str, str]], big: set[str]) -> list[tuple[str, bool]]:
    """Leaderboard rows as (name, is big sweep), in suite order, then any stored-only rows."""
    names = [(g, True) if g in big else (m, False) for m, g, _ in expected]
    names += [(r["group"], True) if r["group"] in big else (r["model"], False) for r in records]
    return list(dict.fromkeys(names))


def leaderboard_cells(
    records: list[dict[str, Any]], tasks: list[str], expected: Expected = ()
) -> tuple[list[str], dict[tuple[str, str], CellStats]]:
    """Row labels and every (row, task) cell's statistics; cells neither run nor expected are absent."""
    expected = list(expected)
    members, big = _rows_key(records)
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["group"] in big and r["status"] == "skipped":
            continue  # invalid sweep members (e.g. non-PSD kernels) are counted in the sweep table
        by[(r["group"] if r["group"] in big else r["model"], r["task"])].append(r)
    wanted = {(g if g in big else m, t) for m, g, t in expected}
    labels, cells = [], {}
    for name, is_big in _row_order(records, expected, big):
        label = f"{name} ({len(members[name])} models)" if is_big else name
        labels.append(label)
        for task in tasks:
            recs = by.get((name, task), [])
            if not recs and (name, task) not in wanted:
                continue
            ok = [r for r in recs if r["status"] == "ok"]
            errors = [r for r in recs if r["status"] == "error"]
            cell = CellStats(label, task, _status_of(recs), n_ok=len(ok), n_error=len(errors),
                             n_skipped=sum(r["status"] == "skipped" for r in recs), is_sweep=is_big,
                             n_members=len(members[name]) if is_big else 1, error=str(errors[0].get("error", "")) if errors else "")
            if ok:
                cell.metric = _score_metric(ok[0])
                scores = _vals(r.get(cell.metric) for r in ok)
                if scores:
                    cell.mean = float(np.mean(scores))
                    cell.std = float(np.std(scores, ddof=1)) if len(scores) > 1 else math.nan
                if not is_big:
                    cell.theory_mean, cell.gap_mean, cell.gap_se, cell.beats_kernel = _beats(ok, cell.metric)
            cells[(label, task)] = cell
    for task in tasks:
        col = [c for (_, t), c in cells.items() if t == task and not math.isnan(c.mean)]
        if col:
            top = max(c.mean for c in col)
            for c in col:
                c.best = bool(abs(c.mean - top) <= 5e-4)  # ties at the shown precision are all best
    return labels, cells


def leaderboard(records: list[dict[str, Any]], tasks: list[str], expected: Expected = ()) -> Table:
    """Models × tasks: held-out score mean ± std over seeds; best per column in bold."""
    labels, cells = leaderboard_cells(records, tasks, expected)
    rows, best, keys = [], set(), {}
    for i, label in enumerate(labels):
        line = [label]
        for j, task in enumerate(tasks, start=1):
            cell = cells.get((label, task))
            line.append(cell.text() if cell else NOT_RUN)
            if cell and cell.best:
                best.add((i, j))
            if cell and not math.isnan(cell.mean):
                keys[(i, j)] = cell.mean
        rows.append(line)
    note = (
        "Mean ± std over seeds: accuracy on held-out cells for ±1 tasks (a tie at 0 counts ½), R² against the truth "
        f"for regression tasks; sweeps of more than {BIG_SWEEP} models: over their members. Best per column in bold. "
        f"{BEATS_KERNEL} = beats its own kernel-theory score (accuracy, or R² for regression) by more than 2 standard "
        "errors over seeds (needs ≥ 2 seeds). `error`: every seed failed; `(n error)`: n seeds failed; `skipped`: "
        "invalid model (e.g. a non-PSD kernel); `missing`: the suite asks for the cell but no result is stored; "
        "blank: the suite does not run this model on this task."
    )
    return Table("Held-out score", note, ["model", *tasks], rows, frozenset(best), keys)


def leaderboard_frame(records: list[dict[str, Any]], tasks: list[str], expected: Expected = ()) -> pd.DataFrame:
    """The leaderboard as one typed row per (model, task) cell, for leaderboard.csv."""
    _, cells = leaderboard_cells(records, tasks, expected)
    columns = list(CellStats.__dataclass_fields__)
    frame = pd.DataFrame([asdict(c) for c in cells.values()], columns=columns)
    return frame.astype({"n_ok": int, "n_error": int, "n_skipped": int, "n_members": int,
                         "beats_kernel": bool, "best": bool, "is_sweep": bool,
                         "mean": float, "std": float, "theory_mean": float, "gap_mean": float, "gap_se": float})


@dataclass
class TheoryStats:
    """Agreement of a model (or a big sweep's worst member) with its kernel theory on one task."""

    model: str
    task: str
    status: str
    theory_kernel: str = ""
    theory_objective: str = ""
    worst_of: int = 1  # > 1: a big sweep, the statistics are its worst member's
    theory_r2_mean: float = math.nan
    theory_r2_std: float = math.nan
    max_abs_diff: float = math.nan
    additivity_mean: float = math.nan
    additivity_std: float = math.nan
    slope_mean: float = math.nan
    theory_slope_mean: float = math.nan


def _mstd(vals: Iterable[Any]) -> tuple[float, float]:
    v = _vals(vals)
    return (float(np.mean(v)) if v else math.nan, float(np.std(v, ddof=1)) if len(v) > 1 else math.nan)


def theory_stats(records: list[dict[str, Any]], tasks: list[str], expected: Expected = ()) -> list[TheoryStats]:
    """Per model and task: kernel used, agreement with its theory prediction, additivity, slopes."""
    expected = list(expected)
    members, big = _rows_key(records)
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["group"] in big and r["status"] == "skipped":
            continue
        by[(r["group"] if r["group"] in big else r["model"], r["task"])].append(r)
    wanted = {(g if g in big else m, t) for m, g, t in expected}
    order = {t: i for i, t in enumerate(tasks)}
    out = []
    for name, is_big in _row_order(records, expected, big):
        for task in sorted({t for (n, t) in [*by, *wanted] if n == name}, key=lambda t: order.get(t, len(order))):
            recs = by.get((name, task), [])
            ok = [r for r in recs if r["status"] == "ok"]
            st = TheoryStats(name, task, _status_of(recs), worst_of=len(members[name]) if is_big else 1)
            if ok:
                st.theory_kernel = str(ok[0].get("theory_kernel", ""))
                st.theory_objective = str(ok[0].get("theory_objective", ""))
                if is_big:  # the worst member speaks for the sweep
                    st.theory_r2_mean = min(_vals(r.get("theory_r2") for r in ok), default=math.nan)
                    st.additivity_mean = min(_vals(r.get("additivity") for r in ok), default=math.nan)
                else:
                    st.theory_r2_mean, st.theory_r2_std = _mstd(r.get("theory_r2") for r in ok)
                    st.additivity_mean, st.additivity_std = _mstd(r.get("additivity") for r in ok)
                st.max_abs_diff = max(_vals(r.get("theory_max_abs_diff") for r in ok), default=math.nan)
                st.slope_mean = _mstd(r.get("slope") for r in ok)[0]
                st.theory_slope_mean = _mstd(r.get("theory_slope") for r in ok)[0]
            out.append(st)
    return out


def _fmt(mean: float, std: float = math.nan) -> str:
    if math.isnan(mean):
        return "–"
    return f"{mean:.3f}" if math.isnan(std) else f"{mean:.3f} ± {std:.3f}"


def theory_table(records: list[dict[str, Any]], tasks: list[str] | None = None, expected: Expected = ()) -> Table:
    """Per model and task: kernel used, agreement with its theory prediction, additivity, slopes."""
    tasks = tasks if tasks is not None else list(dict.fromkeys(r["task"] for r in records))
    rows, keys = [], {}
    for i, st in enumerate(theory_stats(records, tasks, expected)):
        name = f"{st.model} (worst of {st.worst_of})" if st.worst_of > 1 else st.model
        if st.status in ("error", "skipped", MISSING):
            rows.append([name, st.task, *[st.status] * 6])
            continue
        kernel = f"{st.theory_kernel or '–'}/{st.theory_objective or '–'}" + (" (some seeds failed)" if st.status == "partial" else "")
        rows.append([
            name, st.task, kernel, _fmt(st.theory_r2_mean, st.theory_r2_std),
            "–" if math.isnan(st.max_abs_diff) else f"{st.max_abs_diff:.2e}",
            _fmt(st.additivity_mean, st.additivity_std), _fmt(st.slope_mean), _fmt(st.theory_slope_mean),
        ])
        for j, v in ((3, st.theory_r2_mean), (4, st.max_abs_diff), (5, st.additivity_mean), (6, st.slope_mean), (7, st.theory_slope_mean)):
            if not math.isnan(v):
                keys[(i, j)] = v
    note = (
        "R² and max |Δ| compare each model's held-out predictions with the kernel-theory prediction for the same split "
        "(its own kernel and objective); additivity is the held-out R² of the conjunction-wise additive fit "
        "(1 = the model only adds up values of conjunctions seen in training). Slopes: held-out prediction against the "
        "truth (regression tasks), for the model and for its theory. Mean ± std over seeds; big sweeps: their worst member."
    )
    headers = ["model", "task", "theory kernel/objective", "R²(model, theory)", "max |model − theory|", "additivity R²",
               "slope", "theory slope"]
    return Table("Agreement with the kernel theory and conjunction-wise additivity", note, headers, rows, sort_keys=keys)


def theory_frame(records: list[dict[str, Any]], tasks: list[str], expected: Expected = ()) -> pd.DataFrame:
    """The theory table as typed rows, for theory.csv."""
    columns = list(TheoryStats.__dataclass_fields__)
    frame = pd.DataFrame([asdict(s) for s in theory_stats(records, tasks, expected)], columns=columns)
    return frame.astype({"worst_of": int, **{c: float for c in columns[6:]}})


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
        recs = [r for r in records if r["group"] == group and r["task"] == task]
        skipped = len({r["model"] for r in recs if r["status"] == "skipped"})
        failed = len({r["model"] for r in recs if r["status"] == "error"})
        rows.append([group, task, str(len(means)), str(skipped), str(failed), str(sum(m >= 1 - 1e-9 for m in means)),
                     f"{np.mean(means):.3f}"])
    headers = ["sweep", "task", "models scored", "skipped (invalid)", "failed", "perfect held-out", "mean held-out"]
    note = f"Sweeps of more than {BIG_SWEEP} models: how many members reach a perfect held-out score."
    return Table("Sweeps", note, headers, rows)


def expectations_table(verdicts: list[Verdict]) -> Table:
    """Each claim checked: subject, task, measured value, threshold, PASS/FAIL."""
    rows = [[v.expectation, v.claim, v.subject, v.task, f"{v.measured:.4g}", v.threshold, v.status, v.detail] for v in verdicts]
    headers = ["expectation", "claim", "model", "task", "measured", "threshold", "verdict", "detail"]
    keys = {(i, 4): v.measured for i, v in enumerate(verdicts) if not math.isnan(v.measured)}
    note = "" if verdicts else "No expectations were judged (the suite has none, or only part of it ran)."
    return Table("Expectations", note, headers, rows, sort_keys=keys)


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
    if summary.get("interrupted"):
        rows.append(["interrupted", "yes: the run was stopped; these are the cells finished so far"])
    return Table("Run summary", "", ["", ""], rows)


def report_tables(
    task_ids: list[str], records: list[dict[str, Any]], verdicts: list[Verdict], summary: dict[str, Any],
    expected: Expected = (),
) -> list[Table]:
    """Every table of the report, in order."""
    expected = list(expected)
    tables = [summary_table(summary, verdicts), leaderboard(records, task_ids, expected), theory_table(records, task_ids, expected)]
    sweeps = sweep_table(records)
    if sweeps:
        tables.append(sweeps)
    tables.append(expectations_table(verdicts))
    return tables


def markdown_report(suite_name: str, tables: list[Table], plots: Sequence[tuple[str, str]] = ()) -> str:
    """The leaderboard markdown file; plots are (file name under plots/, caption)."""
    lines = [f"# {suite_name}: leaderboard", ""]
    for t in tables:
        lines += [f"## {t.title}", ""] + ([t.note, ""] if t.note else []) + [t.markdown(), ""]
    if plots:
        lines += ["## Plots", ""]
        for name, caption in plots:
            lines += [f"![{caption}](plots/{name})", "", f"*{caption}*", ""]
    return "\n".join(lines)


def records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Records as a flat table (prediction arrays dropped; sweep values and the adapter's info as columns)."""
    rows = []
    for r in records:
        row = {k: v for k, v in r.items() if k not in ARRAY_FIELDS and k not in ("sweep", "info")}
        for k, v in (r.get("sweep") or {}).items():
            row[f"sweep.{k}"] = v
        for k, v in (r.get("info") or {}).items():
            row[f"info.{k}"] = v
        rows.append(row)
    return pd.DataFrame(rows)
