"""A comparison as markdown (terminal and PR comment), JSON, and GitHub's step summary."""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from compbench.compare.pairing import Comparison
from compbench.report.escape import md_cell

MAX_ROWS = 40  # cells listed in the markdown: a PR comment stays readable (and far below GitHub's 65 536 characters)
STATUSES = ("regressed", "fixed", "new", "gone", "unchanged")


def _num(x: float) -> str:
    return f"{x:.4f}" if math.isfinite(x) else "—"


def to_markdown(c: Comparison, most: int = MAX_ROWS) -> str:
    """The comparison as markdown: counts, changed cells (beside any model change), verdict flips, metadata, averages."""
    counts = ", ".join(f"{c.count(s)} {s}" for s in STATUSES)
    lines = ["## compbench compare", "", f"A: {md_cell(c.a.label)}  ", f"B: {md_cell(c.b.label)}", "",
             f"**{len(c.cells)} cell{'' if len(c.cells) == 1 else 's'}**: {counts}.", ""]
    shown = [x for x in c.cells if x.status != "unchanged" or x.model_change]
    if shown:
        lines += ["| cell | status | metric | A | B | Δ | rule | model changed |", "|---|---|---|---|---|---|---|---|"]
        for x in shown[:most]:
            seeds = "".join(f"; seeds {', '.join(map(str, s))} only in {w}" for s, w in
                            ((x.seeds_only_a, "A"), (x.seeds_only_b, "B")) if s)
            lines.append("| " + " | ".join(md_cell(v) for v in (
                x.name, x.status, x.metric or "", _num(x.a), _num(x.b),
                f"{x.delta:+.4f}" if math.isfinite(x.delta) else "—", x.rule + seeds, "; ".join(x.model_change))) + " |")
        if len(shown) > most:
            lines.append(f"\n… and {len(shown) - most} more changed cells (the JSON lists them all).")
        lines.append("")
    if c.flips:
        lines += ["### Expectation verdicts that changed", "", "| expectation | subject | task | A | B |", "|---|---|---|---|---|"]
        lines += ["| " + " | ".join(md_cell(v) for v in (f.expectation, f.subject, f.task, f.a, f.b)) + " |" for f in c.flips[:most]]
        lines.append("")
    elif c.a.verdicts is None or c.b.verdicts is None:
        lines += ["Expectation verdicts: not recorded on one side (a store written before compbench recorded runs).", ""]
    if c.averages:
        lines += ["### Averages over the cells both sides scored", ""]
        lines += [f"- {m}: A {_num(a)}, B {_num(b)} ({n} cell{'' if n == 1 else 's'})" for m, (a, b, n) in sorted(c.averages.items())]
        lines.append("")
    if c.metadata:
        lines += ["### What differs between the runs", "", "| field | A | B |", "|---|---|---|"]
        lines += ["| " + " | ".join(md_cell(v) for v in row) + " |" for row in c.metadata[:most]]
        lines.append("")
    for note in c.a.notes + c.b.notes:
        lines.append(f"Note: {md_cell(note)}")
    return "\n".join(lines).rstrip() + "\n"


def _clean(value: Any) -> Any:
    """NaN as null (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


def to_json(c: Comparison) -> str:
    """The whole comparison as JSON (every cell, flip and metadata difference)."""
    doc = {"a": c.a.label, "b": c.b.label, "counts": {s: c.count(s) for s in STATUSES},
           "cells": [{**asdict(x), "delta": x.delta} for x in c.cells], "flips": [asdict(f) for f in c.flips],
           "metadata": [{"field": k, "a": a, "b": b} for k, a, b in c.metadata],
           "averages": {m: {"a": a, "b": b, "cells": n} for m, (a, b, n) in c.averages.items()}}
    return json.dumps(_clean(doc), indent=2, sort_keys=True) + "\n"


def github_summary(c: Comparison) -> Path | None:
    """Append the markdown to GitHub's step summary ($GITHUB_STEP_SUMMARY), the file it names; None when unset."""
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if not target:
        return None
    with open(target, "a", encoding="utf-8") as fh:  # GitHub's own file, shared by the job's steps: appended to
        fh.write(to_markdown(c) + "\n")
    return Path(target)
