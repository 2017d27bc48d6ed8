"""Noise-aware comparison of a run with a baseline: a cell regresses when it moves beyond seed noise.

Besides regressions, a check fails on anything that would let it pass having compared less than the
baseline holds: a cell of the baseline absent from the run (`missing`), a run cell absent from the
baseline (`new`, unless allowed), failed seeds (`error`), missing or non-finite metric values
(`non-finite`), and fewer seeds (or sweep members) than the baseline recorded (`fewer-seeds`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from tabulate import tabulate

from compbench.check.baseline import DEFAULT_POLICY, Baseline, BaselineError
from compbench.check.fdr import benjamini_hochberg, welch_p
from compbench.records.metric_facts import direction_of

FAILING = ("REGRESSED", "CHANGED", "missing", "error", "non-finite", "fewer-seeds")
NOT_GATED = "n/a"  # a metric whose value says nothing in this cell (records.metric_facts): shown, never failing


@dataclass(frozen=True)
class CheckRow:
    """One metric of one cell: baseline vs now, and the verdict."""

    cell: str
    metric: str
    baseline: str
    now: str
    delta: float
    tolerance: float
    verdict: str  # ok | improved | REGRESSED | CHANGED | missing | new | error | non-finite | fewer-seeds | n/a
    allowed: bool = False  # a `new` cell accepted with --allow-new
    p_value: float = math.nan  # Welch's p that it is worse (one-sided; two-sided without a better direction)
    floor: float = math.nan  # the metric's floor: no rule calls a smaller move a change
    kse_verdict: str = ""  # the k·SE rule's verdict, kept beside when another rule (--fdr) gated the row

    @property
    def failed(self) -> bool:
        """Whether this row fails the check (a `new` cell does unless allowed)."""
        return self.verdict in FAILING or (self.verdict == "new" and not self.allowed)

    def line(self) -> str:
        """'verdict: cell metric: baseline B, now N[, delta D (tolerance T)]' — one failing row, self-contained."""
        text = f"{self.verdict}: {self.cell} {self.metric}: baseline {self.baseline}, now {self.now}"
        if math.isfinite(self.delta):
            text += f", delta {self.delta:+.4f} (tolerance {self.tolerance:.4f})"
        return text


def _fmt(d: dict[str, Any]) -> str:
    return f"{d['mean']:.4f} ± {d['std']:.4f} (n={d['n']})"


def _seeds(entry: dict[str, Any]) -> tuple[str, int]:
    """What a cell's sample size counts (sweep members of a big sweep, else seeds) and how many."""
    if "members" in entry:
        return "members", int(entry["members"])
    return "seeds", max((int(d["n"]) for d in entry["metrics"].values()), default=0)


def _noise(d: dict[str, Any], other: dict[str, Any]) -> float:
    """A distribution's seed sd for the tolerance: the measured one, floored by the sd its theory predicts (either
    side's): a lazy network's NTK-GP knows its seed noise, which a few seeds' sample sd underestimates by chance."""
    floor = max(float(d.get("theory_std", 0.0)), float(other.get("theory_std", 0.0)))
    return max(float(d["std"]), floor)


def _cell_rows(cell: str, base_cell: dict[str, Any], now_cell: dict[str, Any], policies: dict[str, Any],
               k: float | None) -> list[CheckRow]:
    rows: list[CheckRow] = []
    what, n_base = _seeds(base_cell)
    if now_cell.get("errors"):
        why = f": {now_cell['first_error']}" if now_cell.get("first_error") else ""
        rows.append(CheckRow(cell, "status", f"{n_base} {what} ok", f"{now_cell['errors']} failed seed(s){why}",
                             math.nan, math.nan, "error"))
    _, n_now = _seeds(now_cell)
    if n_now < n_base:
        rows.append(CheckRow(cell, what, f"n={n_base}", f"n={n_now}", math.nan, math.nan, "fewer-seeds"))
    na = {**base_cell.get("not_applicable", {}), **now_cell.get("not_applicable", {})}
    for metric, why in sorted(na.items()):
        base = base_cell["metrics"].get(metric)
        rows.append(CheckRow(cell, metric, _fmt(base) if base else "n/a", f"n/a ({why})", math.nan, math.nan, NOT_GATED))
    # A metric this run measures for the cell must be in the baseline: a cell with a metric deleted (by hand,
    # or by an older compbench) would otherwise pass that metric unchecked.
    unrecorded = sorted(m for m in now_cell["metrics"] if m not in base_cell["metrics"] and m not in na)
    if unrecorded:
        raise BaselineError(f"baseline cell {cell!r} has no {', '.join(unrecorded)}, which this run measures for it, so a "
                            "check would never compare it; re-record the baseline (`compbench baseline record`)")
    for metric, base in base_cell["metrics"].items():
        if metric in na:
            continue
        now = now_cell["metrics"].get(metric)
        if now is None or now["n"] == 0:
            rows.append(CheckRow(cell, metric, _fmt(base), "not measured", math.nan, math.nan, "missing"))
            continue
        if now.get("nonfinite") or not math.isfinite(now["mean"]):
            bad = now.get("nonfinite", now["n"])
            rows.append(CheckRow(cell, metric, _fmt(base), f"{bad} of {now['n']} values missing or non-finite",
                                 math.nan, math.nan, "non-finite"))
            continue
        policy = {**DEFAULT_POLICY.get(metric, {"k": 2.5, "floor": 0.0}), **policies.get(metric, {})}
        kk = float(policy["k"]) if k is None else k
        se = math.sqrt(_noise(base, now) ** 2 / max(base["n"], 1) + _noise(now, base) ** 2 / max(now["n"], 1))
        tol = max(float(policy["floor"]), kk * se)
        delta = now["mean"] - base["mean"]
        direction = direction_of(metric)
        if direction is None:  # neither way is better (additivity): a move beyond noise either way fails
            verdict = "CHANGED" if abs(delta) > tol else "ok"
            worse = delta
        else:
            worse = -delta if direction == "higher" else delta
            verdict = "REGRESSED" if worse > tol else ("improved" if -worse > tol else "ok")
        p = welch_p(worse, _noise(base, now), int(base["n"]), _noise(now, base), int(now["n"]), two_sided=direction is None)
        rows.append(CheckRow(cell, metric, _fmt(base), _fmt(now), delta, tol, verdict, p_value=p,
                             floor=float(policy["floor"])))
    return rows


def compare(baseline: Baseline, current: dict[str, dict[str, Any]], k: float | None = None,
            allow_new: bool = False) -> list[CheckRow]:
    """Rows for every baseline and current cell; tolerance = max(floor, k·√(s_b²/n_b + s_n²/n_n)), each s at least the
    sd the cell's theory predicts (`theory_std`, where records carry one)."""
    rows: list[CheckRow] = []
    for cell in sorted(set(baseline.cells) | set(current)):
        if cell not in current:
            what, n = _seeds(baseline.cells[cell])
            rows.append(CheckRow(cell, "*", f"recorded ({what} n={n})", "absent from this run", math.nan, math.nan, "missing"))
        elif cell not in baseline.cells:
            what, n = _seeds(current[cell])
            rows.append(CheckRow(cell, "*", "absent from the baseline", f"present ({what} n={n})", math.nan, math.nan,
                                 "new", allowed=allow_new))
        else:
            rows.extend(_cell_rows(cell, baseline.cells[cell], current[cell], baseline.policy, k))
    return rows


def gate_by_fdr(rows: list[CheckRow], q: float) -> list[CheckRow]:
    """The rows judged by Benjamini–Hochberg at level q over every compared metric's p-value instead of k·SE: a row
    REGRESSED (CHANGED) when BH rejects it and it moved beyond its floor; the k·SE verdict is kept in `kse_verdict`.
    Rows with no comparison (missing, error, new, ...) keep their verdict."""
    tested = [i for i, r in enumerate(rows) if math.isfinite(r.p_value)]
    rejected = dict(zip(tested, benjamini_hochberg([rows[i].p_value for i in tested], q)))
    out = []
    for i, r in enumerate(rows):
        if i not in rejected:
            out.append(r)
            continue
        direction = direction_of(r.metric)
        worse = r.delta if direction in (None, "lower") else -r.delta
        if rejected[i] and (abs(r.delta) if direction is None else worse) > r.floor:
            verdict = "CHANGED" if direction is None else "REGRESSED"
        else:  # BH tests for worse only: an improvement is the k·SE rule's to name, and never fails
            verdict = "improved" if r.verdict == "improved" else "ok"
        out.append(replace(r, verdict=verdict, kse_verdict=r.verdict))
    return out


def failing_lines(baseline: Baseline, current: dict[str, dict[str, Any]], allow_new: bool = False) -> list[str]:
    """Each failing row's line, or the one line saying why the baseline cannot be compared (a pytest item's failure)."""
    try:
        return [r.line() for r in compare(baseline, current, allow_new=allow_new) if r.failed]
    except BaselineError as exc:
        return [str(exc)]


def format_rows(rows: list[CheckRow], only_notable: bool = False, fdr: float | None = None) -> str:
    """The comparison as a table (all rows, or only those not 'ok'); with `fdr`, each row's p-value and the k·SE
    verdict beside the Benjamini–Hochberg one that gated it."""
    shown = [r for r in rows if not only_notable or r.verdict != "ok" or r.kse_verdict not in ("", "ok")]

    def num(x: float, fmt: str) -> str:
        return format(x, fmt) if math.isfinite(x) else ""

    headers = ["cell", "metric", "baseline", "now", "delta", "tolerance", "verdict"]
    table = [[r.cell, r.metric, r.baseline, r.now, num(r.delta, "+.4f"), num(r.tolerance, ".4f"),
              r.verdict + (" (allowed)" if r.allowed and r.verdict == "new" else "")] for r in shown]
    if fdr is not None:
        headers = [*headers[:-1], "p (Welch)", "k·SE verdict", f"verdict (BH q={fdr:g})"]
        table = [[*row[:-1], num(r.p_value, ".3g"), r.kse_verdict, row[-1]] for row, r in zip(table, shown)]
    return tabulate(table, headers=headers, tablefmt="github", disable_numparse=True)
