"""The report's statistics: every leaderboard cell (a model or a big sweep on a task, over seeds) and every model's
agreement with its kernel theory, computed once per report (`ReportStatistics`) and handed to every writer and table
that shows them."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from compbench.records import CellRecord, as_records, big_groups
from compbench.records.metric_facts import METRICS, MIN_R2_CELLS, chance_level, headline_metrics

BEATS_KERNEL = "†"
# "Best" is awarded only to a score significantly better than chance, one-sided: mean − chance >
# CHANCE_SE standard errors over seeds (about a 97.5% one-sided bound), or > CHANCE_ONE_SEED when one
# seed leaves the noise unknown (0.05 accuracy is the seed-to-seed spread typical of small networks
# on these tasks). A column's top score that is below chance is no "best": it generalises worse than
# ignoring the input.
CHANCE_SE = 2.0
CHANCE_ONE_SEED = 0.05
MISSING = "missing"  # the suite pairs them, but the store has no record (e.g. an interrupted run)
Expected = Iterable[tuple[str, str, str]]  # (model id, sweep group, task id) pairs the suite asks for
CEILING = "ceiling"  # the tag of a reference (e.g. a fit on every cell): shown beside the models, never best


def ceiling_models(loaded: Any) -> frozenset[str]:
    """The suite's models tagged `ceiling` (by the suite or by their adapter): references, not competitors."""
    return frozenset(m for m, tags in (getattr(loaded, "tags", None) or {}).items() if CEILING in tags)


def _theory_metric(metric: str) -> str:
    return METRICS[metric].theory or ""


def near_chance(mean: float, std: float, n: int, chance: float | None) -> bool:
    """Whether a score is within noise of chance: ≤ 2 SE over n seeds, or ≤ 0.05 for one seed."""
    if chance is None or math.isnan(mean):
        return False
    if n > 1 and not math.isnan(std):
        return abs(mean - chance) <= CHANCE_SE * std / math.sqrt(n) + 1e-12
    return abs(mean - chance) <= CHANCE_ONE_SEED


def above_chance(mean: float, std: float, n: int, chance: float | None, lower: bool = False) -> bool:
    """Whether a score beats chance beyond noise, one-sided: by > 2 SE over n seeds, or > 0.05 with one seed.

    `lower`: the metric is better when lower (then "beats" means below chance). With no chance level
    known, every score counts as above it.
    """
    if math.isnan(mean):
        return False
    if chance is None:
        return True
    margin = chance - mean if lower else mean - chance
    if n > 1 and not math.isnan(std):
        return margin > CHANCE_SE * std / math.sqrt(n) + 1e-12
    return margin > CHANCE_ONE_SEED


def finite(vals: Iterable[Any]) -> list[float]:
    out = []
    for v in vals:
        if v is None:
            continue
        f = float(v)
        if not math.isnan(f):
            out.append(f)
    return out


def sweep_members(records: list[CellRecord]) -> tuple[dict[str, list[str]], set[str]]:
    """Scored (not skipped) members per sweep group, and which groups are big."""
    members: dict[str, dict[str, None]] = defaultdict(dict)
    for r in records:
        if not r.skipped:
            members[r.group][r.model] = None
    big = big_groups(records)
    return {g: list(ms) for g, ms in members.items()}, big


def _status_of(recs: list[CellRecord]) -> str:
    """ok (every record scored), partial (some failed), error, skipped, or missing (no record)."""
    if not recs:
        return MISSING
    statuses = {r.status.value for r in recs}
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
    at_chance: bool = False  # within noise of chance, either side
    above_chance: bool = False  # better than chance beyond noise (one-sided): only such a score can be best
    chance: float | None = None  # the score of a predictor that ignores the input (1/K for K classes)
    is_sweep: bool = False
    n_members: int = 1
    error: str = ""

    def text(self) -> str:
        """How the cell reads in the leaderboard."""
        if self.status in ("error", "skipped", MISSING):
            return self.status
        vals = f"{self.mean:.3f}" if self.n_ok == 1 or math.isnan(self.std) else f"{self.mean:.3f} ± {self.std:.3f}"
        if not math.isnan(self.theory_mean):  # the model's own kernel theory, scored the same way, beside it
            vals += f" (theory {self.theory_mean:.3f})"
        mark = f" {BEATS_KERNEL}" if self.beats_kernel else ""
        failed = (f" ({self.n_error} error)" if self.n_error else "") + (f" ({self.n_skipped} skipped)" if self.n_skipped else "")
        return vals + mark + failed


def _beats(ok: list[CellRecord], metric: str) -> tuple[float, float, float, bool]:
    """(theory mean, mean gap, SE of the gap, beats): score above the model's own kernel-theory score
    by more than 2 standard errors over seeds, and above 0 (needs ≥ 2 seeds to judge the noise)."""
    theory = _theory_metric(metric)
    th = finite(r.metric(theory) for r in ok)
    gaps = finite(r.metrics[metric] - r.metrics[theory] for r in ok if r.metric(theory) is not None and r.metric(metric) is not None)
    if not gaps:
        return (float(np.mean(th)) if th else math.nan), math.nan, math.nan, False
    mean = float(np.mean(gaps))
    se = float(np.std(gaps, ddof=1) / math.sqrt(len(gaps))) if len(gaps) > 1 else math.nan
    return float(np.mean(th)), mean, se, bool(len(gaps) > 1 and mean > 0 and mean > 2 * se)


def _row_order(records: list[CellRecord], expected: list[tuple[str, str, str]], big: set[str]) -> list[tuple[str, bool]]:
    """Leaderboard rows as (name, is big sweep), in suite order, then any stored-only rows."""
    names = [(g, True) if g in big else (m, False) for m, g, _ in expected]
    names += [(r.group, True) if r.group in big else (r.model, False) for r in records]
    return list(dict.fromkeys(names))


def _cells_by_row(
    records: list[CellRecord], expected: Expected
) -> tuple[Any, Any, dict[tuple[str, str], list[CellRecord]], set[tuple[str, str]]]:
    """A table's rows: sweep members and big sweeps, the records of each (row, task) (a big sweep is one row; its
    invalid members, e.g. non-PSD kernels, are left to the sweep table) and the (row, task) pairs expected."""
    members, big = sweep_members(records)
    by: dict[tuple[str, str], list[CellRecord]] = defaultdict(list)
    for r in records:
        if r.group in big and r.skipped:
            continue
        by[(r.group if r.group in big else r.model, r.task)].append(r)
    wanted = {(g if g in big else m, t) for m, g, t in expected}
    return members, big, by, wanted


def leaderboard_cells(
    records: list[CellRecord], tasks: list[str], expected: Expected = (), references: Iterable[str] = ()
) -> tuple[list[str], dict[tuple[str, str], CellStats]]:
    """Row labels and every (row, task) cell's statistics; cells neither run nor expected are absent.

    `references` (models tagged `ceiling`, `ceiling_models`) get their statistics but are never best.
    """
    references = frozenset(references)
    records = as_records(records)
    expected = list(expected)
    members, big, by, wanted = _cells_by_row(records, expected)
    heads = headline_metrics(records)
    labels, cells = [], {}
    for name, is_big in _row_order(records, expected, big):
        label = f"{name} ({len(members[name])} models)" if is_big else name
        labels.append(label)
        for task in tasks:
            recs = by.get((name, task), [])
            if not recs and (name, task) not in wanted:
                continue
            ok = [r for r in recs if r.ok]
            errors = [r for r in recs if r.failed]
            cell = CellStats(label, task, _status_of(recs), n_ok=len(ok), n_error=len(errors),
                             n_skipped=sum(r.skipped for r in recs), is_sweep=is_big,
                             n_members=len(members[name]) if is_big else 1, error=errors[0].message if errors else "")
            if ok:
                cell.metric = heads[task]
                cell.chance = chance_level(cell.metric, "multiclass" if ok[0].n_classes else "", int(ok[0].n_classes or 0))
                scores = finite(r.metric(cell.metric) for r in ok)
                if scores:
                    cell.mean = float(np.mean(scores))
                    cell.std = float(np.std(scores, ddof=1)) if len(scores) > 1 else math.nan
                if not is_big:
                    cell.theory_mean, cell.gap_mean, cell.gap_se, cell.beats_kernel = _beats(ok, cell.metric)
            cells[(label, task)] = cell
    for task in tasks:
        col = [c for (_, t), c in cells.items() if t == task and not math.isnan(c.mean)]
        lower = bool(col) and METRICS[col[0].metric].direction == "lower"
        for c in col:
            n = c.n_ok if not c.is_sweep else c.n_members
            c.at_chance = near_chance(c.mean, c.std, n, c.chance)
            c.above_chance = above_chance(c.mean, c.std, n, c.chance, lower)
        # A ceiling is no competitor (it may be fit on the held-out cells themselves): best is among the models.
        col = [c for c in col if c.above_chance and c.model not in references]
        if col:
            top = min(c.mean for c in col) if lower else max(c.mean for c in col)
            for c in col:
                c.best = bool(abs(c.mean - top) <= 5e-4)  # ties at the shown precision are all best
    return labels, cells


def ok_by_cell(records: list[CellRecord]) -> dict[tuple[str, str], list[CellRecord]]:
    by: dict[tuple[str, str], list[CellRecord]] = defaultdict(list)
    for r in records:
        if r.ok:
            by[(r.model, r.task)].append(r)
    return by


def mean_and_theory(ok: list[CellRecord], metric: str) -> tuple[float, float]:
    """The metric's mean over the scored seeds and its theory twin's (NaN where none carries it)."""
    theory = METRICS[metric].theory
    mean = _mstd(r.metric(metric) for r in ok)[0]
    return mean, (_mstd(r.metric(theory) for r in ok)[0] if theory else math.nan)


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
    n_heldout: int = 0
    irrelevant_share_mean: float = math.nan
    theory_irrelevant_share_mean: float = math.nan
    r2_note: str = ""  # why R²(model, theory) means nothing here ("2 cells", "theory constant"), else ""
    additivity_note: str = ""  # why the additivity R² means nothing here (the seen conjunctions span every prediction)


def _mstd(vals: Iterable[Any]) -> tuple[float, float]:
    v = finite(vals)
    return (float(np.mean(v)) if v else math.nan, float(np.std(v, ddof=1)) if len(v) > 1 else math.nan)


def _constant(vals: np.ndarray) -> bool:
    # the tolerance of compbench.scoring.metrics.r2 for a constant target
    return float(np.sum((vals - vals.mean()) ** 2)) <= 1e-12 * len(vals) * max(1.0, float(np.mean(vals**2)))


def _r2_note(ok: list[CellRecord], test_mask: np.ndarray | None) -> tuple[int, str]:
    """(held-out cells, why an R² against the theory means nothing or "")."""
    n = int(test_mask.sum()) if test_mask is not None else int(ok[0].n_test or 0) if ok else 0
    if n and n < MIN_R2_CELLS:
        return n, f"{n} cell{'s' if n > 1 else ''}"
    if test_mask is not None:
        theory = [np.asarray(r.theory_predictions, dtype=float) for r in ok if r.theory_predictions is not None]
        if theory and len(theory[0]) == len(test_mask) and all(_constant(t[test_mask]) for t in theory):
            return n, "theory constant"
    return n, ""


def theory_stats(
    records: list[CellRecord], tasks: list[str], expected: Expected = (), heldout: dict[str, np.ndarray] | None = None,
) -> list[TheoryStats]:
    """Per model and task: kernel used, agreement with its theory prediction, additivity, slopes.

    `heldout`: task → its held-out mask, to tell when R² against the theory means nothing (< 3 cells, constant theory).
    """
    records = as_records(records)
    expected = list(expected)
    members, big, by, wanted = _cells_by_row(records, expected)
    order = {t: i for i, t in enumerate(tasks)}
    out = []
    for name, is_big in _row_order(records, expected, big):
        for task in sorted({t for (n, t) in [*by, *wanted] if n == name}, key=lambda t: order.get(t, len(order))):
            recs = by.get((name, task), [])
            ok = [r for r in recs if r.ok]
            st = TheoryStats(name, task, _status_of(recs), worst_of=len(members[name]) if is_big else 1)
            if ok:
                st.theory_kernel = ok[0].theory_kernel or ""
                st.theory_objective = ok[0].theory_objective or ""
                if is_big:  # the worst member speaks for the sweep
                    st.theory_r2_mean = min(finite(r.metric("theory_r2") for r in ok), default=math.nan)
                    st.additivity_mean = min(finite(r.metric("additivity") for r in ok), default=math.nan)
                else:
                    st.theory_r2_mean, st.theory_r2_std = _mstd(r.metric("theory_r2") for r in ok)
                    st.additivity_mean, st.additivity_std = _mstd(r.metric("additivity") for r in ok)
                st.max_abs_diff = max(finite(r.metric("theory_max_abs_diff") for r in ok), default=math.nan)
                st.slope_mean = _mstd(r.metric("slope") for r in ok)[0]
                st.theory_slope_mean = _mstd(r.metric("theory_slope") for r in ok)[0]
                st.irrelevant_share_mean = _mstd(r.metric("irrelevant_share") for r in ok)[0]
                st.theory_irrelevant_share_mean = _mstd(r.metric("theory_irrelevant_share") for r in ok)[0]
                st.n_heldout, st.r2_note = _r2_note(ok, (heldout or {}).get(task))
                st.additivity_note = next((r.not_applicable["additivity"] for r in ok if "additivity" in r.not_applicable), "")
            out.append(st)
    return out


@dataclass(frozen=True)
class Leaderboard:
    """The leaderboard's row labels, in order, and each (row label, task) cell's statistics (cells neither run nor
    asked for are absent)."""

    labels: list[str]
    cells: dict[tuple[str, str], CellStats]


class ReportStatistics:
    """One report's statistics, each computed on first use and then shared: the leaderboard's cells (the markdown,
    HTML and CSV leaderboards, the factor and detail tables, the headline) and the theory agreement (its table and
    theory.csv)."""

    def __init__(self, records: list[CellRecord], tasks: list[str], expected: Expected, references: Iterable[str],
                 heldout: Callable[[], Mapping[str, np.ndarray]]) -> None:
        self.records, self.tasks, self.expected = as_records(records), list(tasks), list(expected)
        self.references = frozenset(references)
        self._heldout = heldout  # each task's held-out mask: building the tasks waits until the theory is asked for

    @cached_property
    def leaderboard(self) -> Leaderboard:
        """Every leaderboard cell (models tagged `ceiling` are never best)."""
        return Leaderboard(*leaderboard_cells(self.records, self.tasks, self.expected, self.references))

    @cached_property
    def theory(self) -> list[TheoryStats]:
        """Every (model, task)'s agreement with its kernel theory."""
        return theory_stats(self.records, self.tasks, self.expected, dict(self._heldout()))
