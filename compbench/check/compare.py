"""Noise-aware comparison of a run with a baseline: a cell regresses when it moves beyond seed noise."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tabulate import tabulate

from compbench.check.baseline import DEFAULT_POLICY, Baseline


@dataclass(frozen=True)
class CheckRow:
    """One metric of one cell: baseline vs now, and the verdict."""

    cell: str
    metric: str
    baseline: str
    now: str
    delta: float
    tolerance: float
    verdict: str  # ok | REGRESSED | improved | missing | new | error

    @property
    def failed(self) -> bool:
        """Whether this row fails the check."""
        return self.verdict in ("REGRESSED", "missing", "error")


def _fmt(d: dict[str, Any]) -> str:
    return f"{d['mean']:.4f} ± {d['std']:.4f} (n={d['n']})"


def compare(baseline: Baseline, current: dict[str, dict[str, Any]], k: float | None = None) -> list[CheckRow]:
    """Rows for every baseline and current cell; tolerance = max(floor, k·√(s_b²/n_b + s_n²/n_n))."""
    rows: list[CheckRow] = []
    for cell in sorted(set(baseline.cells) | set(current)):
        if cell not in current:
            rows.append(CheckRow(cell, "*", "recorded", "absent from this run", math.nan, math.nan, "missing"))
            continue
        if cell not in baseline.cells:
            rows.append(CheckRow(cell, "*", "absent from the baseline", "present", math.nan, math.nan, "new"))
            continue
        now_cell = current[cell]
        if now_cell.get("errors"):
            rows.append(CheckRow(cell, "*", "", f"{now_cell['errors']} failed cell(s)", math.nan, math.nan, "error"))
        for metric, base in baseline.cells[cell]["metrics"].items():
            now = now_cell["metrics"].get(metric)
            if now is None or now["n"] == 0:
                rows.append(CheckRow(cell, metric, _fmt(base), "not measured", math.nan, math.nan, "missing"))
                continue
            policy = {**DEFAULT_POLICY.get(metric, {"direction": "higher", "k": 2.5, "floor": 0.0}), **baseline.policy.get(metric, {})}
            kk = policy["k"] if k is None else k
            se = math.sqrt(base["std"] ** 2 / max(base["n"], 1) + now["std"] ** 2 / max(now["n"], 1))
            tol = max(policy["floor"], kk * se)
            delta = now["mean"] - base["mean"]
            worse = -delta if policy["direction"] == "higher" else delta
            verdict = "REGRESSED" if worse > tol else ("improved" if -worse > tol else "ok")
            rows.append(CheckRow(cell, metric, _fmt(base), _fmt(now), delta, tol, verdict))
    return rows


def format_rows(rows: list[CheckRow], only_notable: bool = False) -> str:
    """The comparison as a table (all rows, or only those not 'ok')."""
    shown = [r for r in rows if not only_notable or r.verdict != "ok"]
    return tabulate(
        [[r.cell, r.metric, r.baseline, r.now, f"{r.delta:+.4f}", f"{r.tolerance:.4f}", r.verdict] for r in shown],
        headers=["cell", "metric", "baseline", "now", "delta", "tolerance", "verdict"],
        tablefmt="github",
        disable_numparse=True,
    )
