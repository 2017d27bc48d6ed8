"""Cells of two sides paired by (suite, model, task) with their seeds paired, each judged fixed, regressed,
unchanged, new or gone on its leaderboard score.

The rule (docs/reference/commands.md, `compare`): the score is the leaderboard's (`headline_metric` of the
task's kind and of the metrics both sides' records carry), oriented by its metric fact (`direction_of`). A difference within the check's floor for the
metric (`check.baseline.DEFAULT_POLICY`) is unchanged. Beyond it, with two or more paired seeds a paired
t-test on the per-seed differences decides at LEVEL; with one paired seed the check's tolerance rule for a
single seed decides (no spread to test: beyond the floor is a change). A seed that scored on one side and
failed on the other is a regression (or a fix) whatever the numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from compbench.check.baseline import DEFAULT_POLICY
from compbench.compare.sides import Side
from compbench.records import CellRecord
from compbench.records.metric_facts import direction_of, headline_metric

LEVEL = 0.05  # the paired t-test's significance level
FAILING = ("FAIL", "XPASS")  # verdict statuses that fail a suite (compbench.claims.Verdict.fails)
_SAME_RUN = ("cells", "verdicts", "n_run", "n_cached", "interrupted", "partial", "command")  # run facts, not metadata


@dataclass
class CellDiff:
    """One (suite, model, task) cell of either side: its verdict, the paired difference and what changed in the model."""

    suite: str
    model: str
    task: str
    status: str  # fixed | regressed | unchanged | new | gone
    metric: str | None = None
    a: float = math.nan  # mean over the paired seeds
    b: float = math.nan
    n_pairs: int = 0
    p_value: float = math.nan
    rule: str = ""  # how the status was decided, in words
    seed_deltas: dict[int, float] = field(default_factory=dict)  # B − A of each paired seed
    seeds_only_a: list[int] = field(default_factory=list)
    seeds_only_b: list[int] = field(default_factory=list)
    model_change: list[str] = field(default_factory=list)  # parameters, code or adapter that differ between the sides

    @property
    def delta(self) -> float:
        """B − A over the paired seeds (NaN without a pair)."""
        return self.b - self.a

    @property
    def name(self) -> str:
        """'model on task'."""
        return f"{self.model} on {self.task}"


@dataclass(frozen=True)
class VerdictFlip:
    """An expectation whose verdict on a subject and task differs between the sides."""

    expectation: str
    subject: str
    task: str
    a: str  # status on side A (PASS, FAIL, XFAIL, XPASS; "absent")
    b: str

    @property
    def worse(self) -> bool:
        """Whether it now fails the suite where it did not."""
        return self.b in FAILING and self.a not in FAILING


@dataclass
class Comparison:
    """Everything `compare` reports: cells, verdict flips, metadata differences, averages over shared cells."""

    a: Side
    b: Side
    cells: list[CellDiff]
    flips: list[VerdictFlip]
    metadata: list[tuple[str, str, str]]  # (field, A, B) that differ
    averages: dict[str, tuple[float, float, int]]  # metric → (mean A, mean B, cells) over cells both sides scored

    def count(self, status: str) -> int:
        """How many cells have this status."""
        return sum(c.status == status for c in self.cells)

    def fails(self, on: str | None) -> bool:
        """Whether `--fail-on` fails: regressed (a regressed cell or a verdict that now fails) or changed (any change)."""
        if on == "regressed":
            return bool(self.count("regressed") or any(f.worse for f in self.flips))
        if on == "changed":
            return bool(any(c.status != "unchanged" for c in self.cells) or self.flips)
        return False


def _by_cell(records: list[CellRecord]) -> dict[tuple[str, str, str], dict[int, CellRecord]]:
    out: dict[tuple[str, str, str], dict[int, CellRecord]] = {}
    for r in records:
        out.setdefault((r.suite or "", r.model, r.task), {})[r.seed] = r
    return out


def _model_change(a: CellRecord, b: CellRecord) -> list[str]:
    """What differs in the model between two records of one cell: adapter, code hash, each changed parameter."""
    out = []
    if a.adapter != b.adapter:
        out.append(f"adapter {a.adapter} → {b.adapter}")
    if a.code and b.code and a.code != b.code:
        out.append(f"code {a.code[:8]} → {b.code[:8]}")
    pa, pb = a.params or {}, b.params or {}
    for name in sorted(set(pa) | set(pb)):
        if pa.get(name) != pb.get(name):
            out.append(f"{name} {pa.get(name, '—')} → {pb.get(name, '—')}")
    return out


def _ttest(a: list[float], b: list[float]) -> float:
    """The two-sided paired t-test's p-value; with no spread in the differences, 0 (a constant shift) or 1 (none)."""
    d = [y - x for x, y in zip(a, b)]
    mean = sum(d) / len(d)
    if all(abs(x - mean) <= 1e-12 * max(1.0, abs(mean)) for x in d):
        return 0.0 if mean != 0 else 1.0
    from scipy.stats import ttest_rel

    return float(ttest_rel(b, a).pvalue)


def _judge(cell: CellDiff, a: dict[int, CellRecord], b: dict[int, CellRecord]) -> None:
    seeds = sorted(set(a) & set(b))
    cell.seeds_only_a, cell.seeds_only_b = sorted(set(a) - set(b)), sorted(set(b) - set(a))
    broke = [s for s in seeds if a[s].ok and b[s].failed]
    mended = [s for s in seeds if a[s].failed and b[s].ok]
    ok = [s for s in seeds if a[s].ok and b[s].ok]
    pairs: list[tuple[float, float]] = []
    if ok:
        # the headline both sides can be compared on: per sample only where every paired record carries it
        carried = set.intersection(*(set(side[s].metrics) for s in ok for side in (a, b)))
        cell.metric = headline_metric(a[ok[0]].kind, carried)
        both = {s: (a[s].finite_metric(cell.metric), b[s].finite_metric(cell.metric)) for s in ok}
        pairs = [(x, y) for x, y in both.values() if x is not None and y is not None]
        cell.seed_deltas = {s: y - x for s, (x, y) in both.items() if x is not None and y is not None}
        cell.n_pairs = len(pairs)
        if pairs:
            cell.a = sum(x for x, _ in pairs) / len(pairs)
            cell.b = sum(y for _, y in pairs) / len(pairs)
    if broke or mended:
        cell.status = "regressed" if broke else "fixed"
        which = broke or mended
        cell.rule = f"seed{'s' if len(which) > 1 else ''} {', '.join(map(str, which))} " + ("failed in B" if broke else "failed in A only")
        return
    if cell.n_pairs == 0:
        cell.status, cell.rule = "unchanged", "no seed scored on both sides"
        return
    floor = float(DEFAULT_POLICY.get(cell.metric or "", {"floor": 0.0})["floor"])
    worse = -cell.delta if direction_of(cell.metric or "") == "higher" else cell.delta
    if abs(cell.delta) <= floor:
        cell.status, cell.rule = "unchanged", f"Δ within the check's floor {floor:g} for {cell.metric}"
        return
    if cell.n_pairs >= 2:
        cell.p_value = _ttest([x for x, _ in pairs], [y for _, y in pairs])
        significant = cell.p_value < LEVEL
        cell.rule = (f"paired t-test over {cell.n_pairs} seeds: p = {cell.p_value:.3g}, "
                     f"{'below' if significant else 'not below'} {LEVEL:g}")
    else:
        significant = True
        cell.rule = f"1 seed: Δ beyond the check's floor {floor:g} for {cell.metric}"
    cell.status = ("regressed" if worse > 0 else "fixed") if significant else "unchanged"


def _flips(a: list[dict[str, Any]] | None, b: list[dict[str, Any]] | None) -> list[VerdictFlip]:
    if a is None or b is None:
        return []

    def index(vs: list[dict[str, Any]]) -> dict[tuple[str, str, str], str]:
        return {(str(v.get("expectation")), str(v.get("subject")), str(v.get("task"))): str(v.get("status")) for v in vs}

    ia, ib = index(a), index(b)
    return [VerdictFlip(*k, ia.get(k, "absent"), ib.get(k, "absent"))
            for k in sorted(set(ia) | set(ib)) if ia.get(k, "absent") != ib.get(k, "absent")]


def _flat(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _flat(f"{prefix}.{k}" if prefix else str(k), v, out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) and "repo" in v for v in value):
        for v in value:  # the user's repositories, by root
            _flat(f"{prefix}[{v['repo']}]", {k: x for k, x in v.items() if k != "repo"}, out)
    else:
        out[prefix] = "—" if value is None else str(value)


def _metadata(a: Side, b: Side) -> list[tuple[str, str, str]]:
    fa: dict[str, str] = {}
    fb: dict[str, str] = {}
    for side, out in ((a, fa), (b, fb)):
        if side.run is not None:
            _flat("", {"profile": side.run.profile, "suite": side.run.suite,
                       **{k: v for k, v in side.run.info.items() if k not in _SAME_RUN}}, out)
    return [(k, fa.get(k, "—"), fb.get(k, "—")) for k in sorted(set(fa) | set(fb))
            if fa.get(k, "—") != fb.get(k, "—") and not k.startswith("files.")]


def compare_sides(a: Side, b: Side) -> Comparison:
    """Pair the sides' cells and judge each; list verdict flips and metadata differences; average shared cells."""
    ca, cb = _by_cell(a.records), _by_cell(b.records)
    cells = []
    for key in sorted(set(ca) | set(cb)):
        cell = CellDiff(*key, status="new" if key not in ca else "gone" if key not in cb else "")
        if cell.status:
            cell.rule = "only in B" if cell.status == "new" else "only in A"
        else:
            _judge(cell, ca[key], cb[key])
            ra, rb = next(iter(ca[key].values())), next(iter(cb[key].values()))
            cell.model_change = _model_change(ra, rb)
        cells.append(cell)
    sums: dict[str, list[float]] = {}
    for c in cells:
        if c.metric and c.n_pairs:
            s = sums.setdefault(c.metric, [0.0, 0.0, 0])
            s[0] += c.a
            s[1] += c.b
            s[2] += 1
    averages = {m: (s[0] / s[2], s[1] / s[2], int(s[2])) for m, s in sums.items()}
    return Comparison(a, b, cells, _flips(a.verdicts, b.verdicts), _metadata(a, b), averages)
