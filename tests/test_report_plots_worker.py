"""The report's plots drawn in forked processes, one per usable core (issues #17, #34), give the same files as drawn in this one.

While they are drawn, the writers that do not need them run; a failure or death of the drawing
process is an error naming it, never a report without its plots.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest

from compbench.runner.run import run_suite
from compbench.suite import parse_suite
from tiny_suites import kernel_suite

publish_module = importlib.import_module("compbench.report.publish")  # the package re-exports the function

SUITE = kernel_suite("drawn", "chance", seeds=2)

pytestmark = pytest.mark.skipif(not publish_module._can_fork(), reason="needs fork and two cores")


_RUN: dict[str, object] = {}


def _publish(tmp_path: Path, name: str, monkeypatch, fork: bool) -> tuple[Path, list[Path]]:
    if not _RUN:  # one run: both reports get the same records and the same run summary
        loaded = parse_suite(SUITE, "drawn.yaml")
        _RUN.update(loaded=loaded, summary=run_suite(loaded, tmp_path / "run", device="cpu", progress=False))
    loaded, summary = _RUN["loaded"], _RUN["summary"]
    out = tmp_path / name
    started = []
    worker = publish_module._PlotWorker

    def recording(*args):
        started.append(os.getpid())
        return worker(*args)

    monkeypatch.setattr(publish_module, "_PlotWorker", recording)
    # Neither folder holds a store, so each report would date itself "now", to the minute: two reports a few seconds
    # apart across a minute's turn differed by that date alone.
    monkeypatch.setattr(importlib.import_module("compbench.report.legend"), "run_date", lambda _: "2026-01-01 00:00 UTC")
    monkeypatch.setattr(publish_module, "_can_fork", lambda: fork)
    paths = publish_module.publish(out, loaded, summary.records, vars(summary), verdicts=[])
    assert started == ([os.getpid()] if fork else [])
    return out, paths


@pytest.fixture(autouse=True)
def _fresh_run():
    _RUN.clear()
    yield
    _RUN.clear()


@pytest.mark.slow
@pytest.mark.parametrize("cores", [1, 3])
def test_forked_plots_equal_plots_drawn_here(tmp_path, monkeypatch, cores):
    # One drawing process per usable core, each drawing every `cores`-th plot: the same files as one process drawing all.
    import compbench.runner.threads as threads

    monkeypatch.setattr(threads, "usable_cores", lambda: cores)
    here, here_paths = _publish(tmp_path, "here", monkeypatch, fork=False)
    forked, forked_paths = _publish(tmp_path, "forked", monkeypatch, fork=True)
    rel = lambda paths, root: [p.relative_to(root) for p in paths]  # noqa: E731
    assert rel(forked_paths, forked) == rel(here_paths, here)  # the same files, in the order of the formats
    files = [p.relative_to(here) for p in here.rglob("*") if p.is_file() and p.suffix in (".png", ".svg", ".md", ".html")]
    assert any(f.suffix == ".png" for f in files) and any(f.name == "leaderboard.html" for f in files)
    for f in files:
        assert (forked / f).read_bytes() == (here / f).read_bytes(), f


def test_a_failure_while_drawing_is_raised_with_its_traceback(tmp_path, monkeypatch):
    import compbench.report.plots as plots

    def broken(*args, **kwargs):
        raise ValueError("no axes today")

    monkeypatch.setattr(plots, "draw_share", broken)  # the forked processes inherit it
    with pytest.raises(RuntimeError, match=r"(?s)drawing the report's plots failed.*ValueError: no axes today"):
        _publish(tmp_path, "broken", monkeypatch, fork=True)
    assert (tmp_path / "broken" / "predictions.parquet").is_file()  # written meanwhile, not lost


def test_a_dead_drawing_process_is_an_error(tmp_path, monkeypatch):
    import compbench.report.plots as plots

    monkeypatch.setattr(plots, "draw_share", lambda *a, **k: os._exit(3))
    with pytest.raises(RuntimeError, match=r"a process drawing the report's plots died \(exit code 3\)"):
        _publish(tmp_path, "dead", monkeypatch, fork=True)


@pytest.mark.parametrize("cores", [1, 2, 4])
def test_one_drawing_process_per_usable_core(tmp_path, monkeypatch, cores):
    # Counted, not timed: N usable cores (runner.threads.usable_cores, affinity and cgroup quota) start N drawing
    # processes while this one writes the tables; with one core this process is the one that draws (no fork).
    import compbench.runner.threads as threads

    monkeypatch.setattr(threads, "usable_cores", lambda: cores)
    workers = []
    worker = publish_module._PlotWorker

    def recording(*args):
        workers.append(worker(*args))
        return workers[-1]

    monkeypatch.setattr(publish_module, "_PlotWorker", recording)
    loaded = parse_suite(SUITE, "drawn.yaml")
    summary = run_suite(loaded, tmp_path / "run", device="cpu", progress=False)
    paths = publish_module.publish(tmp_path / "out", loaded, summary.records, vars(summary), verdicts=[])
    started = [[proc.name for proc, _ in w.procs] for w in workers]
    assert started == ([] if cores == 1 else [[f"compbench-plots-{k}" for k in range(cores)]])
    assert all(proc.exitcode == 0 for w in workers for proc, _ in w.procs)
    assert sum(p.suffix == ".png" for p in paths) == len(list((tmp_path / "out" / "plots").glob("*.png"))) > 0


@pytest.mark.parametrize("formats", [("md", "png"), ("html",)])
def test_the_pages_build_their_tables_while_the_plots_are_drawn(tmp_path, monkeypatch, formats):
    # The markdown (and HTML) page asked for the plots first, so this process waited for the drawing processes and
    # only then built the tables (statistics, leaderboard, theory table) they could have been built beside.
    import compbench.report.markdown as markdown
    import compbench.runner.threads as threads

    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(publish_module, "_can_fork", lambda: True)
    events = []
    tables, result = markdown.report_tables, publish_module._PlotWorker.result
    monkeypatch.setattr(markdown, "report_tables", lambda ctx: events.append("tables") or tables(ctx))
    monkeypatch.setattr(publish_module._PlotWorker, "result", lambda self: events.append("plots") or result(self))
    loaded = parse_suite(SUITE, "drawn.yaml")
    summary = run_suite(loaded, tmp_path / "run", device="cpu", progress=False)
    publish_module.publish(tmp_path / "out", loaded, summary.records, vars(summary), verdicts=[], formats=formats)
    assert events[:2] == ["tables", "plots"] and events.count("tables") == 1
    page = tmp_path / "out" / ("leaderboard.md" if "md" in formats else "leaderboard.html")
    assert "overlap" in page.read_text(encoding="utf-8")


def test_a_plots_layout_is_computed_once_for_its_png_and_its_svg(tmp_path, monkeypatch):
    # Counted, not timed: constrained layout measured every label of a figure for its PNG and again for its SVG (a third
    # of the report's drawing on kernel-limits); the SVG now keeps the layout the PNG's draw settled.
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    runs = []
    execute = ConstrainedLayoutEngine.execute
    monkeypatch.setattr(ConstrainedLayoutEngine, "execute", lambda self, fig: runs.append(fig) or execute(self, fig))
    out, paths = _publish(tmp_path, "here", monkeypatch, fork=False)
    svgs = sorted(p.name for p in (out / "plots").glob("*.svg"))
    assert len(svgs) >= 2 and len(svgs) == len(list((out / "plots").glob("*.png")))
    assert len(runs) == len(svgs), (len(runs), svgs)  # one layout per figure, not one per file
    assert len({id(f) for f in runs}) == len(svgs)
