"""Suite-level expectation verdicts: each expectation's registered claim judges the scored records."""

from __future__ import annotations

import fnmatch
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from compbench.claims import Verdict, get_claim
from compbench.claims.base import Subject
from compbench.records import CellRecord, Status, as_records
from compbench.suite import Expectation, matches_model
from compbench.suite.expand import MemberIndex

__all__ = ["Verdict", "evaluate_expectations"]

Expected = tuple[str, str, str, int]  # (model id, sweep group, task id, seeds) of a cell the suite asks for


def evaluate_expectations(
    expectations: list[Expectation],
    records: list[CellRecord] | list[Mapping[str, Any]],
    tags: Mapping[str, set[str]] | None = None,
    *,
    partial: bool = False,
    expected: list[Expected] | None = None,
    profile: str | None = None,
) -> list[Verdict]:
    """Every expectation's verdicts on the records (skipped cells are ignored).

    `tags`: model id → its tags, for `@tag` model patterns. `partial`: only part of the suite ran
    (`--model`), so an expectation that matches no record is left out instead of failing.
    `expected`: the cells the suite asks for; a per-cell claim on a (model, task) whose records are
    missing (never run, interrupted) fails, instead of being judged on whatever was found. `profile`: the
    run's profile (None: the default), for the scope of each `known_failure`: a verdict in scope is XFAIL
    when it fails and XPASS (failing the suite) when it passes; nothing outside the scope is absorbed.
    """
    tags = tags or {}
    records = as_records(records)
    found: dict[tuple[str, str], int] = defaultdict(int)
    for r in records:
        found[(r.group, r.task)] += 1
    records = [r for r in records if r.status is not Status.SKIPPED]
    # The cells the suite asks for, per (group, task): each expectation then looks only at its tasks.
    asked: dict[tuple[str, str], list[tuple[str, int]]] = defaultdict(list)
    asked_total: dict[tuple[str, str], int] = defaultdict(int)  # a group taken whole needs no look at its members
    for model, group, task, n in expected or ():
        asked[(group, task)].append((model, n))
        asked_total[(group, task)] += n
    # Thousands of records share a few thousand models of a few sweep groups and a dozen tasks: patterns are matched
    # per group (a sweep selected by its name is taken whole) and each (task, pattern) once, not once per record.
    members = MemberIndex([*((r.model, r.group, tags.get(r.model, ())) for r in records),
                           *((m, g, tags.get(m, ())) for (g, _), ms in asked.items() for m, _ in ms)])
    task_hits: dict[tuple[str, str], bool] = {}

    def selects(r: CellRecord, pattern: str) -> bool:
        return members.selects(r.model, r.group, pattern)

    def task_selected(task: str, patterns: list[str]) -> bool:
        return any(_task_hit(task_hits, task, p) for p in patterns)

    # Records by (sweep group, task), in their order: an expectation takes a selected group's records whole.
    by_group_task: dict[tuple[str, str], list[CellRecord]] = defaultdict(list)
    for r in records:
        by_group_task[(r.group, r.task)].append(r)

    verdicts: list[Verdict] = []
    for i, exp in enumerate(expectations):
        name = exp.id or f"{exp.claim}-{i + 1}"
        claim = get_claim(exp.claim)
        params = exp.claim_params()
        if not claim.per_cell:
            if partial and not _every_pattern_ran(exp, records, selects, task_selected):
                continue  # part of what it compares did not run (--model, --task): not judged, not failed
            mine = _cross_cell_records(exp, records, by_group_task, members.selected(exp.models), task_selected)
            verdicts.extend(claim.judge_all(params, exp.model_copy(update={"id": name}), mine, selects))
            continue
        chosen = members.selected(exp.models)  # group → the members selected (None: all of them)
        groups: dict[tuple[str, str], list[CellRecord]] = {}
        for (group, task), recs in by_group_task.items():
            if group in chosen and task_selected(task, exp.tasks):
                ids = chosen[group]
                picked = recs if ids is None else [r for r in recs if r.model in ids]
                if picked:
                    groups[(group, task)] = picked
        wanted: dict[tuple[str, str], int] = defaultdict(int)  # (group, task) → cells the suite asks for
        for (group, task), asked_members in asked.items():
            if group not in chosen or not task_selected(task, exp.tasks):
                continue
            ids = chosen[group]
            if ids is None:
                wanted[(group, task)] += asked_total[(group, task)]
                continue
            for model, n in asked_members:
                if model in ids:
                    wanted[(group, task)] += n
        for subject_task in wanted:
            groups.setdefault(subject_task, [])
        tag_only = all(p.startswith("@") for p in exp.models)
        if not groups and tag_only:
            continue  # a tag no model of this run carries (validation refuses unknown tags): for models users add
        if not groups and not partial:
            verdicts.append(Verdict(name, exp.claim, ",".join(exp.models), ",".join(exp.tasks), float("nan"), "", False, "no records matched"))
        for (subject, task), recs in sorted(groups.items()):
            lacking = wanted.get((subject, task), 0) - found.get((subject, task), 0)
            if lacking > 0:
                verdicts.append(Verdict(name, exp.claim, subject, task, float("nan"), "", False,
                                        f"{lacking} of {wanted[(subject, task)]} cell(s) missing from the store "
                                        "(not run, or the run was interrupted)"))
                continue
            if not recs:
                continue  # every cell of it skipped as invalid (`skip_invalid: true`): nothing to judge, nothing failed
            verdicts.append(claim.judge(params, name, Subject(subject, task, recs)))
    return _with_known_failures(expectations, verdicts, records, tags, profile)


def _cross_cell_records(exp: Expectation, records: list[CellRecord], by_group_task: Mapping[tuple[str, str], list[CellRecord]],
                        chosen: Mapping[str, Any], task_selected: Any) -> list[CellRecord]:
    """The records a cross-cell claim can read, in suite order: those of a sweep group with a member its model patterns
    select, and those of a task its task patterns match (`ordered` and `close` read no other: a group is compared
    when one of its records is selected, a task when one of its records is there; every other record was scanned by
    each such claim for nothing)."""
    keep = {gt for gt in by_group_task if gt[0] in chosen or task_selected(gt[1], exp.tasks)}
    if len(keep) == len(by_group_task):
        return records
    return [r for r in records if (r.group, r.task) in keep]


def _every_pattern_ran(exp: Expectation, records: list[CellRecord], selects: Any, task_selected: Any) -> bool:
    """Whether each model pattern and each task pattern of a cross-cell expectation selects a record that ran."""
    return (all(any(selects(r, p) for r in records) for p in exp.models)
            and all(any(task_selected(r.task, [p]) for r in records) for p in exp.tasks))


def _with_known_failures(expectations: list[Expectation], verdicts: list[Verdict], records: list[CellRecord],
                         tags: Mapping[str, set[str]], profile: str | None) -> list[Verdict]:
    from dataclasses import replace

    from compbench.suite.schema import DEFAULT_PROFILE

    declared = {exp.id or f"{exp.claim}-{i + 1}": exp.known_failure for i, exp in enumerate(expectations) if exp.known_failure}
    if not declared:
        return verdicts
    # A verdict names sweep groups and models by id; a group's tags are its members'.
    group_tags: dict[str, set[str]] = defaultdict(set)
    for r in records:
        group_tags[r.group] |= set(tags.get(r.model, ()))
        group_tags[r.model] |= set(tags.get(r.model, ()))
    run_profile = profile or DEFAULT_PROFILE

    def in_scope(v: Verdict, kf: Any) -> bool:
        if run_profile not in kf.profiles:
            return False
        subjects = _names_in(v.subject)
        tasks = _names_in(v.task)
        return (bool(subjects) and all(matches_model(s, s, group_tags.get(s, set()), kf.models) for s in subjects)
                and bool(tasks) and all(any(fnmatch.fnmatchcase(t, p) for p in kf.tasks) for t in tasks))

    out = []
    for v in verdicts:
        kf = next((k for k in declared.get(v.expectation, ()) if in_scope(v, k)), None)
        if kf is None:
            out.append(v)
            continue
        lo, hi = kf.measured
        warning = ""
        if not (lo <= v.measured <= hi):  # NaN too: the declaration quoted a value this run did not reproduce
            shown = f"{v.measured:.4g}" if v.measured == v.measured else "no value"
            warning = (f"known failure measured {shown}, outside its declared range [{lo:g}, {hi:g}]: "
                       "check the declaration against this run")
        out.append(replace(v, known_failure=" ".join(kf.reason.split()), warning=warning))
    return out


def _names_in(label: str) -> list[str]:
    """The model or task ids a verdict's subject or task names ("a > b", "a ≈ b", "cd-1 > cd-2")."""
    import re

    return [p for p in re.split(r"\s*(?:>|≈|,)\s*", label) if p]


def _task_hit(cache: dict[tuple[str, str], bool], task: str, pattern: str) -> bool:
    key = (task, pattern)
    hit = cache.get(key)
    if hit is None:
        hit = cache[key] = fnmatch.fnmatchcase(task, pattern)
    return hit
