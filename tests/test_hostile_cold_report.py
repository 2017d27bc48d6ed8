"""The cold report at the run's speed (issue #34 item 2), its files unchanged.

kernel-limits has 5,013 models (two 50 × 50 kernel sweeps); a report that asks a per-model question once per model
(each time reading every model) spent 65 s of each drawing process listing its plots before drawing one. The drawing
processes share the plots by claiming the next one (a fixed share by position left one process every slow grid);
the CSVs are written a column at a time, the bytes pandas' row writer gave; and the plots' digest follows the scores,
which a scoring edit changes under the same record keys.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import time

import pytest

from compbench.cli import main
from tiny_suites import kernel_suite

SWEEP = 40
# The kernel scenario, a 40-member kernel sweep on `add`, and a reference tagged `ceiling` (the scores plot shows it).
SUITE = kernel_suite("many", seeds=1).replace("expectations: []\n", "") + "\n".join([
    "  - {id: sw, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]},",
    f"     sweep: {{weights.1: {{linspace: [0.0, 0.4, {SWEEP}]}}}}, tasks: [add]}}",
    "  - {id: top, adapter: kernel, params: {kernel: relu_ntk}, tags: [ceiling]}",
]) + "\n"


def test_listing_the_plots_reads_the_models_tags_a_fixed_number_of_times(tmp_path, monkeypatch):
    load = importlib.import_module("compbench.suite.load")
    publish = importlib.import_module("compbench.report.publish")
    reads = []
    tags = load.LoadedSuite.tags.fget
    monkeypatch.setattr(load.LoadedSuite, "tags", property(lambda self: reads.append(1) or tags(self)))
    monkeypatch.setattr(publish, "_can_fork", lambda: False)  # drawn here, where the reads are counted
    path = tmp_path / "many.yaml"
    path.write_text(SUITE, encoding="utf-8")
    assert main(["run", "--suite", str(path), "--results", str(tmp_path / "R"), "--device", "cpu", "-q"]) == 0
    # Every model's tags were read once per model while listing the plots: 43 models, 44 reads and more.
    assert 0 < len(reads) <= 8, len(reads)
    manifest = (tmp_path / "R" / "plots" / "manifest.json").read_text(encoding="utf-8")
    assert '"scores"' in manifest and (tmp_path / "R" / "plots" / "scores.png").stat().st_size > 0


def _figure():
    from compbench.report.plot_style import _plt

    fig = _plt().figure(figsize=(1, 1))
    fig.text(0.5, 0.5, "x")
    return fig


@pytest.mark.skipif(not importlib.import_module("compbench.report.publish")._can_fork(), reason="needs fork and two cores")
def test_a_drawing_process_held_by_a_slow_plot_leaves_the_other_plots_to_the_other_process(tmp_path, monkeypatch):
    # Plot 0 is drawn only once plot 4 is: by position modulo two processes, plot 4 was the first process's own, after
    # plot 0, so it waited out its time and the other process sat idle (kernel-limits: one process drew nearly every grid).
    import compbench.report.plots as plots
    import compbench.runner.threads as threads

    marks = tmp_path / "marks"
    marks.mkdir()

    def draw(i):
        def figure():
            if i == 0:
                deadline = time.monotonic() + 20
                while not (marks / "4").exists() and time.monotonic() < deadline:
                    time.sleep(0.05)
            (marks / str(i)).write_text(f"{os.getpid()} {(marks / '4').exists()}", encoding="utf-8")
            return _figure()
        return figure

    monkeypatch.setattr(plots, "_figures", lambda loaded, records: iter([(f"p{i}", f"plot {i}", draw(i)) for i in range(5)]))
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    path = tmp_path / "k.yaml"
    path.write_text(kernel_suite("k", "leak"), encoding="utf-8")
    assert main(["run", "--suite", str(path), "--results", str(tmp_path / "R"), "--device", "cpu", "-q"]) == 0
    said = {i: (marks / str(i)).read_text(encoding="utf-8").split() for i in range(5)}
    assert said[0][1] == "True"  # plot 0 saw plot 4 drawn, not its deadline
    assert len({said[i][0] for i in range(1, 5)}) == 1 and said[1][0] != said[0][0]
    manifest = json.loads((tmp_path / "R" / "plots" / "manifest.json").read_text(encoding="utf-8"))
    assert [name for name, _ in manifest["plots"]] == [f"p{i}" for i in range(5)]


HOSTILE_FRAMES = [
    {"=bad": ["=1+1", "-2", "@x", None, "\rcr\r=1+1", "+"], "v": [-0.5, 1.0, -2.0, 3.0, -1e-9, float("nan")]},
    {"a,b": ['q"uote', "com,ma", "new\nline", "", "  sp", None], "n": [1, 2, 3, 4, 5, 6], "b": [True, False] * 3,
     "o": [1.5, "=x", None, 3, 0.1, True], "f": [0.1, 1e20, float("nan"), float("inf"), -0.0, 5e-324]},
    {"x": ["", None], "y": ["", ""]},
]


@pytest.mark.parametrize("columns", HOSTILE_FRAMES)
def test_csv_text_writes_the_bytes_pandas_writes_after_escaping(columns):
    import numpy as np
    import pandas as pd

    from compbench.report.escape import csv_cell, csv_text

    frame = pd.DataFrame(columns)
    frame["f32"] = np.arange(len(frame), dtype="float32") / 3
    frame["s"] = pd.array(["=s", None, *["t"] * (len(frame) - 2)], dtype="string")
    escaped = frame.rename(columns=csv_cell)
    for i in range(escaped.shape[1]):
        if escaped.iloc[:, i].dtype == object or isinstance(escaped.iloc[:, i].dtype, pd.StringDtype):
            escaped.isetitem(i, escaped.iloc[:, i].astype(object).map(csv_cell))
    assert csv_text(frame) == escaped.to_csv(index=False)


def test_the_report_csvs_are_written_a_column_at_a_time_not_by_pandas_row_writer(tmp_path, monkeypatch):
    # pandas' to_csv formats and writes 757k prediction rows one at a time: 2.7 s of predictions.csv's 4.9 s.
    import pandas as pd

    written = []
    to_csv = pd.DataFrame.to_csv
    monkeypatch.setattr(pd.DataFrame, "to_csv", lambda self, *a, **k: written.append(list(self.columns)) or to_csv(self, *a, **k))
    path = tmp_path / "k.yaml"
    path.write_text(kernel_suite("k", "leak"), encoding="utf-8")
    assert main(["run", "--suite", str(path), "--results", str(tmp_path / "R"), "--device", "cpu", "-q",
                 "--format", "csv,predictions-csv"]) == 0
    assert written == []
    rows = pd.read_csv(tmp_path / "R" / "predictions.csv")
    assert len(rows) == 2 * (16 + 81) and set(rows["model"]) == {"overlap", "relu"}  # add: 4×4 cells, te: 9×9


def test_a_scoring_edit_redraws_the_plots_that_show_scores(tmp_path, monkeypatch):
    # A scoring edit rescores the stored records (same keys, new scores); the plots' digest hashed the keys alone, so
    # the report kept plots drawn from the old scores while its tables showed the new ones.
    import compbench.report.plots as plots
    import compbench.scoring.score as score

    path = tmp_path / "k.yaml"
    path.write_text(kernel_suite("k", "leak"), encoding="utf-8")
    results = tmp_path / "R"
    assert main(["run", "--suite", str(path), "--results", str(results), "--device", "cpu", "-q"]) == 0
    before = json.loads((results / "plots" / "manifest.json").read_text(encoding="utf-8"))
    drawn = []
    draw_share = plots.draw_share
    monkeypatch.setattr(plots, "draw_share", lambda *a, **k: drawn.append(a[3]) or draw_share(*a, **k))
    monkeypatch.setattr(importlib.import_module("compbench.report.publish"), "_can_fork", lambda: False)
    monkeypatch.setattr(score, "scoring_version", lambda: "an edited scoring")
    assert main(["report", "--suite", str(path), "--results", str(results), "-q"]) == 0
    after = json.loads((results / "plots" / "manifest.json").read_text(encoding="utf-8"))
    assert after["digest"] != before["digest"] and drawn == [0]
    assert [n for n, _ in after["plots"]] == [n for n, _ in before["plots"]]


def test_a_run_that_changed_one_task_redraws_only_that_tasks_plots(tmp_path, monkeypatch):
    # Any change of any record redrew all 21 kernel-limits plots (14 s of CPU); each plot now keeps the digest of what
    # it is drawn from, and one whose inputs and files are unchanged is read back. The files are a full redraw's.
    import compbench.report.plots as plots

    drawn = []
    figures = plots._figures

    def spied(loaded, records):
        for name, caption, draw in figures(loaded, records):
            yield name, caption, _Spy(name, draw, drawn)

    monkeypatch.setattr(plots, "_figures", spied)
    monkeypatch.setattr(importlib.import_module("compbench.report.publish"), "_can_fork", lambda: False)
    path, results = tmp_path / "k.yaml", tmp_path / "R"
    path.write_text(kernel_suite("k", "leak"), encoding="utf-8")
    assert main(["run", "--suite", str(path), "--results", str(results), "--device", "cpu", "-q"]) == 0
    first = sorted(drawn)
    assert {"theory-add", "grid-add", "theory-te", "grid-te"} <= set(first)
    path.write_text(kernel_suite("k", "leak").replace("anchors: [[4], [4]]", "anchors: [[3], [3]]"), encoding="utf-8")
    drawn.clear()
    assert main(["run", "--suite", str(path), "--results", str(results), "--device", "cpu", "-q"]) == 0
    assert sorted(drawn) == sorted(n for n in first if n.endswith("-add"))
    # A report of the same store drawn whole, into a fresh folder: the same plot files, byte for byte.
    assert main(["report", "--suite", str(path), "--results", str(results), "--report-dir", str(tmp_path / "fresh"),
                 "-q"]) == 0
    for png in sorted((tmp_path / "fresh" / "plots").glob("*.[ps][nv]g")):
        assert (results / "plots" / png.name).read_bytes() == png.read_bytes(), png.name


class _Spy(functools.partial):
    """A plot's drawing (a functools.partial, which plot_inputs hashes) that records its name when called."""

    def __new__(cls, name, draw, drawn):
        self = super().__new__(cls, draw.func, *draw.args, **draw.keywords)
        self.name, self.drawn = name, drawn
        return self

    def __call__(self, *args, **kwargs):
        self.drawn.append(self.name)
        return super().__call__(*args, **kwargs)


def test_another_matplotlib_redraws_every_plot_whatever_its_inputs(tmp_path, monkeypatch):
    # A plot keeps its files when its arguments are unchanged; drawn by another matplotlib (or drawing code), they
    # are not the files this one draws, so the arguments' digest is salted with both.
    import matplotlib

    import compbench.report.plots as plots

    drawn = []
    figures = plots._figures
    monkeypatch.setattr(plots, "_figures", lambda loaded, records: (
        (name, caption, _Spy(name, draw, drawn)) for name, caption, draw in figures(loaded, records)))
    monkeypatch.setattr(importlib.import_module("compbench.report.publish"), "_can_fork", lambda: False)
    path, results = tmp_path / "k.yaml", tmp_path / "R"
    path.write_text(kernel_suite("k", "leak"), encoding="utf-8")
    assert main(["run", "--suite", str(path), "--results", str(results), "--device", "cpu", "-q"]) == 0
    first = sorted(drawn)
    drawn.clear()
    monkeypatch.setattr(matplotlib, "__version__", "0.0.1")
    (results / ".report" / "manifest.json").unlink()  # every writer runs (its digest reads the installed version)
    assert main(["report", "--suite", str(path), "--results", str(results), "-q"]) == 0
    assert sorted(drawn) == first and len(first) >= 4
