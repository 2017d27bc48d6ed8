"""Property (#22): for random small suites, selectors, profiles and holes punched in the store, `run`,
`report`, `check` and the pytest plugin state the same verdicts and exit with the same code.

Each draw: a suite of cheap models (kernels that pass, a network that diverges into an error
record, a non-PSD kernel skipped as invalid) with random expectations; run once; punch random
holes in the store (records deleted: missing; records marked as computed by other code: stale);
`report` must then fail whenever a hole was punched; run again (it recomputes exactly the holes)
and every command must agree with it, verdict by verdict.
"""

from __future__ import annotations

import pytest

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compbench.cli import main

ROOT = Path(__file__).resolve().parent.parent

MODELS = {
    "k1": "{id: k1, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}",
    "k2": "{id: k2, adapter: kernel, params: {kernel: relu_ntk}}",
    "diverges": "{id: diverges, adapter: mlp, params: {width: 16, lr: 1.0e+6, max_steps: 20}, tasks: [add]}",
    "invalid": "{id: invalid, adapter: kernel, params: {kernel: overlap, weights: [1.0, 0.0, 0.0]}, skip_invalid: true}",
}
CLAIMS = [
    "{{id: e{i}, source: {{paper: compbench, threshold: a test fixture}}, claim: additive, models: [{m}], tasks: [{t}]}}",
    "{{id: e{i}, source: {{paper: compbench, threshold: a test fixture}}, claim: matches_kernel, models: [{m}], tasks: [{t}], tolerance: 1.0e-6}}",
    "{{id: e{i}, source: {{paper: compbench, threshold: a test fixture}}, claim: above, models: [{m}], tasks: [{t}], metric: additivity, bound: 0.99}}",
]
SELECTORS = ['"*"', "k1", '"k*"', '"@kernels"', "diverges"]


def _suite_text(models: list[str], expectations: list[tuple[int, str, str]], profile: bool) -> str:
    lines = ["name: prop", "seeds: 1", "tasks:", "  - {id: add, family: additive, params: {anchors: [[4], [4]]}}",
             "  - {id: te, family: transitive_equivalence}", "models:"]
    lines += [f"  - {MODELS[m]}" for m in models]
    lines.append("expectations:")
    for i, (claim, sel, task) in enumerate(expectations):
        lines.append("  - " + CLAIMS[claim].format(i=i, m=sel, t=task))
    if profile:
        lines += ["profiles:", "  alt:", "    params: {k1: {weights: [0.0, 0.2, 1.0]}}"]
    return "\n".join(lines) + "\n"


def _selectable(models: list[str], sel: str) -> bool:
    """Whether a selector matches a model of the suite (else the suite is refused, as tested elsewhere)."""
    kernels = {"k1", "k2", "invalid"} & set(models)
    return {'"*"': bool(models), "k1": "k1" in models, '"k*"': bool({"k1", "k2"} & set(models)),
            '"@kernels"': bool(kernels), "diverges": "diverges" in models}[sel]


@st.composite
def draws(draw):
    models = draw(st.lists(st.sampled_from(sorted(MODELS)), min_size=1, max_size=4, unique=True))
    if "k1" not in models:
        models = ["k1", *models]
    exps = draw(st.lists(st.tuples(st.integers(0, len(CLAIMS) - 1), st.sampled_from(SELECTORS),
                                   st.sampled_from(['"*"', "add", "te"])), min_size=1, max_size=3))
    exps = [(c, s, t) for c, s, t in exps if _selectable(models, s)
            and not (s == "diverges" and t == "te")] or [(0, "k1", "add")]
    profile = draw(st.booleans())
    holes = draw(st.lists(st.tuples(st.sampled_from(["missing", "stale"]), st.integers(0, 10)), max_size=3))
    return models, exps, profile, holes


def _punch(store: Path, holes: list[tuple[str, int]]) -> int:
    """Delete (missing) or mark as computed by other code (stale) some stored records; how many were hit."""
    with sqlite3.connect(store) as db:
        ids = [row[0] for row in db.execute("SELECT id FROM records WHERE status != 'error' ORDER BY id")]
        hit = set()
        for kind, n in holes:
            if not ids:
                break
            rid = ids[n % len(ids)]
            if rid in hit:
                continue
            hit.add(rid)
            if kind == "missing":
                db.execute("DELETE FROM records WHERE id = ?", (rid,))
            else:
                (text,) = db.execute("SELECT record FROM records WHERE id = ?", (rid,)).fetchone()
                rec = json.loads(text)
                rec["code"] = "computed-by-other-code"
                db.execute("UPDATE records SET record = ? WHERE id = ?", (json.dumps(rec), rid))
    return len(hit)


def _verdicts(out: Path) -> list[tuple[str, str, str, str]]:
    frame = pd.read_csv(out / "expectations.csv")
    return sorted(zip(frame.expectation, frame.subject, frame.task.astype(str), frame.verdict))


@pytest.mark.slow
@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(draw=draws())
def test_every_command_states_the_same_outcome(tmp_path_factory, draw):
    models, exps, profile, holes = draw
    tmp = tmp_path_factory.mktemp("prop")
    suite = tmp / "prop.yaml"
    suite.write_text(_suite_text(models, exps, profile))
    healthy = tmp / "healthy.yaml"  # the baseline is recorded on the models that can be recorded
    healthy.write_text(_suite_text([m for m in models if m in ("k1", "k2")], [(0, "k1", "add")], profile))
    out, base = tmp / "out", tmp / "base.json"
    prof = ["--profile", "alt"] if profile else []
    assert main(["baseline", "record", "--suite", str(healthy), "--results", str(tmp / "healthy"), "--out", str(base),
                 "--quiet", *prof]) == 0

    first = main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "csv", *prof])
    verdicts = _verdicts(out)
    assert first in (0, 1)
    if _punch(out / "store" / "records.sqlite", holes):
        # A hole in the store is never reported green.
        assert main(["report", "--suite", str(suite), "--out", str(out), "--format", "csv", *prof]) == 1
    ran = main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "csv", *prof])
    assert ran == first and _verdicts(out) == verdicts
    reported = main(["report", "--suite", str(suite), "--out", str(out), "--format", "csv", *prof])
    assert reported == ran and _verdicts(out) == verdicts
    checked = main(["check", "--suite", str(suite), "--results", str(out), "--baseline", str(base), "--allow-new",
                    "--quiet", *prof])
    assert checked == ran
    plugin = subprocess.run(
        [sys.executable, "-m", "pytest", str(suite), "-q", "-p", "no:cacheprovider", "--compbench-results", str(out),
         "--compbench-baseline", str(base), "--compbench-allow-new", *(["--compbench-profile", "alt"] if profile else [])],
        capture_output=True, text=True, cwd=tmp, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert plugin.returncode == ran, plugin.stdout[-3000:]
