"""The one outcome of a suite over a store: which cells it asks for, what became of each, every verdict.

`run`, `report`, `check`, `baseline record`, the pytest plugin and `compbench.evaluate` all call
`judge` (or `stored_outcome`, which reads the store first) and take their exit codes from the
`SuiteOutcome` it returns, so no command can be green while another is red on the same store.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from compbench.claims import Verdict
from compbench.records import CellRecord, Status
from compbench.runner.cells import Job
from compbench.outcome.expectations import evaluate_expectations
from compbench.suite import LoadedSuite

EXIT_OK, EXIT_FAILED = 0, 1
SUMMARY_FILE = "summary.json"  # the last run's facts in a results directory (written by the report)


class CellState(str, Enum):
    """What the store holds for one cell (model, task, seed) the suite asks for."""

    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"  # `skip_invalid: true` and the model is invalid for this task: not a failure
    MISSING = "missing"  # no record: never run, or the run was interrupted
    STALE = "stale"  # a record computed by other code (an older compbench, an edited adapter): shown, recomputed by run

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class ExpectedCell:
    """One cell the suite asks for, and what the store holds for it."""

    model: str
    group: str
    task: str
    seed: int
    key: str
    state: CellState
    record: CellRecord | None = None


@dataclass
class SuiteOutcome:
    """A suite judged over a store: the cells, their states, the records found, every verdict."""

    suite: str
    path: Path | None
    profile: str | None
    cells: list[ExpectedCell]
    verdicts: list[Verdict]
    partial: bool = False  # only part of the suite was selected (--model/--task): unselected claims are not judged
    notes: list[str] = field(default_factory=list)
    # After a partial run, the whole suite's outcome (`whole_outcome`) names the (model, task) pairs the
    # run selected; None: the outcome is of everything its cells cover.
    selected: frozenset[tuple[str, str]] | None = None

    @property
    def records(self) -> list[CellRecord]:
        """The records found for the suite's cells (ok, failed, skipped and stale), in suite order."""
        return [c.record for c in self.cells if c.record is not None]

    def count(self, state: CellState) -> int:
        """How many cells are in this state."""
        return sum(c.state is state for c in self.cells)

    @property
    def counts(self) -> dict[str, int]:
        """Cells per state (every state, zeros included)."""
        n = Counter(c.state for c in self.cells)
        return {s.value: n.get(s, 0) for s in CellState}

    @property
    def failing_verdicts(self) -> list[Verdict]:
        """Verdicts that fail the suite: FAIL, and XPASS (a declared known failure that passes)."""
        return [v for v in self.verdicts if v.fails]

    @property
    def warnings(self) -> list[str]:
        """What a reader should see although it decides nothing, one line each (a known failure out of its range)."""
        return [f"{v.expectation} on {v.subject} / {v.task}: {v.warning}" for v in self.verdicts if v.warning]

    def problems(self) -> list[str]:
        """Why the outcome fails, one line each ([] when it passes)."""
        out = []
        for state, what in ((CellState.FAILED, "failed"), (CellState.MISSING, "missing from the store"),
                            (CellState.STALE, "stale (computed by other code; `compbench run` recomputes them)")):
            cells = [c for c in self.cells if c.state is state]
            if cells:
                first = cells[0]
                why = f": {first.record.message}" if state is CellState.FAILED and first.record else ""
                out.append(f"{len(cells)} cell(s) {what}, e.g. {first.model} on {first.task} seed {first.seed}{why}")
        n = len(self.failing_verdicts)
        if n:
            out.append(f"{n} of {len(self.verdicts)} expectation verdict(s) fail")
        return out

    @property
    def passed(self) -> bool:
        """Whether every cell is current and scored (or skipped as invalid) and no expectation fails."""
        return not self.problems()

    @property
    def exit_code(self) -> int:
        """0 when the outcome passes, 1 when it does not."""
        return EXIT_OK if self.passed else EXIT_FAILED

    def headline(self) -> str:
        """One line: cells by state and expectations passing."""
        c = self.counts
        states = ", ".join(f"{c[s.value]} {s.value}" for s in CellState if c[s.value] or s is CellState.OK)
        return f"{self.suite}: {len(self.cells)} cells ({states}); expectations {verdict_counts(self.verdicts)}"


def verdict_counts(verdicts: list[Verdict]) -> str:
    """How verdicts came out, worded alike everywhere: "5/7 pass (1 known failure, 1 unexpected pass)".

    Only PASS counts as a pass; an XFAIL is counted apart and does not fail the suite, an XPASS fails it.
    """
    n = Counter(v.status for v in verdicts)
    extra = [f"{n['XFAIL']} known failure{'s' if n['XFAIL'] != 1 else ''}" if n["XFAIL"] else "",
             f"{n['XPASS']} unexpected pass{'es' if n['XPASS'] != 1 else ''} (XPASS: remove the declaration)" if n["XPASS"] else ""]
    extra = [e for e in extra if e]
    return f"{n['PASS']}/{len(verdicts)} pass" + (f" ({', '.join(extra)})" if extra else "")


_STATES = {Status.OK: CellState.OK, Status.ERROR: CellState.FAILED, Status.SKIPPED: CellState.SKIPPED}


def _state(record: CellRecord | None, code: str) -> CellState:
    if record is None:
        return CellState.MISSING
    if record.code != code:
        return CellState.STALE
    return _STATES[record.status]


def judge(loaded: LoadedSuite, jobs: list[Job], found: Sequence[Mapping[str, CellRecord]], *, profile: str | None = None,
          partial: bool = False) -> SuiteOutcome:
    """The outcome of the suite's jobs given, per job, the records found per cache key (labelled for that job).

    Per job, not per key: two models of a suite with the same adapter and parameters share their
    cells' keys, and each must be shown under its own name.
    """
    cells: list[ExpectedCell] = []
    expected: list[tuple[str, str, str, int]] = []
    for job, hits in zip(jobs, found):
        expected.append((job.model.id, job.model.group, job.task.entry.id, len(job.seeds)))
        for seed, key in zip(job.seeds, job.keys):
            rec = hits.get(key)
            state = _state(rec, job.code)
            if rec is not None and rec.skipped and not job.model.skip_invalid:
                # Skipped under an earlier `skip_invalid: true`: without it, the error a fresh run would give.
                rec = rec.with_labels(status=Status.ERROR)
                state = state if state is CellState.STALE else CellState.FAILED
            cells.append(ExpectedCell(job.model.id, job.model.group, job.task.entry.id, seed, key, state, rec))
    records = [c.record for c in cells if c.record is not None]
    verdicts = evaluate_expectations(loaded.suite.expectations, records, loaded.tags, partial=partial, expected=expected,
                                     profile=profile)
    return SuiteOutcome(loaded.name, loaded.path, profile, cells, verdicts, partial)


def stored_outcome(loaded: LoadedSuite, out_dir: Path, *, profile: str | None = None, partial: bool = False,
                   devices: list[str] | None = None, tasks: Mapping[str, Any] | None = None,
                   jobs: Sequence[Job] | None = None) -> SuiteOutcome:
    """The outcome of the suite over what `out_dir`'s store holds (no training).

    Each job's cells are looked up under the device of the last run first, then the others; a
    record written by compbench 0.1.0 (record schema 1, whose keys hashed its code) is matched by
    suite, task, model, seed and device, and shown as stale. `jobs`: the suite's jobs on that first device, when
    expanded already (compbench.session's plan); another device's are expanded only if a cell is not found on it.
    """
    from compbench.runner.cells import expand_jobs
    from compbench.runner.stored import StoreView

    devices = devices or report_devices(out_dir)
    runner = StoreView(loaded, out_dir, devices[0], tasks=tasks, jobs=jobs)  # read only; `tasks`: built already, by id
    try:
        store = runner.cache  # the runner's own copy: a record rescored below replaces its entry, not a second read
        legacy = {(r.suite, r.task, r.model, r.seed, r.device): r for r in store.values() if r.code is None}
        expanded: dict[str, list[Job]] = {devices[0]: runner.jobs}

        def jobs_on(device: str) -> list[Job]:
            if device not in expanded:  # thousands of keys hashed: only when a cell is missing on the devices before
                expanded[device] = expand_jobs(loaded, runner.tasks, device)
            return expanded[device]

        found: list[dict[str, CellRecord]] = []
        chosen: list[Job] = []
        for i, job in enumerate(runner.jobs):
            pick, labelled = job, {}
            for device in devices:
                j = jobs_on(device)[i]
                hits = {k: runner.current(j, store[k]) for k in j.keys if k in store}
                for seed, k in zip(j.seeds, j.keys):
                    old = legacy.get((loaded.name, j.task.entry.id, j.model.id, seed, device))
                    if k not in hits and old is not None:
                        hits[k] = old
                if hits:
                    pick = j
                    labelled = dict(zip(hits, runner.relabel(j, list(hits.values()))))
                    break
            chosen.append(pick)
            found.append(labelled)
        return judge(loaded, chosen, found, profile=profile, partial=partial)
    finally:
        runner.close()


def whole_outcome(whole: LoadedSuite, ran: SuiteOutcome, out_dir: Path, *, profile: str | None = None,
                  device: str | None = None, tasks: Mapping[str, Any] | None = None) -> SuiteOutcome:
    """The whole suite after a partial run (`--task`, `--model`): the cells it ran as it found them, every
    other cell as `out_dir`'s store holds it (missing when it holds none).

    What a partial run reports, so that it never replaces a fuller report with its own part. Its
    verdicts are judged on those records as a partial outcome: an expectation on cells neither the
    run nor the store has is left out rather than failed (the run's own exit code still judges only
    `ran`, what it selected).
    """
    devices = report_devices(out_dir)
    if device in devices:  # the run's device first: its own records and their neighbours
        devices = [device, *(d for d in devices if d != device)]
    stored = stored_outcome(whole, out_dir, profile=profile, partial=True, devices=devices, tasks=tasks)
    mine = {(c.model, c.task, c.seed): c for c in ran.cells}
    cells = [mine.pop((c.model, c.task, c.seed), c) for c in stored.cells]
    cells += mine.values()  # none unless `whole` lacks a cell the run had: shown rather than lost
    selected = frozenset((c.model, c.task) for c in ran.cells)
    seen = {(c.model, c.task) for c in cells if c.state is not CellState.MISSING} | selected
    n_seeds: dict[tuple[str, str, str], int] = {}
    for c in cells:
        if (c.model, c.task) in seen:  # a pair neither run nor stored is not asked of the verdicts
            n_seeds[(c.model, c.group, c.task)] = n_seeds.get((c.model, c.group, c.task), 0) + 1
    records = [c.record for c in cells if c.record is not None]
    verdicts = evaluate_expectations(whole.suite.expectations, records, whole.tags, partial=True,
                                     expected=[(m, g, t, n) for (m, g, t), n in n_seeds.items()], profile=profile)
    return SuiteOutcome(whole.name, whole.path, profile, cells, verdicts, partial=True, notes=list(ran.notes),
                        selected=selected)


def report_devices(out_dir: Path) -> list[str]:
    """Devices whose cache keys a report looks up, in order: the last run's (summary.json), then the others."""
    import json

    from compbench.files import read_contained

    try:
        doc = json.loads(read_contained(out_dir, SUMMARY_FILE) or b"{}")
    except ValueError:  # damaged: every device, in the usual order
        doc = {}
    last = doc.get("device") if isinstance(doc, dict) else None
    order = ["cpu", "cuda"]
    return [last, *(d for d in order if d != last)] if last in order else order


def outcome_of_run(loaded: LoadedSuite, summary: Any, *, profile: str | None = None, partial: bool = False) -> SuiteOutcome:
    """The outcome of a finished `run_suite` (its jobs and the records it ran or found for each)."""
    found = [{r.key: r for r in recs or ()} for recs in summary.per_job]
    return judge(loaded, summary.jobs, found, profile=profile, partial=partial)


def record_verdicts(out_dir: Path, run_id: str | None, verdicts: list[Verdict]) -> None:
    """Add a run's expectation verdicts, judged here after it ran, to its row in the store's `runs` table."""
    # Here rather than in the runner: the runner runs before anything is judged and knows no verdict.
    if run_id is None:
        return
    from compbench.store import ResultStore

    store = ResultStore(Path(out_dir) / "store")
    try:
        store.end_run(run_id, {"verdicts": [
            {"expectation": v.expectation, "claim": v.claim, "subject": v.subject, "task": v.task, "status": v.status,
             "measured": v.measured, "threshold": v.threshold} for v in verdicts]})
    finally:
        store.close()
