"""The regression gate cannot pass on nothing (issue #14 items 5, 6, 7).

NaN or missing seeds fail `check`, fewer seeds than the baseline fail it, an empty or foreign
baseline is refused before anything trains, a cell the baseline lacks fails unless allowed,
hollow baselines are not written, and exit codes do not depend on the cache.
"""

from __future__ import annotations

import importlib
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from compbench.check import Baseline, BaselineError, cell_summaries, compare
from tiny_suites import suite_text as scenario_text

pytest_plugins = ["pytester"]

# Test adapters: the truth as predictions (held-out accuracy 1.0), NaN for `nan_seeds`, `drop` fewer
# results than seeds, an exception while the file `marker` exists, InvalidModelError with `invalid`.
ADAPTERS = '''\
import os

import numpy as np

from compbench.adapters import Adapter, AdapterParams, Fitted, InvalidModelError, register_adapter


class OracleParams(AdapterParams):
    nan_seeds: list[int] = []
    drop: int = 0
    marker: str = ""
    invalid: bool = False


@register_adapter("trust-oracle")
class Oracle(Adapter):
    Params = OracleParams

    def fit_seeds(self, train, evaluate, seeds):
        p = self.params
        if p.marker and os.path.exists(p.marker):
            raise RuntimeError(f"marker {p.marker} exists")
        if p.invalid:
            raise InvalidModelError("invalid by construction")
        fits = [Fitted(np.full(len(evaluate), np.nan) if s in p.nan_seeds else np.asarray(evaluate.y, float)) for s in seeds]
        return fits[: len(fits) - p.drop]
'''
MODULE = "compbench_trust_adapters"


@pytest.fixture(scope="module")
def adapters_dir(tmp_path_factory) -> Path:
    """A directory holding the test adapters' module, imported here too (once per process)."""
    where = tmp_path_factory.mktemp("adapters")
    (where / f"{MODULE}.py").write_text(ADAPTERS)
    if MODULE not in sys.modules:
        sys.path.insert(0, str(where))
        importlib.import_module(MODULE)
    return Path(sys.modules[MODULE].__file__).parent


def cli(adapters: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """The real `compbench` CLI in a subprocess, with the test adapters registered."""
    code = (f"import sys; sys.path.insert(0, {str(adapters)!r}); import {MODULE}; "
            "from compbench.cli import main; sys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def suite_text(name: str, models: str, seeds: int = 4) -> str:
    return f"name: {name}\nseeds: {seeds}\ntasks:\n  - {{id: te, family: transitive_equivalence}}\nmodels:\n{models}"


CLEAN = "  - {id: nan, adapter: trust-oracle}\n  - {id: drop, adapter: trust-oracle}\n"


# --- #14.5: NaN and missing seeds, fewer seeds -------------------------------------------------

def rec(model: str, seed: int, acc: float | None, status: str = "ok") -> dict:
    r = {"key": f"{model}-{seed}", "task": "te", "group": model, "model": model, "seed": seed, "status": status}
    if status == "ok" and acc is not None:
        r["heldout_acc"] = acc
    if status == "error":
        r["error"] = "RuntimeError: boom"
    return r


BASE4 = {"m/te": {"task": "te", "group": "m", "errors": 0, "model": "m",
                  "metrics": {"heldout_acc": {"mean": 1.0, "std": 0.0, "n": 4, "values": [1.0] * 4}}}}


def verdicts(records: list[dict]) -> dict[tuple[str, str], tuple[str, str, str]]:
    rows = compare(Baseline("s", BASE4), cell_summaries(records))
    return {(r.cell, r.metric): (r.verdict, r.baseline, r.now) for r in rows if r.failed}


def test_nan_seeds_count_in_n_and_fail():
    summary = cell_summaries([rec("m", 0, 1.0), *(rec("m", s, math.nan) for s in (1, 2, 3))])
    d = summary["m/te"]["metrics"]["heldout_acc"]
    assert d["n"] == 4 and d["nonfinite"] == 3 and math.isnan(d["mean"]) and d["values"] == [1.0, None, None, None]
    assert verdicts([rec("m", 0, 1.0), *(rec("m", s, math.nan) for s in (1, 2, 3))]) == {
        ("m/te", "heldout_acc"): ("non-finite", "1.0000 ± 0.0000 (n=4)", "3 of 4 values missing or non-finite")}
    # A record without the metric at all (but another seed has it) is a missing value, not a missing sample.
    assert verdicts([rec("m", 0, 1.0), rec("m", 1, None), rec("m", 2, 1.0), rec("m", 3, 1.0)])[("m/te", "heldout_acc")][0] == "non-finite"
    inf = cell_summaries([rec("m", s, math.inf) for s in range(4)])["m/te"]["metrics"]["heldout_acc"]
    assert inf["nonfinite"] == 4 and inf["n"] == 4


def test_fewer_seeds_fail_whatever_the_mean_and_errors_fail():
    # One result of four, all perfect: the mean equals the baseline's, the seed count does not.
    assert verdicts([rec("m", 0, 1.0)]) == {("m/te", "seeds"): ("fewer-seeds", "n=4", "n=1")}
    got = verdicts([rec("m", 0, 1.0), rec("m", 1, 1.0), rec("m", 2, 1.0), rec("m", 3, None, "error")])
    assert got == {("m/te", "status"): ("error", "4 seeds ok", "1 failed seed(s): RuntimeError: boom"),
                   ("m/te", "seeds"): ("fewer-seeds", "n=4", "n=3")}
    # More seeds than the baseline is fine.
    five = [rec("m", s, 1.0) for s in range(5)]
    assert verdicts(five) == {} and {r.verdict for r in compare(Baseline("s", BASE4), cell_summaries(five))} == {"ok"}


def test_big_sweep_with_nan_member_and_fewer_members_fails():
    members = [f"g[{i}]" for i in range(14)]
    recs = [{**rec(m, 0, 1.0), "group": "g"} for m in members]
    base = Baseline("s", cell_summaries(recs))
    assert base.cells["g[*]/te"]["members"] == 14 and base.cells["g[*]/te"]["metrics"]["count_perfect"]["mean"] == 14
    nan = [*recs[:-1], {**rec(members[-1], 0, math.nan), "group": "g"}]
    got = {(r.cell, r.metric): r.verdict for r in compare(base, cell_summaries(nan)) if r.failed}
    assert got[("g[*]/te", "mean_heldout")] == "non-finite"
    fewer = {(r.cell, r.metric): (r.verdict, r.now) for r in compare(base, cell_summaries(recs[:13])) if r.failed}
    assert fewer == {("g[*]/te", "members"): ("fewer-seeds", "n=13"),
                     ("g[*]/te", "count_perfect"): ("REGRESSED", "13.0000 ± 0.0000 (n=1)")}


@pytest.mark.slow
def test_check_cli_fails_nan_and_dropped_seeds(adapters_dir, tmp_path):
    suite, base, res = tmp_path / "s.yaml", tmp_path / "base.json", ["--results", str(tmp_path / "res"), "--quiet"]
    suite.write_text(suite_text("trust", CLEAN))
    done = cli(adapters_dir, "baseline", "record", "--suite", str(suite), "--out", str(base), *res, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    cells = json.loads(base.read_text())["cells"]
    assert {c: cells[c]["metrics"]["heldout_acc"]["n"] for c in cells} == {"nan/te": 4, "drop/te": 4}
    # Three of four seeds NaN, and one result fewer than seeds: both cells still "perfect" where measured.
    suite.write_text(suite_text("trust", "  - {id: nan, adapter: trust-oracle, params: {nan_seeds: [1, 2, 3]}}\n"
                                         "  - {id: drop, adapter: trust-oracle, params: {drop: 1}}\n"))
    done = cli(adapters_dir, "check", "--suite", str(suite), "--baseline", str(base), *res, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.strip().splitlines()
    failing = {line.strip() for line in lines if line.startswith("  ")}
    # Whether the runner keeps NaN seeds as ok records (non-finite) or turns them into errors (fewer seeds):
    assert ("non-finite: nan/te heldout_acc: baseline 1.0000 ± 0.0000 (n=4), now 3 of 4 values missing or non-finite" in failing
            or "fewer-seeds: nan/te seeds: baseline n=4, now n=1" in failing), failing
    # One result fewer than seeds: n=3 ok seeds (or, where the runner rejects the whole job, fewer still).
    assert any(line.startswith("fewer-seeds: drop/te seeds: baseline n=4, now n=") and not line.endswith("n=4")
               for line in failing), failing
    assert lines[-1].startswith("check trust against ") and lines[-1].endswith(": FAILED")


# --- #14.6: empty, foreign and hollow baselines; new cells -------------------------------------

def test_empty_and_malformed_baselines_are_refused(tmp_path):
    doc = {"schema_version": 1, "suite": "trust", "cells": {}}
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(BaselineError, match="baseline has no cells"):
        Baseline.read(path)
    path.write_text(json.dumps({**doc, "cells": {"m/te": {"metrics": {"heldout_acc": {"mean": float("nan"), "std": 0, "n": 4}}}}}))
    with pytest.raises(BaselineError, match="'m/te' metric 'heldout_acc': mean must be a finite number"):
        Baseline.read(path)
    path.write_text(json.dumps({**doc, "cells": {"m/te": {"metrics": {"heldout_acc": {"mean": 1.0, "std": 0, "n": 0}}}}}))
    with pytest.raises(BaselineError, match="n must be a whole number of seeds from 1"):
        Baseline.read(path)


def test_check_refuses_empty_and_foreign_baselines_before_training(adapters_dir, tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(suite_text("trust", CLEAN))
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"schema_version": 1, "suite": "trust", "cells": {}}))
    done = cli(adapters_dir, "check", "--suite", str(suite), "--baseline", str(empty), "--results", "res", "--quiet", cwd=tmp_path)
    assert done.returncode == 2 and "baseline has no cells" in done.stderr, done.stderr
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps({"schema_version": 1, "suite": "other-suite", "cells": BASE4}))
    done = cli(adapters_dir, "check", "--suite", str(suite), "--baseline", str(foreign), "--results", "res", "--quiet", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "'other-suite'" in done.stderr and "'trust'" in done.stderr and "nothing was run" in done.stderr
    assert not (tmp_path / "res").exists() and "cells run" not in done.stdout  # nothing trained, no store opened


@pytest.mark.slow
def test_new_cell_fails_unless_allowed(adapters_dir, tmp_path):
    suite, base, res = tmp_path / "s.yaml", tmp_path / "base.json", ["--results", str(tmp_path / "res"), "--quiet"]
    suite.write_text(suite_text("trust", "  - {id: nan, adapter: trust-oracle}\n"))
    assert cli(adapters_dir, "baseline", "record", "--suite", str(suite), "--out", str(base), *res, cwd=tmp_path).returncode == 0
    suite.write_text(suite_text("trust", CLEAN))
    done = cli(adapters_dir, "check", "--suite", str(suite), "--baseline", str(base), *res, cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "  new: drop/te *: baseline absent from the baseline, now present (seeds n=4)" in done.stdout.splitlines()
    assert done.stdout.strip().splitlines()[-1].endswith("1 new, 0 with errors, 0 non-finite, 0 with fewer seeds, 0 not applicable: FAILED")
    done = cli(adapters_dir, "check", "--suite", str(suite), "--baseline", str(base), *res, "--allow-new", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1].endswith("1 new (allowed), 0 with errors, 0 non-finite, 0 with fewer seeds, 0 not applicable: passed")


@pytest.mark.slow
def test_baseline_record_refuses_no_seeds_failed_cells_and_no_ok_cells(adapters_dir, tmp_path):
    suite, base, res = tmp_path / "s.yaml", tmp_path / "base.json", ["--results", str(tmp_path / "res"), "--quiet"]
    suite.write_text(suite_text("trust", CLEAN))
    done = cli(adapters_dir, "baseline", "record", "--suite", str(suite), "--out", str(base), "--seeds", "0", *res, cwd=tmp_path)
    assert done.returncode == 2 and "argument --seeds: must be at least 1, got 0" in done.stderr and not base.exists()
    marker = tmp_path / "fail-now"
    marker.touch()
    suite.write_text(suite_text("trust", f"  - {{id: nan, adapter: trust-oracle}}\n"
                                         f"  - {{id: bad, adapter: trust-oracle, params: {{marker: '{marker}'}}}}\n"))
    done = cli(adapters_dir, "baseline", "record", "--suite", str(suite), "--out", str(base), *res, cwd=tmp_path)
    assert done.returncode == 1 and not base.exists(), done.stdout + done.stderr
    assert "bad/te: 4 failed seed(s) (RuntimeError: marker" in done.stderr and "nan/te" not in done.stderr
    suite.write_text(suite_text("trust", "  - {id: inv, adapter: trust-oracle, params: {invalid: true}, skip_invalid: true}\n"))
    done = cli(adapters_dir, "baseline", "record", "--suite", str(suite), "--out", str(base), *res, cwd=tmp_path)
    assert done.returncode == 1 and "no ok cells" in done.stderr and not base.exists(), done.stdout + done.stderr


OVERLAP = "{id: overlap, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}"
PLUG = scenario_text(name="plug", seeds=3, models=[OVERLAP])
PLUG_EXTRA = scenario_text(name="plug", seeds=3,
                        models=[OVERLAP, "{id: overlap2, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.5, 1.0]}}"])


@pytest.mark.slow
def test_pytest_plugin_refuses_foreign_baseline_and_fails_new_cells(adapters_dir, pytester):
    # Recorded in a subprocess: pytester restores sys.modules after the test, and native modules first
    # imported inside it (torch, sklearn) crash when the next test imports them again.
    pytester.makefile(".yaml", plug=PLUG)
    res = ["--compbench-results", "res", "-p", "no:cacheprovider"]
    done = cli(adapters_dir, "baseline", "record", "--suite", "plug.yaml", "--out", "base.json", "--results", "res", "--quiet",
               cwd=pytester.path)
    assert done.returncode == 0, done.stderr
    doc = json.loads((pytester.path / "base.json").read_text())
    (pytester.path / "foreign.json").write_text(json.dumps({**doc, "suite": "another"}))
    result = pytester.runpytest_subprocess("plug.yaml", *res, "--compbench-baseline", "foreign.json")
    result.stdout.fnmatch_lines(["*baseline foreign.json is for suite 'another', but plug.yaml is suite 'plug'*"])
    assert result.ret != 0 and result.parseoutcomes().get("passed", 0) == 0
    # A model the baseline has never seen: its cell fails, the recorded one passes; --compbench-allow-new accepts it.
    pytester.makefile(".yaml", plug=PLUG_EXTRA)
    result = pytester.runpytest_subprocess("plug.yaml", *res, "--compbench-baseline", "base.json")
    result.stdout.fnmatch_lines(["*new: overlap2/te [*]: baseline absent from the baseline, now present (seeds n=1)*"])
    result.assert_outcomes(passed=1, failed=2)  # the cell, and the suite outcome that says the same
    result = pytester.runpytest_subprocess("plug.yaml", *res, "--compbench-baseline", "base.json", "--compbench-allow-new")
    result.assert_outcomes(passed=3)


# --- #14.7: exit codes do not depend on the cache ----------------------------------------------

def run(suite: Path, out: Path) -> int:
    from compbench.cli import main

    return main(["run", "--suite", str(suite), "--out", str(out), "--device", "cpu", "--quiet", "--format", "md"])


def statuses(out: Path) -> list[str]:
    from compbench.store import ResultStore

    store = ResultStore(out / "store")
    try:
        return sorted(r["status"] for r in store.latest().values())
    finally:
        store.close()


def test_failed_cells_are_retried_not_reused(adapters_dir, tmp_path, capsys):
    marker = tmp_path / "fail-now"
    marker.touch()
    suite, out = tmp_path / "s.yaml", tmp_path / "out"
    suite.write_text(suite_text("retry", f"  - {{id: flaky, adapter: trust-oracle, params: {{marker: '{marker}'}}}}\n", seeds=2))
    assert run(suite, out) == 1 and statuses(out) == ["error", "error"]
    assert run(suite, out) == 1  # still failing: retried (not read back), fails again
    assert "retrying 2 failed cells" in capsys.readouterr().err
    marker.unlink()
    assert run(suite, out) == 0 and statuses(out) == ["ok", "ok"]
    captured = capsys.readouterr()
    assert "retrying 2 failed cells" in captured.err and "2 cells run, 0 reused" in captured.out
    assert run(suite, out) == 0 and "retrying" not in capsys.readouterr().err  # ok cells are reused, silently


def test_skipped_cells_count_as_errors_once_skip_invalid_is_off(adapters_dir, tmp_path):
    suite, out = tmp_path / "s.yaml", tmp_path / "out"
    model = "  - {{id: inv, adapter: trust-oracle, params: {{invalid: true}}, skip_invalid: {}}}\n  - {{id: fine, adapter: trust-oracle}}\n"
    suite.write_text(suite_text("skip", model.format("true"), seeds=2))
    assert run(suite, out) == 0 and statuses(out) == ["ok", "ok", "skipped", "skipped"]
    suite.write_text(suite_text("skip", model.format("false"), seeds=2))
    assert run(suite, out) == 1  # from the cache: the skipped cells are now errors
    assert run(suite, tmp_path / "fresh") == 1  # as a fresh run gives
    suite.write_text(suite_text("skip", model.format("true"), seeds=2))
    assert run(suite, out) == 0 and run(suite, tmp_path / "fresh") == 0
