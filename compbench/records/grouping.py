"""Which sweeps are big: summarised as one subject (leaderboard row, check cell, pytest item) instead of member by member."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from compbench.records.cell import CellRecord

BIG_SWEEP = 12  # a sweep group with more members than this is one subject everywhere


def group_members(records: Iterable[CellRecord]) -> dict[str, list[str]]:
    """Each sweep group's member models among the records (skipped members count: they belong to the sweep)."""
    members: dict[str, dict[str, None]] = defaultdict(dict)
    for r in records:
        members[r.group][r.model] = None
    return {g: list(ms) for g, ms in members.items()}


def big_groups(records: Iterable[CellRecord]) -> set[str]:
    """Sweep groups with more than BIG_SWEEP members."""
    return {g for g, ms in group_members(records).items() if len(ms) > BIG_SWEEP}


def is_big(n_members: int) -> bool:
    """Whether a sweep of n members is summarised as one subject (the suite's own count, before any record)."""
    return n_members > BIG_SWEEP
