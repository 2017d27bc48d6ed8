"""Report tables: the statistics (compbench.report.statistics, computed once per report) rendered to markdown (tabulate),
HTML and CSV."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas is imported where a frame is built: the terminal leaderboard needs none
    import pandas as pd

from compbench import __version__
from compbench.records import BIG_SWEEP, CellRecord, as_records
from compbench.report.escape import md_cell
from compbench.claims.base import needs_text
from compbench.claims import Verdict
from compbench.records.metric_facts import (METRICS, MIN_R2_CELLS, PER_FACTOR, headline_metric, headline_metrics,
                                            per_factor_groups)
from compbench.report.statistics import (BEATS_KERNEL, CEILING, CHANCE_ONE_SEED, CHANCE_SE, MISSING, CellStats, Expected,
                                         Leaderboard, TheoryStats, leaderboard_cells, mean_and_theory,
                                         ok_by_cell, sweep_members, theory_stats)

ARRAY_FIELDS = ("predictions", "theory_predictions", "traceback", "determinism")
NOT_RUN = ""  # the suite does not pair this model with this task


@dataclass(frozen=True)
class Table:
    """A titled table: headers, rows of strings, cells to emphasise (row, column), numeric sort keys."""

    title: str
    note: str
    headers: list[str]
    rows: list[list[str]]
    best: frozenset[tuple[int, int]] = frozenset()
    sort_keys: dict[tuple[int, int], float] = field(default_factory=dict)
    anchor: str = ""  # the section's id in HTML (default: from the title)
    directions: dict[int, str] = field(default_factory=dict)  # column → "higher"/"lower": the first click sorts best-first
    col_tasks: dict[int, str] = field(default_factory=dict)  # column → the task it holds (filter, plot link)
    row_meta: list[dict[str, str]] = field(default_factory=list)  # per row: model, task, status (for the HTML filter)
    links: dict[tuple[int, int], str] = field(default_factory=dict)  # cell → anchor of its detail
    row_ids: dict[int, str] = field(default_factory=dict)  # row → its anchor (link target)
    row_header: bool = True  # the first column names the row
    html_only: bool = False  # left out of the markdown (e.g. per-cell details)
    folded: frozenset[int] = frozenset()  # rows shown collapsed behind `folded_label` (e.g. passing expectations)
    folded_label: str = ""

    def _markdown(self, rows: Iterable[int]) -> str:
        from tabulate import tabulate  # imported where a table is rendered: a warm `run -q` prints none

        cells = [[f"**{md_cell(c)}**" if (i, j) in self.best else md_cell(c) for j, c in enumerate(self.rows[i])] for i in rows]
        return tabulate(cells, headers=[md_cell(h) for h in self.headers], tablefmt="github", disable_numparse=True)

    def markdown(self) -> str:
        """GitHub markdown of the rows not folded (best cells in bold; every cell through `md_cell`, so suite text stays
        text); "" when every row is folded."""
        shown = [i for i in range(len(self.rows)) if i not in self.folded]
        return self._markdown(shown) if shown or not self.folded else ""

    def folded_markdown(self) -> str:
        """GitHub markdown of the folded rows ("" when none)."""
        return self._markdown(sorted(self.folded)) if self.folded else ""

    def subset(self, rows: Sequence[int]) -> Table:
        """These rows (in this order) as a table of their own, unfolded; emphasis, sort keys, links and ids follow them."""
        new = {old: k for k, old in enumerate(rows)}
        return Table(self.title, self.note, self.headers, [self.rows[i] for i in rows],
                     frozenset((new[i], j) for i, j in self.best if i in new),
                     {(new[i], j): v for (i, j), v in self.sort_keys.items() if i in new}, self.anchor, self.directions,
                     self.col_tasks, [self.row_meta[i] for i in rows if i < len(self.row_meta)],
                     {(new[i], j): v for (i, j), v in self.links.items() if i in new},
                     {new[i]: v for i, v in self.row_ids.items() if i in new}, self.row_header, self.html_only)


def metric_header(metric: str) -> str:
    """A column's metric as a header reads: 'accuracy ↑', 'scale R² ↑' (the metric's short words, else its label,
    and its direction)."""
    fact = METRICS[metric]
    arrow = {"higher": " ↑", "lower": " ↓"}.get(fact.direction or "", "")
    return (fact.short or fact.label.removeprefix("held-out ")) + arrow


ERROR_CHARS = 200  # an error shown beside the leaderboard is cut here: the detail table and records.csv hold it whole


def short_error(message: str, limit: int = ERROR_CHARS) -> str:
    """An error message as one line of at most `limit` characters (line breaks and runs of spaces flattened)."""
    text = " ".join(message.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def cell_errors(records: list[CellRecord], every: bool = False) -> list[tuple[str, str, str]]:
    """(model, task, short message) of the first failed seed per (model, task), in record order; `every`: each failed seed."""
    out: dict[tuple[str, ...], tuple[str, str, str]] = {}
    for r in as_records(records):
        if r.failed:
            key = (r.model, r.task, str(r.seed)) if every else (r.model, r.task)
            out.setdefault(key, (r.model if not every else f"{r.model} seed {r.seed}", r.task,
                                 short_error(r.message or "error (no message)")))
    return list(out.values())


def errors_table(records: list[CellRecord]) -> Table | None:
    """The first error of each (model, task) that failed, so the reader sees why without opening records.csv."""
    rows = [[m, t, msg] for m, t, msg in cell_errors(records)]
    if not rows:
        return None
    note = (f"The first failed seed's message per model and task, on one line, cut at {ERROR_CHARS} characters; "
            "every seed's error is in records.csv (and the HTML report's cell details).")
    return Table("Errors", note, ["model", "task", "first error"], rows,
                 row_meta=[{"model": m, "task": t, "status": "error"} for m, t, _ in rows], anchor="errors")


def cell_anchor(model: str, task: str) -> str:
    """The HTML id of a (model, task) cell's detail row."""
    return "cell-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{model}--{task}")


def _task_metrics(records: list[CellRecord], tasks: list[str], kinds: dict[str, str] | None) -> dict[str, str]:
    """Task → the metric its leaderboard column holds (headline_metrics of its records; a task with none: its kind's)."""
    out = {t: headline_metric(kinds[t]) for t in tasks if kinds and t in kinds}
    return {**out, **headline_metrics(records)}


def leaderboard(
    records: list[CellRecord], tasks: list[str], expected: Expected = (), kinds: dict[str, str] | None = None,
    plots: dict[str, str] | None = None, references: Iterable[str] = (), board: Leaderboard | None = None,
) -> Table:
    """Models × tasks: held-out score mean ± std over seeds; best per column (above chance) in bold.

    `kinds`: task → kind, for each column's metric; `plots`: task → the anchor of its plot (HTML links);
    `references`: models tagged `ceiling`, never bold.
    """
    records = as_records(records)
    references = frozenset(references)
    board = board or Leaderboard(*leaderboard_cells(records, tasks, expected, references))
    labels, cells = board.labels, board.cells
    metrics = _task_metrics(records, tasks, kinds)
    rows, best, keys, links, meta = [], set(), {}, {}, []
    for i, label in enumerate(labels):
        line = [label]
        statuses = set()
        for j, task in enumerate(tasks, start=1):
            cell = cells.get((label, task))
            line.append(cell.text() if cell else NOT_RUN)
            if cell:
                statuses.add(cell.status)
                links[(i, j)] = "sweeps" if cell.is_sweep else cell_anchor(label, task)  # a big sweep: its Sweeps row
            if cell and cell.best:
                best.add((i, j))
            if cell and not math.isnan(cell.mean):
                keys[(i, j)] = cell.mean
        rows.append(line)
        meta.append({"model": label, "status": " ".join(sorted(statuses))})
    headers = ["model"] + [f"{t} ({metric_header(metrics[t])})" if t in metrics else t for t in tasks]
    directions = {j: METRICS[metrics[t]].direction or "" for j, t in enumerate(tasks, start=1) if t in metrics}
    chances = sorted({f"{METRICS[m].label} {METRICS[m].chance:g}" for m in metrics.values() if METRICS[m].chance is not None})
    note = (
        "Mean ± std over seeds of each column's metric on the held-out cells: accuracy for ±1 tasks (a tie at 0 "
        "counts ½), over samples where a task's cells have several (images: each one counts, as the papers count), "
        f"else over cells; R² against the truth for regression tasks; sweeps of more than {BIG_SWEEP} models: over their "
        "members. Best per column in bold, but only a score significantly above chance "
        f"({'; '.join(chances) or 'none here'}): mean − chance > {CHANCE_SE:g} standard errors over seeds, "
        f"or > {CHANCE_ONE_SEED:g} with one seed (never one at or below chance). `(theory x)`: the same metric of the "
        "model's own kernel-theory prediction for the same split (mean over seeds), where the model has one. "
        f"{BEATS_KERNEL} = beats its own kernel-theory score by more than 2 "
        "standard errors over seeds (needs ≥ 2 seeds). `error`: every seed failed; `(n error)`: n seeds failed; "
        "`skipped`: invalid model (e.g. a non-PSD kernel); `missing`: the suite asks for the cell but no result is "
        "stored; blank: the suite does not run this model on this task."
    )
    shown = [label for label in labels if label in references]
    if shown:
        note += (f" Tagged `{CEILING}` ({', '.join(shown)}): a reference the models are measured against (it may be "
                 "fit on every cell, held-out ones included), never best.")
    return Table("Held-out score", note, headers, rows, frozenset(best), keys, directions=directions,
                 col_tasks={j: t for j, t in enumerate(tasks, start=1)}, row_meta=meta, links=links)


def leaderboard_frame(records: list[CellRecord], tasks: list[str], expected: Expected = (),
                      references: Iterable[str] = (), board: Leaderboard | None = None) -> pd.DataFrame:
    """The leaderboard as one typed row per (model, task) cell, for leaderboard.csv (`references`: never best;
    `board`: the report's leaderboard, computed once, else computed here)."""
    cells = (board or Leaderboard(*leaderboard_cells(records, tasks, expected, references))).cells
    columns = list(CellStats.__dataclass_fields__)
    import pandas as pd

    frame = pd.DataFrame([asdict(c) for c in cells.values()], columns=columns)
    frame = frame.astype({"n_ok": int, "n_error": int, "n_skipped": int, "n_members": int,
                          "beats_kernel": bool, "best": bool, "is_sweep": bool, "above_chance": bool,
                          "mean": float, "std": float, "theory_mean": float, "gap_mean": float, "gap_se": float})
    factors = factor_frame_columns(records, cells)  # multi-factor tasks: each per-factor metric and its theory's
    return pd.concat([frame, pd.DataFrame(factors, index=frame.index, dtype=float)], axis=1) if factors else frame


def factor_columns(records: list[CellRecord]) -> tuple[list[str], list[str]]:
    """The per-factor metrics the scored records carry, as two lists of columns: the scores (metrics with a better
    direction: each base's mean over the factors where the metric facts have one, then its per-factor metrics,
    e.g. factor_r2, factor_r2.scale, …, class_acc.shape) and the rest (e.g. factor_slope.scale, …). Both empty for
    a suite without multi-factor tasks. The means come first, the linear probe's (probe_r2) and the nearest-training
    similarity beside factor_r2 where the records carry them."""
    present = dict.fromkeys(name for r in as_records(records) if r.ok for name in r.metrics)  # in the records' order
    groups = per_factor_groups(present)
    scores: list[str] = []
    others: list[str] = []
    for base, names in groups.items():
        mean = [base] if base in METRICS else []  # the factors' mean where it is a metric of its own (factor_r2)
        (scores if PER_FACTOR[base].direction else others).extend(mean + names)
    # what the representation knows (the probe) and how near the training data the held-out cells are, beside the
    # held-out score they qualify: a read-out failure from a representation failure, composition from near-duplication
    head = [m for m in ("factor_r2", "probe_r2", "nearest_train_similarity") if m in present] if scores else []
    return head + [c for c in scores if c not in head], others


def _with_theory(mean: float, theory: float, word: str = "theory ") -> str:
    if math.isnan(mean):
        return "–"
    return f"{mean:.3f}" + ("" if math.isnan(theory) else f" ({word}{theory:.3f})")


def factor_tables(records: list[CellRecord], tasks: list[str], expected: Expected = (), compact: bool = False,
                  board: Leaderboard | None = None) -> list[Table]:
    """Per (model, task) cell of a multi-factor task, each per-factor metric (mean over seeds) with its theory's
    beside it: one table of the scores (R² per factor, their mean, accuracy of the class factors) and one of the
    rest (the slopes). None for a suite without multi-factor tasks. `compact`: the theory's value in bare
    parentheses, "0.512 (0.480)", for a terminal."""
    records = as_records(records)
    scores, others = factor_columns(records)
    if not scores and not others:
        return []
    board = board or Leaderboard(*leaderboard_cells(records, tasks, expected))
    labels, cells = board.labels, board.cells
    by = ok_by_cell(records)
    pairs = [(label, task) for label in labels for task in tasks
             if (c := cells.get((label, task))) is not None and not c.is_sweep and c.status != "skipped"]
    factor_tasks = {t for (m, t), recs in by.items() if any(k in recs[0].metrics for k in scores + others)}
    pairs = [(label, task) for label, task in pairs if task in factor_tasks]
    out = []
    for title, columns, anchor in (("Held-out score per factor", scores, "factors"), ("Held-out slope per factor", others, "factor-slopes")):
        if not columns:
            continue
        rows, keys, meta, links = [], {}, [], {}
        for i, (label, task) in enumerate(pairs):
            cell = cells[(label, task)]
            ok = by.get((label, task), [])
            line = [label, task]
            for j, metric in enumerate(columns, start=2):
                if not ok:
                    line.append(cell.status)
                    continue
                mean, theory = mean_and_theory(ok, metric)
                line.append(_with_theory(mean, theory, "" if compact else "theory "))
                if not math.isnan(mean):
                    keys[(i, j)] = mean
            rows.append(line)
            meta.append({"model": label, "task": task, "status": cell.status})
            links[(i, 1)] = cell_anchor(label, task)
        facts = dict.fromkeys(PER_FACTOR[c.partition(".")[0]] if "." in c else METRICS[c] for c in columns)
        note = ("Mean over seeds of each per-factor metric on the held-out cells of the tasks whose outputs are named "
                "factors; `(theory x)`: the same metric of the model's own kernel-theory prediction for the same split. "
                + " ".join(f"{f.short[0].upper() + f.short[1:]}: {f.label}." for f in facts))
        out.append(Table(title, note, ["model", "task", *map(metric_header, columns)], rows, sort_keys=keys, anchor=anchor,
                         directions={j: METRICS[m].direction or "" for j, m in enumerate(columns, start=2)},
                         row_meta=meta, links=links))
    return out


def factor_frame_columns(records: list[CellRecord], cells: dict[tuple[str, str], CellStats]) -> dict[str, list[float]]:
    """leaderboard.csv's per-factor columns: each per-factor metric and its theory twin, mean over seeds, per cell."""
    records = as_records(records)
    scores, others = factor_columns(records)
    by = ok_by_cell(records)
    out: dict[str, list[float]] = {}
    for metric in scores + others:
        theory = METRICS[metric].theory
        pairs = [mean_and_theory(by.get((c.model, c.task), []), metric) for c in cells.values()]
        out[metric] = [m for m, _ in pairs]
        if theory:
            out[theory] = [t for _, t in pairs]
    return out


def _fmt(mean: float, std: float = math.nan) -> str:
    if math.isnan(mean):
        return "–"
    return f"{mean:.3f}" if math.isnan(std) else f"{mean:.3f} ± {std:.3f}"


def theory_table(
    records: list[CellRecord], tasks: list[str] | None = None, expected: Expected = (),
    heldout: dict[str, np.ndarray] | None = None, theory: list[TheoryStats] | None = None,
) -> Table:
    """Per model and task: kernel used, agreement with its theory prediction, additivity, slopes."""
    records = as_records(records)
    tasks = tasks if tasks is not None else list(dict.fromkeys(r.task for r in records))
    rows, keys, meta, links = [], {}, [], {}
    # The irrelevant share exists only for tasks that declare the components their target depends on.
    shares = any(r.metric("irrelevant_share") is not None for r in records)
    for i, st in enumerate(theory if theory is not None else theory_stats(records, tasks, expected, heldout)):
        name = f"{st.model} (worst of {st.worst_of})" if st.worst_of > 1 else st.model
        meta.append({"model": name, "task": st.task, "status": st.status})
        if st.worst_of == 1:
            links[(i, 1)] = cell_anchor(st.model, st.task)
        if st.status in ("error", "skipped", MISSING):
            rows.append([name, st.task, *[st.status] * (8 if shares else 6)])
            continue
        kernel = f"{st.theory_kernel or '–'}/{st.theory_objective or '–'}" + (" (some seeds failed)" if st.status == "partial" else "")
        r2_text = f"n/a ({st.r2_note})" if st.r2_note else _fmt(st.theory_r2_mean, st.theory_r2_std)
        rows.append([
            name, st.task, kernel, r2_text,
            "–" if math.isnan(st.max_abs_diff) else f"{st.max_abs_diff:.2e}",
            "n/a (cannot fail)" if st.additivity_note else _fmt(st.additivity_mean, st.additivity_std),
            _fmt(st.slope_mean), _fmt(st.theory_slope_mean),
        ] + ([_fmt(st.irrelevant_share_mean), _fmt(st.theory_irrelevant_share_mean)] if shares else []))
        sortable = [(3, math.nan if st.r2_note else st.theory_r2_mean), (4, st.max_abs_diff),
                    (5, math.nan if st.additivity_note else st.additivity_mean), (6, st.slope_mean), (7, st.theory_slope_mean)]
        if shares:
            sortable += [(8, st.irrelevant_share_mean), (9, st.theory_irrelevant_share_mean)]
        for j, v in sortable:
            if not math.isnan(v):
                keys[(i, j)] = v
    note = (
        "R² and max |Δ| compare each model's held-out predictions with the kernel-theory prediction for the same split "
        "(its own kernel and objective); additivity is the held-out R² of the conjunction-wise additive fit "
        "(1 = the model only adds up values of conjunctions seen in training). Slopes: held-out prediction against the "
        "truth (regression tasks), for the model and for its theory. Mean ± std over seeds; big sweeps: their worst member. "
        f"R² is shown as n/a on fewer than {MIN_R2_CELLS} held-out cells or where the theory predicts one constant "
        "value (an R² against a constant is 1 or 0 by convention, not a measure): read max |model − theory| there. "
        "Additivity is n/a where the conjunctions seen in training span every held-out prediction (every model "
        "scores 1 there, so the score cannot fail)."
    )
    headers = ["model", "task", "theory kernel/objective", "R²(model, theory) ↑", "max |model − theory| ↓", "additivity R²",
               "slope", "theory slope"]
    if shares:
        headers += ["irrelevant share ↓", "theory irrelevant share"]
        note += (" Irrelevant share (tasks that declare which components their target depends on): the variance of the "
                 "held-out predictions' additive parts that involve a component the target ignores, over the variance of "
                 "the held-out predictions (0: nothing leaks through an irrelevant input).")
    return Table("Agreement with the kernel theory and conjunction-wise additivity", note, headers, rows, sort_keys=keys,
                 anchor="theory", directions={3: "higher", 4: "lower", **({8: "lower"} if shares else {})}, row_meta=meta, links=links)


def theory_frame(
    records: list[CellRecord], tasks: list[str], expected: Expected = (), heldout: dict[str, np.ndarray] | None = None,
    theory: list[TheoryStats] | None = None,
) -> pd.DataFrame:
    """The theory table as typed rows, for theory.csv (r2_note says when theory_r2_mean means nothing)."""
    columns = list(TheoryStats.__dataclass_fields__)
    import pandas as pd

    stats = theory if theory is not None else theory_stats(records, tasks, expected, heldout)
    frame = pd.DataFrame([asdict(s) for s in stats], columns=columns)
    floats = [c for c, f in TheoryStats.__dataclass_fields__.items() if f.type == "float"]
    return frame.astype({"worst_of": int, "n_heldout": int, **{c: float for c in floats}})


def sweep_table(records: list[CellRecord]) -> Table | None:
    """Big sweeps: per task, how many members reach a perfect held-out score."""
    records = as_records(records)
    members, big = sweep_members(records)
    if not big:
        return None
    heads = headline_metrics(records)
    by: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r.group in big and r.ok:
            by[(r.group, r.task)][r.model].append(r.metrics[heads[r.task]])
    rows: list[list[str]] = []
    keys: dict[tuple[int, int], float] = {}
    meta: list[dict[str, str]] = []
    for (group, task), per_member in sorted(by.items()):
        means = [float(np.mean(v)) for v in per_member.values()]
        recs = [r for r in records if r.group == group and r.task == task]
        skipped = len({r.model for r in recs if r.skipped})
        failed = len({r.model for r in recs if r.failed})
        values = [len(means), skipped, failed, sum(m >= 1 - 1e-9 for m in means), float(np.mean(means))]
        i = len(rows)
        rows.append([group, task, *map(str, values[:4]), f"{values[4]:.3f}"])
        keys.update({(i, j): float(v) for j, v in enumerate(values, start=2)})
        meta.append({"model": group, "task": task, "status": "error" if failed else "ok"})
    headers = ["sweep", "task", "models scored", "skipped (invalid)", "failed", "perfect held-out ↑", "mean held-out ↑"]
    note = f"Sweeps of more than {BIG_SWEEP} models: how many members reach a perfect held-out score."
    return Table("Sweeps", note, headers, rows, sort_keys=keys, directions={5: "higher", 6: "higher"}, row_meta=meta)


def expectations_table(verdicts: list[Verdict]) -> Table:
    """Each claim checked: subject, task, measured value, threshold, PASS/FAIL/XFAIL/XPASS; passing rows folded behind their count."""
    rows = [[v.expectation, v.claim, v.subject, v.task, f"{v.measured:.4g}", v.threshold or needs_text(v.threshold, v.measured), v.status,
             v.detail] for v in verdicts]
    headers = ["expectation", "claim", "model", "task", "measured", "threshold", "verdict", "detail"]
    keys = {(i, 4): v.measured for i, v in enumerate(verdicts) if not math.isnan(v.measured)}
    meta = [{"model": v.subject, "task": v.task, "status": v.status} for v in verdicts]
    passing = frozenset(i for i, v in enumerate(verdicts) if v.status == "PASS" and not v.warning)
    n_other = len(verdicts) - len(passing)
    if not verdicts:
        note = "No expectations were judged (the suite has none, or only part of it ran)."
    elif n_other:
        note = (f"{n_other} verdict{'s' if n_other > 1 else ''} failing (FAIL), failing as the suite declares (XFAIL) or "
                "passing where the suite declares a failure (XPASS, which fails the suite: the declaration is stale) "
                f"first; the {len(passing)} passing one{'s' if len(passing) != 1 else ''} folded below.")
    else:
        note = f"Every verdict passes; the {len(passing)} of them are folded below."
    return Table("Expectations", note, headers, rows, sort_keys=keys, row_meta=meta, folded=passing,
                 folded_label=f"{len(passing)} passing expectation{'s' if len(passing) != 1 else ''}" if passing else "")


def _executor_text(summary: dict[str, Any]) -> str:
    """Where the run's cells were computed: the executor, a pool's size, and why `auto` chose it."""
    text = str(summary.get("executor", "local"))
    if text == "process" and isinstance(summary.get("workers"), int):
        text += f", {summary['workers']} workers"
    reason = summary.get("executor_reason")
    return f"{text} (auto: {reason})" if isinstance(reason, str) else text


def summary_table(summary: dict[str, Any], verdicts: list[Verdict], facts: Sequence[tuple[str, str]] = ()) -> Table:
    """Run summary: `facts` first (date, commit), then version, device, wall time, cells, verdicts."""
    from compbench.outcome import verdict_counts
    from compbench.report.run_config import RecordedConfigError, config_from_summary

    wall = summary.get("wall_time", float("nan"))
    rows = [[k, v] for k, v in facts] + [
        ["compbench", __version__],
        ["device", str(summary.get("device", "?"))],
        ["executor", _executor_text(summary)],
        ["wall time", f"{wall:.1f} s" if isinstance(wall, (int, float)) and math.isfinite(wall) else "–"],
        ["cells run", str(summary.get("n_run", 0))],
        ["cells cached", str(summary.get("n_cached", 0))],
        ["cells failed", str(summary.get("n_failed", 0))],
        ["cells skipped", str(summary.get("n_skipped", 0))],
        ["expectations", verdict_counts(verdicts)],
    ]
    try:
        config = config_from_summary(summary)
    except RecordedConfigError:  # hand-edited: the rows below say what the report holds
        config = None
    if config is not None:  # what the run asked for beyond the suite file; a summary from before it has none
        rows.append(["configuration", config.describe()])
    if summary.get("selection"):
        rows.append(["this run", f"{summary['selection']}: only the selected cells were run; every other cell is "
                                 "shown as the store holds them"])
    if summary.get("n_missing"):
        rows.append(["cells missing", f"{summary['n_missing']}: not in the store (not run, or interrupted)"])
    if summary.get("n_stale"):
        rows.append(["cells stale", f"{summary['n_stale']}: computed by {summary.get('computed_by') or 'other code'}; "
                                    "`compbench run` recomputes them"])
    if summary.get("interrupted"):
        rows.append(["interrupted", "yes: the run was stopped; these are the cells finished so far"])
    return Table("Run summary", "", ["", ""], rows)


def detail_table(records: list[CellRecord], tasks: list[str], expected: Expected = (), board: Leaderboard | None = None) -> Table:
    """Per (model, task) cell: every seed's score, the theory's kernel, wall time and error text (HTML link targets)."""
    records = as_records(records)
    board = board or Leaderboard(*leaderboard_cells(records, tasks, expected))
    labels, cells = board.labels, board.cells
    by: dict[tuple[str, str], list[CellRecord]] = defaultdict(list)
    for r in records:
        by[(r.model, r.task)].append(r)
    rows: list[list[str]] = []
    ids: dict[int, str] = {}
    meta: list[dict[str, str]] = []
    for label in labels:
        for task in tasks:
            cell = cells.get((label, task))
            if cell is None or cell.is_sweep:
                continue
            recs = sorted(by.get((label, task), []), key=lambda r: r.seed)
            seeds = " · ".join(
                f"{r.seed}: {r.metrics[cell.metric]:.3f}" if r.ok and r.metric(cell.metric) is not None
                else f"{r.seed}: {r.status.value}" for r in recs
            )
            ok = [r for r in recs if r.ok]
            kernel = f"{ok[0].theory_kernel or '–'}/{ok[0].theory_objective or '–'}" if ok else "–"
            wall = sum(float(r.wall_time or 0.0) for r in recs)
            errors = list(dict.fromkeys(str(r.message) for r in recs if not r.ok and r.message))
            ids[len(rows)] = cell_anchor(label, task)
            meta.append({"model": label, "task": task, "status": cell.status})
            rows.append([label, task, cell.status, seeds or "–", kernel, f"{wall:.2f} s" if recs else "–", "; ".join(errors)])
    headers = ["model", "task", "status", "seed: score", "theory kernel/objective", "wall time", "detail"]
    note = "Every (model, task) cell seed by seed; a leaderboard cell links here."
    return Table("Cell details", note, headers, rows, row_meta=meta, row_ids=ids, html_only=True, anchor="cell-details")


def records_frame(records: list[CellRecord]) -> pd.DataFrame:
    """Records as a flat table (prediction arrays dropped; sweep values and the adapter's info as columns)."""
    import pandas as pd

    return pd.DataFrame([r.flat() for r in as_records(records)])


# Said wherever the fit warnings are shown (report, terminal, check).
FIT_NOTE = ("a warning, not a failure: exit codes do not change; the threshold is the suite's fit_threshold, "
            "else the metric's default")
