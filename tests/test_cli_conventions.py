"""CLI conventions: --version, `python -m compbench`, -q/-v, --task, --results, errors where the user looks,
--fail-fast, a one-sided "best", sweep labels kept literal, and progress that names the job and weighs its cost."""

from __future__ import annotations

import io
import math
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from compbench import __version__
from compbench.adapters import Adapter, AdapterParams, register_adapter
from compbench.cli import main
from compbench.records import CellError, CellRecord, Status
from compbench.report.statistics import above_chance, leaderboard_cells
from compbench.report.tables import leaderboard
from compbench.report.terminal import print_leaderboard
from compbench.runner.progress import NETWORK_COST, Progress, job_cost, weighted_eta
from tiny_suites import kernel_suite, scenario, suite_text

ROOT = Path(__file__).resolve().parent.parent


class _BoomParams(AdapterParams):
    """No parameters."""


@register_adapter("boom-for-cli-conventions")
class _Boom(Adapter):
    """Raises in training with a two-line message: every cell of it is an error record."""

    Params = _BoomParams
    deterministic = True

    def fit_seeds(self, train, evaluate, seeds):  # noqa: ANN001
        raise RuntimeError("boom went the adapter\nsecond line " + "x" * 400)


KERNELS = kernel_suite("conv", "leak", "impossible", relu=False)

WITH_BOOM = suite_text("add", name="boomy", models=["{id: boom, adapter: boom-for-cli-conventions}",
                                                  "{id: overlap, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}"])


def _suite(tmp_path: Path, text: str, name: str = "s.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.slow
def test_version_flag_and_python_m(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out == f"compbench {__version__}\n"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "compbench", "--version"], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120)
    assert done.returncode == 0 and done.stdout == f"compbench {__version__}\n", done.stderr
    done = subprocess.run([sys.executable, "-m", "compbench", "validate", "--quiet", str(ROOT / "suites" / "kernel-limits.yaml")],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert done.returncode == 0 and done.stdout == "", done.stderr  # -q: the exit code says it


@pytest.mark.slow
def test_task_filter_runs_only_its_tasks_and_judges_the_run_as_partial(tmp_path, capsys):
    suite = _suite(tmp_path, KERNELS)
    out = tmp_path / "out"
    # The whole suite fails: `impossible` on te cannot pass.
    assert main(["run", "--suite", str(suite), "--results", str(tmp_path / "whole"), "-q"]) == 1
    capsys.readouterr()
    # --task add: only add runs; `impossible` (on te) is not judged, so the run passes.
    assert main(["run", "--suite", str(suite), "--results", str(out), "--task", "ad*", "-q"]) == 0, capsys.readouterr()
    records = pd.read_csv(out / "records.csv")
    assert list(records.task) == ["add"] and list(records.model) == ["overlap"]
    verdicts = pd.read_csv(out / "expectations.csv")
    assert list(verdicts.expectation) == ["leak"] and list(verdicts.verdict) == ["PASS"]
    assert "1 cells run" in capsys.readouterr().out
    # Repeatable, and a glob that matches nothing is a usage error naming the tasks.
    assert main(["run", "--suite", str(suite), "--results", str(out), "--task", "nope", "--task", "zzz", "-q"]) == 2
    assert "--task nope zzz matches no task of suite conv (tasks: add, te)" in capsys.readouterr().err


@pytest.mark.slow
def test_results_is_the_one_name_and_out_still_works_on_run_and_report(tmp_path, capsys):
    suite = _suite(tmp_path, KERNELS.split("expectations:")[0])
    assert main(["run", "--suite", str(suite), "--out", str(tmp_path / "a"), "-q"]) == 0
    assert (tmp_path / "a" / "leaderboard.md").exists()
    capsys.readouterr()
    assert main(["report", "--suite", str(suite), "--results", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    assert "held-out score" in out and f"report files in {tmp_path / 'a'}" in out
    assert main(["report", "--suite", str(suite), "--out", str(tmp_path / "a"), "-q"]) == 0
    out = capsys.readouterr().out
    assert "held-out score" not in out and "conv: 2 cells (2 ok); expectations 0/0 pass" in out  # -q: no table
    assert main(["baseline", "record", "--suite", str(suite), "--results", str(tmp_path / "a"),
                 "--out", str(tmp_path / "b.json"), "-q", "-v"]) == 0
    out = capsys.readouterr().out
    assert "wrote baseline" in out and "  overlap/add" in out and "  overlap/te" in out  # -v: every recorded cell


def _rec(model: str, task: str, seed: int, acc: float | None, message: str = "") -> CellRecord:
    if acc is None:
        return CellRecord(f"{model}-{task}-{seed}", task, model, seed, Status.ERROR, kind="classification",
                          error=CellError(message))
    return CellRecord(f"{model}-{task}-{seed}", task, model, seed, Status.OK, kind="classification",
                      metrics={"heldout_acc": acc})


def test_best_is_one_sided_never_below_chance():
    # te: both models below chance (0.5); the higher of them is still no "best". cd: 0.9 is.
    records = [_rec("a", "te", s, v) for s, v in enumerate([0.30, 0.32, 0.31])]
    records += [_rec("b", "te", s, v) for s, v in enumerate([0.40, 0.42, 0.41])]
    records += [_rec("a", "cd", s, v) for s, v in enumerate([0.90, 0.91, 0.92])]
    records += [_rec("b", "cd", s, v) for s, v in enumerate([0.60, 0.61, 0.62])]
    _, cells = leaderboard_cells(records, ["te", "cd"])
    assert not cells[("b", "te")].at_chance  # far below chance: the old two-sided rule made it best
    assert [c.best for c in (cells[("a", "te")], cells[("b", "te")])] == [False, False]
    assert cells[("a", "cd")].best and not cells[("b", "cd")].best
    table = leaderboard(records, ["te", "cd"])
    assert table.best == frozenset({(0, 2)})
    # The rule: one-sided, 2 standard errors over seeds, or 0.05 with one seed.
    assert above_chance(0.54, 0.024, 3, 0.5) and not above_chance(0.52, 0.024, 3, 0.5)  # 2 SE = 0.0277
    assert not above_chance(0.3, 0.01, 3, 0.5) and not above_chance(0.5, 0.0, 6, 0.5)
    assert above_chance(0.56, math.nan, 1, 0.5) and not above_chance(0.549, math.nan, 1, 0.5)
    assert above_chance(0.3, 0.01, 3, 0.5, lower=True) and above_chance(-1.0, math.nan, 1, None)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_rich_leaderboard_prints_sweep_labels_literally_and_errors_after_it():
    label = "mlp-sigma[init_scale=0.001]"
    task = SimpleNamespace(id="te")
    model = SimpleNamespace(id=label, group="mlp-sigma")
    loaded = SimpleNamespace(suite=SimpleNamespace(tasks=[task]), models=[model], tasks_for=lambda m: [task],
                             task_kinds={"te": "classification"})
    records = [_rec(label, "te", 0, 0.9), _rec(label, "te", 1, None, "CUDA out of memory.\nTried to allocate 2 GiB")]
    for r in records:
        r.group = "mlp-sigma"
    tty = _Tty()
    print_leaderboard(loaded, records, [], tty)
    text = tty.getvalue()
    assert "\x1b[" in text  # rich wrote to a terminal
    assert label in text  # not eaten as markup
    assert f"  {label} on te: CUDA out of memory. Tried to allocate 2 GiB" in text.splitlines()


@pytest.mark.slow
def test_errors_are_shown_on_the_terminal_and_in_leaderboard_md(tmp_path, capsys):
    suite = _suite(tmp_path, WITH_BOOM)
    out = tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--results", str(out), "-q"]) == 1
    lines = capsys.readouterr().out.splitlines()
    i = lines.index("errors (the first per model and task; all in records.csv):")
    shown = lines[i + 1]
    assert shown.startswith("  boom on add: RuntimeError: boom went the adapter second line xxx")
    assert shown.endswith("…") and len(shown) == len("  boom on add: ") + 200
    md = (out / "leaderboard.md").read_text()
    errors = md.split("## Errors\n")[1].split("\n## ")[0]
    assert "| boom    | add    | RuntimeError: boom went the adapter second line xxx" in errors
    assert "overlap" not in errors
    assert main(["report", "--suite", str(suite), "--results", str(out)]) == 1
    assert "  boom on add: RuntimeError: boom went the adapter" in capsys.readouterr().out


@pytest.mark.slow
def test_fail_fast_stops_at_the_first_failed_cell_and_keeps_what_finished(tmp_path, capsys):
    suite = _suite(tmp_path, WITH_BOOM)
    out = tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--results", str(out), "--fail-fast", "-q"]) == 1
    captured = capsys.readouterr()
    assert "stopped at the first failed cell (--fail-fast): boom on add seed 0: RuntimeError: boom went the adapter" in captured.err
    records = pd.read_csv(out / "records.csv")
    assert list(records.model) == ["boom"]  # overlap, after it, did not run
    summary = (out / "leaderboard.md").read_text().split("## Run summary")[1].split("\n## ")[0]
    assert "| interrupted" in summary and "| cells missing" in summary
    # The next run without --fail-fast retries boom and runs the rest.
    assert main(["run", "--suite", str(suite), "--results", str(out), "-q"]) == 1
    assert sorted(pd.read_csv(out / "records.csv").model) == ["boom", "overlap"]
    capsys.readouterr()
    assert main(["run", "--suite", str(suite), "--results", str(out), "--fail-fast", "--executor", "process"]) == 2
    assert "--fail-fast works with --executor local only" in capsys.readouterr().err


def _job(model: str, task: str, tags: tuple[str, ...], seeds: int, n_train: int) -> SimpleNamespace:
    mask = np.zeros(n_train + 5, dtype=bool)
    mask[:n_train] = True
    return SimpleNamespace(task=SimpleNamespace(data=SimpleNamespace(train_mask=mask), entry=SimpleNamespace(id=task)),
                           model=SimpleNamespace(id=model, tags=tags), seeds=tuple(range(seeds)))


def test_eta_weighs_jobs_by_cost_and_the_line_names_the_job():
    kernel, net = _job("overlap", "add", ("kernels",), 1, 17), _job("lazy", "te", ("networks",), 2, 30)
    assert job_cost(kernel) == 17 and job_cost(net) == 2 * 30 * NETWORK_COST
    assert weighted_eta(10.0, 100.0, 300.0) == 30.0 and weighted_eta(5.0, 0.0, 10.0) is None
    progress = Progress([kernel, net], "s", enabled=True)
    assert progress.cost_left == 17 + 6000
    progress.start(kernel)
    assert progress.status().endswith("ETA ?, running overlap on add")
    progress._since -= 1.0  # a fake clock: the kernel job took 1 s
    progress.advance(kernel, ["ok"], cached=False)
    # 1 s for cost 17: the network job's cost 6000 is ETA 6000/17 s = 5:53 (not 1 s, as counting jobs would say)
    assert progress.status() == "jobs 1/2 (1 done, 0 cached, 0 failed, 0 skipped), ETA 5:53, last overlap on add"
    progress.start(net)
    assert progress.status().endswith("running lazy on te")


@pytest.mark.slow
def test_verbose_run_prints_a_progress_line_naming_each_job(tmp_path, capsys):
    suite = _suite(tmp_path, KERNELS.split("expectations:")[0])
    assert main(["run", "--suite", str(suite), "--results", str(tmp_path / "o"), "-v"]) == 0
    err = capsys.readouterr().err  # stderr is no terminal here: plain lines, one per job with -v
    assert "running overlap on add" in err and "running overlap on te" in err
    assert "[conv] jobs 2/2 (2 done, 0 cached, 0 failed, 0 skipped), ETA 0:00, last overlap on te" in err


PLUGIN_SUITE = scenario("plug-small")  # tests/suites/plug-small.yaml


@pytest.mark.slow
def test_pytest_plugin_writes_a_line_per_finished_cell_unless_quiet(tmp_path):
    (tmp_path / "plug.yaml").write_text(PLUGIN_SUITE)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    args = [sys.executable, "-m", "pytest", "plug.yaml", "-p", "no:cacheprovider", "--compbench-results", "res"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("compbench plug:")]
    assert [line.split(" (")[0] for line in lines] == ["compbench plug: overlap on te: 1 ok, 0 failed, 0 skipped",
                                                       "compbench plug: overlap on add: 1 ok, 0 failed, 0 skipped"]
    assert lines[0].endswith(" s, 1 cell item(s) finished)") and lines[1].endswith(" s, 2 cell item(s) finished)")
    quiet = subprocess.run(args + ["-q"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert quiet.returncode == 0 and "compbench plug:" not in quiet.stdout, quiet.stdout


def test_live_progress_bar_names_a_sweep_member_literally(monkeypatch):
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    member = _job("m[a=1]", "te", ("networks",), 1, 10)
    with Progress([member], "s") as progress:
        progress.start(member)
        progress.advance(member, ["ok"], cached=False)
    assert "last m[a=1] on te" in tty.getvalue()  # rich markup would eat the brackets


@pytest.mark.slow
def test_task_filter_leaves_a_cross_cell_claim_on_an_unrun_task_unjudged(tmp_path, capsys):
    suite = _suite(tmp_path, KERNELS.replace("  - {id: te, family: transitive_equivalence}\n",
                                             "  - {id: te, family: transitive_equivalence}\n"
                                             "  - {id: te2, family: transitive_equivalence}\n").split("  - {id: impossible")[0]
                   + "  - {id: order, source: {paper: compbench, threshold: a test fixture}, claim: ordered, over: tasks, models: [overlap], tasks: [te, te2], metric: heldout_acc, tolerance: 0.2}\n")
    # Whole: te and te2 score alike, so the order (gap > 0.2) fails.
    assert main(["run", "--suite", str(suite), "--results", str(tmp_path / "whole"), "-q"]) == 1
    assert "FAIL order [ordered] overlap on te > te2" in capsys.readouterr().out
    # --task te: te2 did not run; the run does not judge the order rather than fail it on a missing side.
    assert main(["run", "--suite", str(suite), "--results", str(tmp_path / "part"), "--task", "te", "-q"]) == 0
    assert "expectations 0/0 pass" in capsys.readouterr().out
    # Its report is of the whole suite as the store holds it: te2 shares te's cache key (same family and
    # parameters), so the store holds it and the report judges the order on it, as `compbench report` would.
    assert set(pd.read_csv(tmp_path / "part" / "expectations.csv").expectation) == {"order"}


def test_validate_verbose_lists_tasks_and_models(tmp_path, capsys):
    suite = _suite(tmp_path, KERNELS)
    assert main(["validate", "-v", str(suite)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == ["  task add: additive, regression", "  task te: transitive_equivalence, classification",
                         "  model overlap: kernel, 1 seed(s), on add, te"]
