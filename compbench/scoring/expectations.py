"""Suite-level expectation verdicts: each expectation's registered claim judges the scored records."""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from compbench.claims import Verdict, get_claim
from compbench.claims.base import Subject
from compbench.suite import Expectation, matches_model

__all__ = ["Verdict", "evaluate_expectations"]


def evaluate_expectations(
    expectations: list[Expectation],
    records: list[dict[str, Any]],
    tags: Mapping[str, set[str]] | None = None,
    *,
    partial: bool = False,
) -> list[Verdict]:
    """Every expectation's verdicts on the records (skipped cells are ignored).

    `tags`: model id → its tags, for `@tag` model patterns. `partial`: only part of the suite ran
    (`--model`), so an expectation that matches no record is left out instead of failing.
    """
    tags = tags or {}
    records = [r for r in records if r["status"] != "skipped"]
    # Thousands of records share a few thousand models and a dozen tasks: each (model, pattern)
    # and (task, pattern) is matched once, not once per record.
    model_hits: dict[tuple[str, str, str], bool] = {}
    task_hits: dict[tuple[str, str], bool] = {}

    def selects(r: dict[str, Any], pattern: str) -> bool:
        key = (r["model"], r["group"], pattern)
        hit = model_hits.get(key)
        if hit is None:
            hit = model_hits[key] = matches_model(r["model"], r["group"], tags.get(r["model"], set()), [pattern])
        return hit

    def task_selected(task: str, patterns: list[str]) -> bool:
        return any(_task_hit(task_hits, task, p) for p in patterns)

    verdicts: list[Verdict] = []
    for i, exp in enumerate(expectations):
        name = exp.id or f"{exp.claim}-{i + 1}"
        claim = get_claim(exp.claim)
        params = exp.claim_params()
        if not claim.per_cell:
            verdicts.extend(claim.judge_all(params, exp.model_copy(update={"id": name}), records, selects))
            continue
        groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        chosen: dict[tuple[str, str], bool] = {}  # (model, group) → selected by this expectation
        for r in records:
            member = (r["model"], r["group"])
            ok = chosen.get(member)
            if ok is None:
                ok = chosen[member] = any(selects(r, p) for p in exp.models)
            if ok and task_selected(r["task"], exp.tasks):
                groups[(r["group"], r["task"])].append(r)
        tag_only = all(p.startswith("@") for p in exp.models)
        if not groups and not partial and not tag_only:  # a tag claim on no model yet is for models users add
            verdicts.append(Verdict(name, exp.claim, ",".join(exp.models), ",".join(exp.tasks), float("nan"), "", False, "no records matched"))
        for (subject, task), recs in sorted(groups.items()):
            verdicts.append(claim.judge(params, name, Subject(subject, task, recs)))
    return verdicts


def _task_hit(cache: dict[tuple[str, str], bool], task: str, pattern: str) -> bool:
    key = (task, pattern)
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = fnmatch.fnmatchcase(task, pattern)
    return hit
