"""A warm run's own work, once and per sweep group (#34): the suite is loaded, its jobs expanded and its outcome judged
once per command, and the work of each grows with the sweep groups, not with their thousands of members, while every
answer (validation, keys, verdicts, the report) is the one the member-by-member rule gives."""

from __future__ import annotations

import cProfile
import fnmatch
import pstats
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compbench.claims import get_claim
from compbench.claims.base import Subject, Verdict
from compbench.outcome.expectations import evaluate_expectations
from compbench.records import CellRecord, Status
from compbench.suite import Expectation, matches_model, parse_suite
from tiny_suites import cli, sweep_suite

# Ids as sweeps write them (brackets, '=', '.', ','), groups that are prefixes of one another, and tags.
IDS = st.sampled_from(["a", "ab", "a[w=1]", "a[w=1.5,r=0]", "b[x=2]", "b", "c[y=0]", "cd-1", "cd-2"])
GROUPS = st.sampled_from(["a", "ab", "b", "c", "cd"])
TAGS = st.lists(st.sampled_from(["kernels", "lazy", "rich"]), max_size=2, unique=True)
PATTERNS = st.sampled_from(["*", "a", "a*", "a[[]*", "a[[]w=1]", "a[[]w=1*", "b*", "?b", "cd-?", "c*", "@kernels",
                            "@lazy", "@rich", "nothing", "[ab]", "*=0]"])


def _brute(members: list[tuple[str, str, tuple[str, ...]]], patterns: list[str]) -> dict[str, frozenset[str] | None]:
    """Per group, the member ids `matches_model` selects (None: all of them), member by member."""
    out: dict[str, frozenset[str] | None] = {}
    by_group: dict[str, dict[str, tuple[str, ...]]] = {}
    for model, group, tags in members:
        by_group.setdefault(group, {}).setdefault(model, tags)
    for group, ids in by_group.items():
        hit = frozenset(m for m, tags in ids.items() if matches_model(m, group, tags, patterns))
        if hit:
            out[group] = None if len(hit) == len(ids) else hit
    return out


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(IDS, GROUPS, TAGS.map(tuple)), max_size=12), st.lists(PATTERNS, min_size=1, max_size=3))
def test_the_member_index_selects_what_matches_model_selects(members, patterns):
    from compbench.suite.expand import MemberIndex

    index = MemberIndex(members)
    assert index.selected(patterns) == _brute(members, patterns)
    first_tags = {}
    for model, group, tags in members:
        first_tags.setdefault((model, group), tags)
    for (model, group), tags in first_tags.items():
        for p in patterns:
            assert index.selects(model, group, p) == matches_model(model, group, tags, [p])
    # A member it was not built with is answered by matches_model itself (no tags known).
    assert index.selects("zz[q=1]", "zz", "zz") and not index.selects("zz[q=1]", "zz", "@kernels")


def _reference(expectations: list[Expectation], records: list[CellRecord], tags: dict[str, set[str]], *,
               partial: bool, expected: list[tuple[str, str, str, int]]) -> list[Verdict]:
    """Per-cell verdicts as the record-by-record rule states them (evaluate_expectations before #34, no memo)."""
    found: dict[tuple[str, str], int] = defaultdict(int)
    for r in records:
        found[(r.group, r.task)] += 1
    ok = [r for r in records if not r.skipped]

    def selects(model: str, group: str, exp: Expectation) -> bool:
        return matches_model(model, group, tags.get(model, set()), exp.models)

    def task_selected(task: str, exp: Expectation) -> bool:
        return any(fnmatch.fnmatchcase(task, p) for p in exp.tasks)

    out: list[Verdict] = []
    for i, exp in enumerate(expectations):
        name = exp.id or f"{exp.claim}-{i + 1}"
        claim, params = get_claim(exp.claim), exp.claim_params()
        groups: dict[tuple[str, str], list[CellRecord]] = {}
        for r in ok:
            if selects(r.model, r.group, exp) and task_selected(r.task, exp):
                groups.setdefault((r.group, r.task), []).append(r)
        wanted: dict[tuple[str, str], int] = defaultdict(int)
        for model, group, task, n in expected:
            if selects(model, group, exp) and task_selected(task, exp):
                wanted[(group, task)] += n
        for key in wanted:
            groups.setdefault(key, [])
        if not groups and all(p.startswith("@") for p in exp.models):
            continue
        if not groups and not partial:
            out.append(Verdict(name, exp.claim, ",".join(exp.models), ",".join(exp.tasks), float("nan"), "", False,
                               "no records matched"))
        for (subject, task), recs in sorted(groups.items()):
            lacking = wanted.get((subject, task), 0) - found.get((subject, task), 0)
            if lacking > 0:
                out.append(Verdict(name, exp.claim, subject, task, float("nan"), "", False,
                                   f"{lacking} of {wanted[(subject, task)]} cell(s) missing from the store "
                                   "(not run, or the run was interrupted)"))
            elif recs:
                out.append(claim.judge(params, name, Subject(subject, task, recs)))
    return out


MEMBERS = [("sw[w=0]", "sw"), ("sw[w=1]", "sw"), ("sw[w=10]", "sw"), ("swap", "swap"), ("lazy", "lazy"), ("k", "k")]
TASKS = ["cd-1", "cd-2", "te"]


@settings(max_examples=150, deadline=None)
@given(cells=st.lists(st.tuples(st.sampled_from(MEMBERS), st.sampled_from(TASKS), st.integers(0, 2),
                                st.sampled_from(["ok", "ok", "ok", "skipped", "error"]), st.sampled_from([0.0, 0.5, 1.0])),
                      max_size=30, unique_by=lambda c: (c[0], c[1], c[2])),
       asked=st.lists(st.tuples(st.sampled_from(MEMBERS), st.sampled_from(TASKS), st.integers(1, 3)), max_size=8,
                      unique_by=lambda a: (a[0], a[1])),
       patterns=st.lists(st.lists(PATTERNS | st.sampled_from(["sw", "sw[[]w=1*", "sw*", "lazy", "@lazy"]), min_size=1,
                                  max_size=2), min_size=1, max_size=3),
       task_patterns=st.sampled_from([["*"], ["cd-*"], ["te", "cd-2"]]), partial=st.booleans())
def test_per_cell_verdicts_are_the_record_by_record_rule(cells, asked, patterns, task_patterns, partial):
    records = [CellRecord(key=f"{m}|{t}|{s}", task=t, model=m, group=g, seed=s, status=Status(status),
                          metrics={"heldout_acc": acc, "additivity": acc} if status == "ok" else {})
               for (m, g), t, s, status, acc in cells]
    tags = {"lazy": {"lazy"}, "k": {"kernels"}, "sw[w=1]": {"kernels"}}
    expected = [(m, g, t, n) for (m, g), t, n in asked]
    exps = [Expectation(id=f"e{i}", claim=("above" if i % 2 else "additive"), models=p, tasks=task_patterns,
                        **({"metric": "heldout_acc", "bound": 0.4} if i % 2 else {"tolerance": 0.9}))
            for i, p in enumerate(patterns)]
    got = evaluate_expectations(exps, records, tags, partial=partial, expected=expected)
    assert repr(got) == repr(_reference(exps, records, tags, partial=partial, expected=expected))


def _counted(monkeypatch, target: object, name: str) -> list[int]:
    """Count the calls of target.name from now on (the count is the list's one item)."""
    n = [0]
    f = getattr(target, name)

    def counting(*args, **kwargs):
        n[0] += 1
        return f(*args, **kwargs)

    monkeypatch.setattr(target, name, counting)
    return n


def test_loading_and_expanding_a_sweep_asks_per_group_not_per_member(monkeypatch):
    # kernel-limits' 5,000 sweep members each asked the adapter registry 6 times (validation built every member's
    # adapter to ask for its objective, key and code version per cell) and matched every expectation's patterns.
    from compbench.registry import Registry
    from compbench.runner.cells import expand_jobs, prepare_tasks

    work = {}
    for n in (2, 2, 6):  # the first: caches filled once per process (the code version's) left out of the count
        registry = _counted(monkeypatch, Registry, "get")
        loaded = parse_suite(sweep_suite(n), "sweep.yaml")
        jobs = expand_jobs(loaded, prepare_tasks(loaded), "cpu")
        monkeypatch.undo()
        assert len(loaded.models) == n * n + 1 and len(jobs) == 2 * len(loaded.models)
        work[n] = registry[0]
    assert work[6] == work[2]


def test_judging_a_sweep_matches_each_pattern_per_group_not_per_member(monkeypatch):
    work = {}
    for n in (2, 6):
        loaded = parse_suite(sweep_suite(n), "sweep.yaml")
        records = [CellRecord(key=f"{m.id}|{t}", task=t, model=m.id, group=m.group, seed=0, status=Status.OK,
                              metrics={"heldout_acc": 1.0, "theory_acc": 1.0, "theory_r2": 1.0,
                                       "theory_max_abs_diff": 0.0})
                   for m in loaded.models for t in ("cd-1", "cd-2")]
        expected = [(m.id, m.group, t, 1) for m in loaded.models for t in ("cd-1", "cd-2")]
        globbed = _counted(monkeypatch, fnmatch, "fnmatchcase")
        verdicts = evaluate_expectations(loaded.suite.expectations, records, loaded.tags, expected=expected)
        monkeypatch.undo()
        assert [(v.expectation, v.subject, v.task, v.status) for v in verdicts] == [
            ("order", "sw", "cd-1 > cd-2", "PASS"), ("exact", "k", "cd-1", "PASS"), ("exact", "k", "cd-2", "PASS"),
            ("exact", "sw", "cd-1", "PASS"), ("exact", "sw", "cd-2", "PASS"), ("impossible", "k", "cd-1", "XFAIL"),
            ("impossible", "k", "cd-2", "XFAIL")]
        work[n] = globbed[0]
    assert work[6] == work[2]


def _calls(profile: cProfile.Profile, where: str, name: str) -> int:
    """How many times a profiled call ran the function `name` defined in a file ending with `where`."""
    stats = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    return sum(n for (file, _, func), (_, n, *_) in stats.items() if func == name and file.endswith(where))


@pytest.fixture
def warm_sweep(tmp_path: Path) -> tuple[Path, Path]:
    """The small kernel-limits (a 3 × 3 sweep) run cold, then warm once (its report written and cached)."""
    suite, out = tmp_path / "sweep.yaml", tmp_path / "out"
    suite.write_text(sweep_suite(3))
    for _ in range(2):
        r = cli("run", "--suite", str(suite), "--results", str(out), "--quiet")
        assert r.rc == 0, r.text
    return suite, out


def test_a_warm_run_loads_expands_and_judges_once(warm_sweep):
    suite, out = warm_sweep
    profile = cProfile.Profile()
    r = profile.runcall(cli, "run", "--suite", str(suite), "--results", str(out), "--quiet")
    assert r.rc == 0 and "0 cells run, 20 reused from the cache" in r.out, r.text
    assert _calls(profile, "suite/load.py", "parse_suite") == 1
    assert _calls(profile, "runner/cells.py", "expand_jobs") == 1
    assert _calls(profile, "runner/cells.py", "prepare_tasks") == 1
    assert _calls(profile, "outcome/__init__.py", "judge") == 1
    assert _calls(profile, "outcome/expectations.py", "evaluate_expectations") == 1
    assert _calls(profile, "claims/builtin.py", "judge_all") == 1  # the one cross-cell expectation, judged once


GOLDEN = Path(__file__).parent / "golden" / "warm-sweep"  # written by compbench e129547, before #34's warm-run changes


def _without_run_facts(leaderboard: str) -> str:
    """The leaderboard less its Run summary (date, commit, wall time, cells run or cached: this run's own facts)."""
    return re.sub(r"## Run summary\n.*?(?=\n## )", "", leaderboard, flags=re.S)


def test_a_warm_run_reports_what_it_reported_before_the_per_group_judging(warm_sweep):
    suite, out = warm_sweep
    shutil.rmtree(out / ".report")  # every writer writes again, from this code's outcome (no digest cache to skip them)
    r = cli("run", "--suite", str(suite), "--results", str(out), "--quiet")
    assert r.rc == 0 and "0 cells run, 20 reused" in r.out and "expectations 5/7 pass (2 known failures)" in r.out, r.text
    assert (out / "expectations.csv").read_bytes() == (GOLDEN / "expectations.csv").read_bytes()
    assert _without_run_facts((out / "leaderboard.md").read_text(encoding="utf-8")) == \
        (GOLDEN / "leaderboard.md").read_text(encoding="utf-8")


def test_a_report_of_a_whole_store_expands_the_jobs_once(warm_sweep, tmp_path):
    # `compbench report` expanded the suite's jobs for its plan, again for the store's view, and again for every other
    # device (the cuda keys), though every cell was found under the last run's device: kernel-limits' 15,000 jobs 3 times.
    suite, out = warm_sweep
    profile = cProfile.Profile()
    r = profile.runcall(cli, "report", "--suite", str(suite), "--results", str(out), "--report-dir", str(tmp_path / "rep"),
                        "--quiet")
    assert r.rc == 0 and "sweep: 20 cells (16 ok, 4 skipped); expectations 5/7 pass (2 known failures)" in r.out, r.text
    assert _calls(profile, "runner/cells.py", "expand_jobs") == 1
    assert (tmp_path / "rep" / "expectations.csv").read_bytes() == (GOLDEN / "expectations.csv").read_bytes()
