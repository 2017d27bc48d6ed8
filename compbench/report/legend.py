"""What a reader needs before the numbers: the run's facts, a Tasks and a Models legend, a one-line headline."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

from compbench.report.tables import Table, metric_header
from compbench.records.metric_facts import chance_level, headline_metric, headline_metrics


def run_date(out_dir: Path) -> str:
    """When the results were stored (the store's last write), else now; UTC, to the minute."""
    store = out_dir / "store"
    stamps = [p.stat().st_mtime for p in store.glob("records.sqlite*") if p.is_file()] if store.is_dir() else []
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(max(stamps) if stamps else time.time()))


def git_commit() -> str | None:
    """The short commit of the checkout compbench runs from; None when it is not a git checkout."""
    from compbench.provenance import head_sha

    sha = head_sha(Path(__file__).resolve().parent)
    return sha[:7] if sha else None


def run_facts(ctx: Any) -> list[tuple[str, str]]:
    """(name, value) rows that date and place the run: date, and the git commit when run from a checkout."""
    facts = [("date", run_date(ctx.source or ctx.out_dir))]  # the results' date, wherever the report goes
    commit = git_commit()
    if commit:
        facts.append(("git commit", commit))
    return facts


def _family_doc(family: str) -> str:
    from compbench.tasks import FAMILIES

    try:
        return (FAMILIES.get(family).doc or "").strip().splitlines()[0]
    except Exception:  # an unknown family has no doc; the legend still shows its id
        return ""


def _values(n_values: tuple[int, ...], names: tuple[str, ...]) -> str:
    shape = " × ".join(str(n) for n in n_values)
    return f"{shape} ({', '.join(names)})" if names else shape


def tasks_table(ctx: Any) -> Table:
    """Every task: family, what it asks, components × values, training / held-out cells, kind, metric, chance."""
    rows, meta = [], []
    heads = headline_metrics(ctx.records)
    for entry in ctx.loaded.suite.tasks:
        data = ctx.tasks[entry.id]
        metric = heads.get(entry.id) or headline_metric(data.kind)
        chance = chance_level(metric, data.kind, data.n_classes)
        rows.append([entry.id, entry.family, entry.description or _family_doc(entry.family),
                     _values(data.n_values, tuple(data.component_names)), f"{data.n_train} / {data.n_test}", data.kind,
                     metric_header(metric), "–" if chance is None else f"{chance:g}"])
        meta.append({"task": entry.id})
    headers = ["task", "family", "what it asks", "values per component", "training / held-out cells", "kind",
               "leaderboard metric", "chance"]
    note = "The tasks, as the suite defines them; each leaderboard column holds the task's metric on its held-out cells."
    return Table("Tasks", note, headers, rows, row_meta=meta)


def _key_params(spec: Any) -> str:
    """The params a model sets away from its adapter's defaults (sweep params shown as swept)."""
    params = spec.params.model_dump(exclude_defaults=True) if hasattr(spec.params, "model_dump") else dict(spec.raw_params)
    return ", ".join(f"{k}={v}" for k, v in params.items() if k not in spec.sweep_values) or "defaults"


def models_table(ctx: Any) -> Table:
    """Every model of the suite (a sweep as one row): adapter, non-default params, sweep, tags, description."""
    described = {m.id: m.description for m in ctx.loaded.suite.models}
    groups: dict[str, list[Any]] = {}
    for spec in ctx.loaded.models:
        groups.setdefault(spec.group, []).append(spec)
    rows, meta = [], []
    for group, specs in groups.items():
        first = specs[0]
        swept = {k: sorted({str(s.sweep_values[k]) for s in specs if k in s.sweep_values}) for k in first.sweep_values}
        sweep = "; ".join(f"{k} over {len(v)} values" for k, v in swept.items())
        rows.append([group if len(specs) == 1 and not first.sweep_values else f"{group} ({len(specs)} models)", first.adapter,
                     _key_params(first), sweep or "–", ", ".join(sorted(first.tags)) or "–", described.get(group, "")])
        meta.append({"model": group})
    headers = ["model", "adapter", "key params (non-default)", "sweep", "tags", "description"]
    return Table("Models", "The models, as the suite defines them.", headers, rows, row_meta=meta)


def headline(ctx: Any) -> str:
    """One line: expectations passed, and the best model per task (none when no score is significantly above chance)."""
    from compbench.outcome import verdict_counts

    failed = [v.expectation for v in ctx.verdicts if v.fails]
    head = f"Expectations: {verdict_counts(ctx.verdicts)}" + (f" (failing: {', '.join(dict.fromkeys(failed))})" if failed else "")
    cells = ctx.statistics.leaderboard.cells
    best = []
    for task in ctx.task_ids:
        top = [c for (_, t), c in cells.items() if t == task and c.best]
        if top:
            names = ", ".join(c.model for c in top[:3]) + (f" and {len(top) - 3} more" if len(top) > 3 else "")
            best.append(f"{task}: {names} ({top[0].mean:.3f})")
        elif any(t == task and not math.isnan(c.mean) for (_, t), c in cells.items()):
            best.append(f"{task}: none above chance")
    return head + (". Best per task — " + "; ".join(best) + "." if best else ".")
