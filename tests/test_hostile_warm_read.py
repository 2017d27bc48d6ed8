"""A warm run that only reads (#34 item 3): a sweep's per-member claims read each one-seed member's values in one pass
over its records (no mean_of call per member and metric), with the values mean_of gives; and a warm run whose report
is unchanged imports nothing that only computes, draws or renders (torch, pandas, matplotlib, scipy, tabulate)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from compbench.claims import base as claims_base
from compbench.claims import get_claim
from compbench.claims import builtin as claims_builtin
from compbench.claims.base import by_member, mean_of, unusable
from compbench.outcome.expectations import evaluate_expectations
from compbench.records import CellRecord, Status
from compbench.suite import Expectation, matches_model, parse_suite
from tiny_suites import cli, cli_env, sweep_suite

VALUES = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=64), st.integers(-3, 3))


def _record(model: str, seed: int, metrics: dict[str, float | None], status: Status = Status.OK) -> CellRecord:
    return CellRecord(key=f"{model}|{seed}", task="t", model=model, group="g", seed=seed, status=status,
                      metrics={k: v for k, v in metrics.items() if v is not None})


def _same(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all((math.isnan(x) and math.isnan(y)) or x == y for x, y in zip(a, b, strict=True))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b[w=1]", "c"]), VALUES, VALUES), max_size=12))
def test_member_means_are_mean_of_per_member(cells):
    from compbench.claims.base import member_means

    records = [_record(m, i, {"x": x, "y": y}) for i, (m, x, y) in enumerate(cells)]
    got = member_means(records, ("x", "y"))
    want = {m: tuple(mean_of(rs, k) for k in ("x", "y")) for m, rs in by_member(records).items()}
    assert list(got) == list(want)  # members in the records' order, as by_member gives them
    assert all(_same(got[m], want[m]) for m in want), (got, want)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(Status)), VALUES, st.booleans()), max_size=8))
def test_unusable_gives_the_reason_of_the_check_by_check_rule(cells):
    records = [_record(f"m{i}", 0, {"additivity": v}, status) for i, (status, v, _) in enumerate(cells)]
    for r, (_, _, na) in zip(records, cells):
        if na:
            r.not_applicable["additivity"] = "a constant target"
    errors = [r for r in records if r.status is Status.ERROR]
    ok = [r for r in records if r.status is Status.OK]
    if errors:
        want = f"{len(errors)} cell(s) failed: {errors[0].message}"
    elif not ok:
        want = "no finished cells"
    elif [r for r in ok if "additivity" in r.not_applicable]:
        first = next(r for r in ok if "additivity" in r.not_applicable)
        want = f"not applicable: additivity of {first.model} says nothing here (a constant target)"
    elif [r for r in ok if r.metric("additivity") is None]:
        want = f"not applicable: {next(r for r in ok if r.metric('additivity') is None).model} does not produce additivity"
    elif not all(np.isfinite(float(r.metrics["additivity"])) for r in ok):
        want = "additivity is not finite for some seed"
    else:
        want = None
    assert unusable(records, ("additivity",)) == want


def test_a_sweeps_claims_read_its_one_seed_members_without_a_call_per_member(monkeypatch):
    # kernel-limits' per-member claims called mean_of once per member and metric (41,643 calls, each a list, a
    # generator and a type check per record): the work now grows with the records, not with calls per member.
    calls = {}
    for n in (2, 6):
        loaded = parse_suite(sweep_suite(n), "sweep.yaml")
        records = [CellRecord(key=f"{m.id}|{t}", task=t, model=m.id, group=m.group, seed=0, status=Status.OK,
                              kind="classification", metrics={"heldout_acc": 1.0 if m.id == "k" else 0.5 + 0.01 * i, "theory_acc": 1.0,
                                       "theory_r2": 1.0, "theory_max_abs_diff": 0.0})
                   for i, m in enumerate(loaded.models) for t in ("cd-1", "cd-2")]
        expected = [(m.id, m.group, t, 1) for m in loaded.models for t in ("cd-1", "cd-2")]
        counted = [0]
        real = claims_base.mean_of

        def counting(*args, _real=real, _n=counted):
            _n[0] += 1
            return _real(*args)

        monkeypatch.setattr(claims_base, "mean_of", counting)
        monkeypatch.setattr(claims_builtin, "mean_of", counting)
        verdicts = evaluate_expectations(loaded.suite.expectations, records, loaded.tags, expected=expected)
        monkeypatch.undo()
        assert [(v.expectation, v.subject, v.task, v.status, v.measured) for v in verdicts] == [
            ("order", "sw", "cd-1 > cd-2", "PASS", 0.0), ("exact", "k", "cd-1", "PASS", 1.0),
            ("exact", "k", "cd-2", "PASS", 1.0), ("exact", "sw", "cd-1", "PASS", 1.0), ("exact", "sw", "cd-2", "PASS", 1.0),
            ("impossible", "k", "cd-1", "XFAIL", 0.0), ("impossible", "k", "cd-2", "XFAIL", 0.0)]
        calls[n] = counted[0]
    assert calls[6] == calls[2], calls  # 9 members or 36: the same calls (the details' means over all of them)


# What a warm `run -q` with its report unchanged has no use for: training and theory (torch, scipy), the report's
# frames, plots and rendered tables (pandas, matplotlib, tabulate and its wcwidth), the writers' own modules.
NOT_ON_A_WARM_RUN = ("torch", "scipy", "pandas", "matplotlib", "tabulate", "wcwidth", "compbench.report.plots",
                     "compbench.report.html", "compbench.report.markdown")


def test_a_warm_quiet_run_imports_nothing_that_computes_draws_or_renders(tmp_path: Path):
    suite, out = tmp_path / "sweep.yaml", tmp_path / "out"
    suite.write_text(sweep_suite(3))
    argv = ["run", "--suite", str(suite), "--results", str(out), "--quiet"]
    assert cli(*argv).rc == 0  # cold: every cell computed, the report written
    code = (f"import json, sys; from compbench.cli import main; rc = main({argv!r}); "
            "print(json.dumps([rc, sorted(sys.modules)]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), timeout=600)
    assert done.returncode == 0, done.stderr
    *said, last = done.stdout.strip().splitlines()
    rc, modules = json.loads(last)
    assert rc == 0 and "0 cells run, 20 reused from the cache" in said[0], done.stdout
    assert "report unchanged" in done.stdout, done.stdout
    imported = sorted(m for m in modules if m.split(".")[0] in NOT_ON_A_WARM_RUN or m in NOT_ON_A_WARM_RUN)
    assert imported == [], imported


CROSS_MEMBERS = [("sw[w=0]", "sw"), ("sw[w=1]", "sw"), ("swap", "swap"), ("lazy", "lazy"), ("k", "k")]
CROSS_TASKS = ["cd-1", "cd-2", "te"]


@settings(max_examples=200, deadline=None)
@given(cells=st.lists(st.tuples(st.sampled_from(CROSS_MEMBERS), st.sampled_from(CROSS_TASKS), st.integers(0, 1),
                                st.sampled_from(["ok", "ok", "ok", "skipped", "error"]), st.sampled_from([0.0, 0.5, 1.0])),
                      max_size=30, unique_by=lambda c: (c[0], c[1], c[2])),
       models=st.lists(st.sampled_from(["sw", "sw[[]w=1*", "swap", "lazy", "@lazy", "k", "s*", "nothing"]), min_size=2,
                       max_size=3, unique=True),
       tasks=st.lists(st.sampled_from(["cd-1", "cd-2", "te", "cd-*", "*", "none"]), min_size=2, max_size=3, unique=True),
       claim=st.sampled_from(["ordered", "close"]), over=st.sampled_from(["tasks", "models"]))
def test_a_cross_cell_claim_gives_the_verdicts_it_gives_on_every_record(cells, models, tasks, claim, over):
    # An ordered or close expectation is handed the records of the groups and tasks it names, not all of them:
    # its verdicts are those it gives when it scans every record (the rule before #34 item 3).
    records = [CellRecord(key=f"{m}|{t}|{s}", task=t, model=m, group=g, seed=s, status=Status(status),
                          metrics={"heldout_acc": acc} if status == "ok" else {})
               for (m, g), t, s, status, acc in cells]
    tags = {"lazy": {"lazy"}, "k": {"kernels"}}
    exp = Expectation(id="e", claim=claim, models=models, tasks=tasks, over=over, metric="heldout_acc")
    got = evaluate_expectations([exp], records, tags)
    judged = [r for r in records if r.status is not Status.SKIPPED]

    def selects(r: CellRecord, pattern: str) -> bool:
        return matches_model(r.model, r.group, tags.get(r.model, set()), [pattern])

    want = get_claim(claim).judge_all(exp.claim_params(), exp, judged, selects)
    assert repr(got) == repr(want)


def test_a_cross_cell_claim_is_handed_the_records_of_its_groups_and_tasks(monkeypatch):
    loaded = parse_suite(sweep_suite(3), "sweep.yaml")
    tasks = ("cd-1", "cd-2", "other")
    records = [CellRecord(key=f"{m.id}|{t}", task=t, model=m.id, group=m.group, seed=0, status=Status.OK,
                          kind="classification", metrics={"heldout_acc": 1.0, "theory_acc": 1.0, "theory_r2": 1.0,
                                                           "theory_max_abs_diff": 0.0})
               for m in loaded.models for t in tasks]
    seen: list[list[tuple[str, str]]] = []
    real = claims_builtin.Ordered.judge_all

    def handed(self, params, expectation, recs, selects):
        seen.append([(r.model, r.task) for r in recs])
        return real(self, params, expectation, recs, selects)

    monkeypatch.setattr(claims_builtin.Ordered, "judge_all", handed)
    order = [e for e in loaded.suite.expectations if e.id == "order"]
    verdicts = evaluate_expectations(order, records, loaded.tags)
    assert [(v.subject, v.task, v.status, v.measured) for v in verdicts] == [("sw", "cd-1 > cd-2", "PASS", 0.0)]
    # `order` compares the sweep sw on cd-1 and cd-2: k's records there and everyone's on `other` are not its business
    # except as the sweep's own records (all 9 members on its three tasks) and the tasks' other records (k on cd-1, cd-2).
    assert seen == [[(r.model, r.task) for r in records if r.group == "sw" or r.task != "other"]]
    assert len(seen[0]) == 9 * 3 + 2 < len(records)
