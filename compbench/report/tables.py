"""Leaderboard markdown (tabulate) and CSV exports of scored records."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tabulate import tabulate

from compbench import __version__
from compbench.scoring.expectations import Verdict

BIG_SWEEP = 12  # sweeps with more members are summarised, not listed member by member
ARRAY_FIELDS = ("predictions", "theory_predictions", "traceback")


def _score_metric(rec: dict[str, Any]) -> str:
    return "heldout_acc" if "heldout_acc" in rec else "heldout_r2"


def _mean_std(vals: Sequence[float]) -> str:
    vals = [v for v in vals if v is not None and not math.isnan(v)]
    if not vals:
        return "–"
    if len(vals) == 1:
        return f"{vals[0]:.3f}"
    return f"{np.mean(vals):.3f} ± {np.std(vals, ddof=1):.3f}"


def _rows_key(records: list[dict[str, Any]]) -> tuple[dict[str, list[str]], set[str]]:
    """Scored (not skipped) members per sweep group, and which groups are big."""
    members: dict[str, dict[str, None]] = defaultdict(dict)
    for r in records:
        if r["status"] != "skipped":
            members[r["group"]][r["model"]] = None
    big = {g for g, ms in members.items() if len(ms) > BIG_SWEEP}
    return {g: list(ms) for g, ms in members.items()}, big


def leaderboard_table(records: list[dict[str, Any]], tasks: list[str]) -> str:
    """Models × tasks: held-out score mean ± std over seeds (big sweeps: over members)."""
    members, big = _rows_key(records)
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["group"] in big and r["status"] == "skipped":
            continue  # invalid sweep members (e.g. non-PSD kernels) are counted in the sweep table
        row = f"{r['group']} ({len(members[r['group']])} models)" if r["group"] in big else r["model"]
        by[(row, r["task"])].append(r)
    rows = list(dict.fromkeys(row for row, _ in by))
    table = []
    for row in rows:
        line = [row]
        for task in tasks:
            recs = by.get((row, task), [])
            ok = [r for r in recs if r["status"] == "ok"]
            if not recs:
                line.append("")
            elif not ok:
                line.append("skipped" if all(r["status"] == "skipped" for r in recs) else "error")
            else:
                cell = _mean_std([r[_score_metric(r)] for r in ok])
                n_err = sum(r["status"] == "error" for r in recs)
                line.append(cell + (f" ({n_err} err)" if n_err else ""))
        table.append(line)
    return tabulate(table, headers=["model", *tasks], tablefmt="github", disable_numparse=True)


def theory_table(records: list[dict[str, Any]]) -> str:
    """Per model and task: kernel used, agreement with its theory prediction, additivity, slopes."""
    members, big = _rows_key(records)
    by: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in records:
        if r["status"] == "ok":
            by[(r["group"] if r["group"] in big else r["model"], r["task"])].append(r)
    table = []
    for (row, task), recs in by.items():
        r0 = recs[0]
        worst = row in big
        table.append([
            f"{row} (worst of {len(members[row])})" if worst else row,
            task,
            f"{r0.get('theory_kernel', '–')}/{r0.get('theory_objective', '–')}",
            _mean_std([min(r["theory_r2"] for r in recs)] if worst else [r.get("theory_r2", float("nan")) for r in recs]),
            f"{max(r.get('theory_max_abs_diff', float('nan')) for r in recs):.2e}",
            _mean_std([min(r["additivity"] for r in recs)] if worst else [r["additivity"] for r in recs]),
            _mean_std([r.get("slope", float("nan")) for r in recs]),
            _mean_std([r.get("theory_slope", float("nan")) for r in recs]),
        ])
    return tabulate(
        table,
        headers=["model", "task", "theory kernel/objective", "R²(model, theory)", "max |model − theory|", "additivity R²", "slope", "theory slope"],
        tablefmt="github",
        disable_numparse=True,
    )


def sweep_table(records: list[dict[str, Any]]) -> str | None:
    """Big sweeps: per task, how many members reach a perfect held-out score."""
    members, big = _rows_key(records)
    if not big:
        return None
    table = []
    by: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if r["group"] in big and r["status"] == "ok":
            by[(r["group"], r["task"])][r["model"]].append(r[_score_metric(r)])
    for (group, task), per_member in sorted(by.items()):
        means = [float(np.mean(v)) for v in per_member.values()]
        skipped = len({r["model"] for r in records if r["group"] == group and r["task"] == task and r["status"] == "skipped"})
        table.append([group, task, len(means), skipped, sum(m >= 1 - 1e-9 for m in means), f"{np.mean(means):.3f}"])
    return tabulate(
        table,
        headers=["sweep", "task", "models scored", "skipped (invalid)", "perfect held-out", "mean held-out"],
        tablefmt="github",
        disable_numparse=True,
    )


def expectations_table(verdicts: list[Verdict]) -> str:
    """Each claim checked: subject, task, measured value, threshold, PASS/FAIL."""
    table = [
        [v.expectation, v.claim, v.subject, v.task, f"{v.measured:.4g}", v.threshold, v.status, v.detail]
        for v in verdicts
    ]
    return tabulate(
        table,
        headers=["expectation", "claim", "model", "task", "measured", "threshold", "verdict", "detail"],
        tablefmt="github",
        disable_numparse=True,
    )


def records_frame(records: list[dict[str, Any]]) -> pd.DataFrame:
    """Records as a flat table (prediction arrays dropped; sweep values as columns)."""
    rows = []
    for r in records:
        row = {k: v for k, v in r.items() if k not in ARRAY_FIELDS and k != "sweep"}
        for k, v in (r.get("sweep") or {}).items():
            row[f"sweep.{k}"] = v
        rows.append(row)
    return pd.DataFrame(rows)


def write_report(
    out_dir: Path,
    suite_name: str,
    task_ids: list[str],
    records: list[dict[str, Any]],
    verdicts: list[Verdict],
    summary: dict[str, Any],
) -> list[Path]:
    """Write leaderboard.md, records.csv and expectations.csv into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    n_pass = sum(v.passed for v in verdicts)
    lines = [
        f"# {suite_name}: leaderboard",
        "",
        f"compbench {__version__} · device {summary['device']} · wall time {summary['wall_time']:.1f} s · "
        f"cells run {summary['n_run']}, cached {summary['n_cached']}, failed {summary['n_failed']}, "
        f"skipped {summary['n_skipped']} · expectations {n_pass}/{len(verdicts)} pass",
        "",
        "## Held-out score",
        "",
        "Mean ± std over seeds: accuracy on held-out cells for ±1 tasks (a tie at 0 counts ½), "
        "R² against the truth for regression tasks.",
        "",
        leaderboard_table(records, task_ids),
        "",
        "## Agreement with the kernel theory and conjunction-wise additivity",
        "",
        "R² and max |Δ| compare each model's held-out predictions with the kernel-theory prediction for the "
        "same split (its own kernel and objective); additivity is the held-out R² of the conjunction-wise additive fit.",
        "",
        theory_table(records),
        "",
    ]
    sweeps = sweep_table(records)
    if sweeps:
        lines += ["## Sweeps", "", sweeps, ""]
    lines += ["## Expectations", "", expectations_table(verdicts), ""]
    paths = [out_dir / "leaderboard.md", out_dir / "records.csv", out_dir / "expectations.csv"]
    paths[0].write_text("\n".join(lines), encoding="utf-8")
    records_frame(records).to_csv(paths[1], index=False)
    pd.DataFrame([{**v.__dict__, "verdict": v.status} for v in verdicts]).to_csv(paths[2], index=False)
    return paths
