"""pytest plugin: `pytest suites/kernel-limits.yaml` collects one test item per (model, task) cell.

A cell item trains (or reads from the cache) every seed of its model on its task and fails when a
per-cell expectation of the suite fails, when a cell errors, or — with `--compbench-baseline
FILE` — when it regresses beyond seed noise. Cross-cell claims (`ordered`) become one item each.
Suite files are collected when named on the command line or matched by the `compbench_suites`
ini option (glob patterns).
"""

from __future__ import annotations

import fnmatch
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from compbench.errors import CompbenchError
from compbench.records import is_big



def _per_cell(expectation: Any) -> bool:
    """Whether the expectation's claim is judged per (model, task) cell, or across cells (one item each)."""
    from compbench.claims import get_claim

    return get_claim(expectation.claim).per_cell


class CompbenchFailure(CompbenchError):
    """A suite cell failed an expectation or regressed."""

    exit_code = 1  # a failed expectation or a regression, not bad input (docs/reference/commands.md)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("compbench")
    group.addoption("--compbench-baseline", default=None, help="fail cells that regress against this baseline JSON")
    group.addoption("--compbench-allow-new", action="store_true", default=False,
                    help="with --compbench-baseline: accept cells the baseline does not have (by default they fail)")
    group.addoption("--compbench-results", default=None, help="results directory holding the cache (default results/<suite>)")
    group.addoption("--compbench-device", default="auto", choices=["auto", "cpu", "cuda"])
    group.addoption("--compbench-profile", default=None, help="apply a named profile of the suite (as `compbench run --profile`)")
    group.addoption("--compbench-model", action="append", default=[], metavar="FILE.py:Name",
                    help="add a model to every collected suite, as `compbench run --model` adds it: FILE.py:Name[=ID] or "
                         "package.module:Name (an Adapter subclass or an nn.Module factory), or an adapter's name (repeatable)")
    group.addoption("--compbench-threads", default=None, type=_threads, metavar="N",
                    help="torch threads in each process that trains cells (as `compbench run --threads`; default 1, "
                         "0: torch's own default)")
    group.addoption("--compbench-seeds", default=None, type=_seeds, metavar="N",
                    help="run seeds 0..N-1 of every model that is not deterministic, as `compbench check --seeds N` "
                         "(check against a baseline recorded with --seeds N)")
    parser.addini("compbench_suites", type="args", default=[], help="glob patterns of suite YAML files to collect")


def _seeds(text: str) -> int:
    from compbench.cli import positive_int

    return positive_int(text)


def _threads(text: str) -> int:
    from compbench.cli import int_in
    from compbench.runner.threads import MAX_THREADS

    return int_in(0, MAX_THREADS)(text)


class _Progress:
    """One line per finished cell item on pytest's terminal, so a long suite shows it moves (not with -q).

    The line is made by the item while pytest captures output, carried on its report (which xdist
    sends to the controller) and written from pytest_runtest_logreport, where nothing captures it:
    no `-s` needed, and under `-n` the controller prints every worker's cells.
    """

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.finished = 0

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
        report = yield
        line = getattr(item, "progress_line", None)
        if report.when == "call" and line:
            report.compbench_progress = line
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        line = getattr(report, "compbench_progress", None)
        if not line or hasattr(self.config, "workerinput") or self.config.option.verbose < 0:
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            self.finished += 1
            reporter.ensure_newline()  # after xdist's progress dots
            reporter.write_line(f"{line}, {self.finished} cell item(s) finished)")


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_Progress(config), "compbench-progress")


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix not in (".yaml", ".yml"):
        return None
    patterns = parent.config.getini("compbench_suites")
    rel = str(file_path.relative_to(parent.config.rootpath)) if file_path.is_relative_to(parent.config.rootpath) else str(file_path)
    if parent.session.isinitpath(file_path) or any(fnmatch.fnmatch(rel, p) for p in patterns):
        return SuiteFile.from_parent(parent, path=file_path)
    return None


class SuiteFile(pytest.File):
    """A suite YAML file: one item per (model, task) cell and one per cross-cell expectation."""

    _runner: Any = None
    baseline: Any = None  # the --compbench-baseline file, read and checked against this suite at collection

    def request(self) -> Any:  # compbench.session.RunRequest
        """This file's run as `compbench run` would ask for it: the --compbench-* options; the models added are run
        beside the suite's, not instead of them."""
        from compbench.session import RunRequest

        cfg = self.config
        results = cfg.getoption("compbench_results")
        return RunRequest(self.path, profile=cfg.getoption("compbench_profile"),
                          models=tuple(cfg.getoption("compbench_model")) or None, seeds=cfg.getoption("compbench_seeds"),
                          device=cfg.getoption("compbench_device"), threads=cfg.getoption("compbench_threads"),
                          results=Path(results) if results else None, select_models=False)

    def runner(self) -> Any:
        """The suite's runner (built once per process, i.e. per xdist worker)."""
        if self._runner is None:
            from compbench import session
            from compbench.runner.run import SuiteRunner
            from compbench.runner.threads import plan_for_run

            plan = session.plan(self.request(), self.chosen)
            # Cells train in this process (one pytest process, or one per xdist worker): one torch thread
            # each unless --compbench-threads says otherwise; set as the first cell trains, restored at the end.
            threads = plan_for_run("local", 1, plan.request.threads)
            self._runner = SuiteRunner(plan.whole, plan.out_dir, device=plan.device, resolve=False, threads=threads,
                                       tasks=plan.tasks, jobs=plan.jobs)
            self.session.config.add_cleanup(self._runner.close)
        return self._runner

    def collect(self):  # type: ignore[no-untyped-def]
        from compbench import session
        from compbench.suite import SuiteError

        try:
            self.chosen = session.choose(self.request())
        except session.RequestError as exc:
            raise self.CollectError(exc.worded(session.PLUGIN_NAMES)) from None
        except SuiteError as exc:  # the suite's, or a model's or a seed count's (named by the CLI's flag)
            raise self.CollectError(str(exc).replace("--seeds", "--compbench-seeds")) from None
        self.loaded = self.chosen.whole
        baseline_path = self.config.getoption("compbench_baseline")
        if baseline_path:
            from compbench.check import Baseline, BaselineError

            try:
                self.baseline = Baseline.read(Path(baseline_path))
                self.baseline.check_profile(Path(baseline_path), self.config.getoption("compbench_profile"))
            except BaselineError as exc:
                raise self.CollectError(str(exc)) from None
            if self.baseline.suite != self.loaded.name:
                raise self.CollectError(
                    f"baseline {baseline_path} is for suite {self.baseline.suite!r}, but {self.path.name} is suite "
                    f"{self.loaded.name!r}: its cells cannot be checked against it"
                )
        sizes: dict[str, int] = defaultdict(int)
        for m in self.loaded.models:
            sizes[m.group] += 1
        cells: dict[tuple[str, str], list[Any]] = defaultdict(list)
        for m in self.loaded.models:
            subject = m.group if is_big(sizes[m.group]) else m.id
            for t in self.loaded.tasks_for(m):
                cells[(subject, t.id)].append((m.id, t.id))
        for (subject, task), members in cells.items():
            yield CellItem.from_parent(self, name=f"{subject}::{task}", members=members)
        for i, exp in enumerate(self.loaded.suite.expectations):
            if not _per_cell(exp):
                yield ExpectationItem.from_parent(self, name=f"expectation::{exp.id or f'ordered-{i + 1}'}", index=i)
        # Last: the suite's outcome, the same judgment `compbench run` and `compbench check` exit with.
        yield OutcomeItem.from_parent(self, name="outcome")

    def run_cells(self, pairs: set[tuple[str, str]]) -> list[dict[str, Any]]:
        """Records of the given (model id, task id) cells, trained or read from the cache."""
        runner = self.runner()
        records: list[dict[str, Any]] = []
        for job in runner.jobs:
            if (job.model.id, job.task.entry.id) in pairs:
                records.extend(runner.run(job)[0])
        return records


class CellItem(pytest.Item):
    """All seeds of one model (or one big sweep) on one task."""

    def __init__(self, *, members: list[tuple[str, str]], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.members = members

    def runtest(self) -> None:
        from compbench.outcome.expectations import evaluate_expectations

        parent: SuiteFile = self.parent  # type: ignore[assignment]
        start = time.perf_counter()
        records = parent.run_cells(set(self.members))
        ok, failed, skipped = (sum(r.ok for r in records), sum(r.failed for r in records), sum(r.skipped for r in records))
        self.progress_line = (f"compbench {parent.loaded.name}: {self.name.replace('::', ' on ')}: {ok} ok, {failed} failed, "
                              f"{skipped} skipped ({time.perf_counter() - start:.1f} s")
        problems = [f"cell error ({r.model}, seed {r.seed}): {r.message}" for r in records if r.failed]
        per_cell = [e for e in parent.loaded.suite.expectations if _per_cell(e)]
        profile = self.config.getoption("compbench_profile")
        for v in evaluate_expectations(per_cell, records, parent.loaded.tags, profile=profile):
            if v.detail == "no records matched":
                continue
            self.user_properties.append(("verdict", v.line()))
            if v.fails:  # FAIL and XPASS; an XFAIL passes here as it does in run, report and check
                problems.append(v.line())
        if parent.baseline is not None:
            from compbench.check import Baseline, cell_summaries, failing_lines

            # Only this item's cells: the baseline's other cells are other items' business.
            current = cell_summaries(records)
            baseline = parent.baseline
            base = Baseline(baseline.suite, {c: baseline.cells[c] for c in current if c in baseline.cells}, baseline.policy)
            allow_new = self.config.getoption("compbench_allow_new")
            problems.extend(failing_lines(base, current, allow_new=allow_new))
            # This item's cell as the baseline names it, when no record of it survived (all skipped).
            subject, task = self.name.split("::", 1)
            for cell in (f"{subject}/{task}", f"{subject}[*]/{task}"):
                if cell in baseline.cells and cell not in current:
                    problems.append(f"missing: {cell} *: baseline recorded, now absent from this run")
        if problems:
            raise CompbenchFailure("\n".join(problems))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CompbenchError):  # a failure, or a refusal (a results folder not compbench's)
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"compbench cell {self.name}"


class ExpectationItem(CellItem):
    """A cross-cell claim (e.g. `ordered`), checked on all the cells it names."""

    def __init__(self, *, index: int, **kwargs: Any) -> None:
        super().__init__(members=[], **kwargs)
        self.index = index

    def runtest(self) -> None:
        from compbench.outcome.expectations import evaluate_expectations
        from compbench.suite import matches_model

        parent: SuiteFile = self.parent  # type: ignore[assignment]
        exp = parent.loaded.suite.expectations[self.index]
        pairs = {
            (m.id, t.id)
            for m in parent.loaded.models
            if matches_model(m.id, m.group, m.tags, exp.models)
            for t in parent.loaded.tasks_for(m)
            if any(fnmatch.fnmatchcase(t.id, p) for p in exp.tasks)
        }
        profile = self.config.getoption("compbench_profile")
        failed = [v for v in evaluate_expectations([exp], parent.run_cells(pairs), parent.loaded.tags, profile=profile) if v.fails]
        if failed:
            raise CompbenchFailure("\n".join(v.line() for v in failed))


class OutcomeItem(pytest.Item):
    """The whole suite's outcome (compbench.outcome) and, with a baseline, the whole comparison: what `run`/`check` exit with.

    The cell items give a failure its place; this item guarantees that pytest cannot pass where
    `compbench run` or `compbench check` on the same suite and store would fail (a claim on cells
    no item covers, a baseline cell whose model left the suite, a missing or stale cell).
    """

    def runtest(self) -> None:
        from compbench.outcome import judge

        parent: SuiteFile = self.parent  # type: ignore[assignment]
        runner = parent.runner()
        found = []
        for job in runner.jobs:
            records, _ = runner.run(job)
            found.append({r.key: r for r in records or []})
        outcome = judge(parent.loaded, runner.jobs, found, profile=self.config.getoption("compbench_profile"))
        problems = outcome.problems()
        problems += [f"  {v.line()}" for v in outcome.failing_verdicts]
        if parent.baseline is not None:
            from compbench.check import cell_summaries, failing_lines

            allow_new = self.config.getoption("compbench_allow_new")
            problems += failing_lines(parent.baseline, cell_summaries(outcome.records), allow_new=allow_new)
        if problems:
            raise CompbenchFailure(f"{outcome.headline()}\n" + "\n".join(problems))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, CompbenchError):  # a failure, or a refusal (a results folder not compbench's)
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, "compbench suite outcome"
