"""Plots of a suite's results (matplotlib, Agg backend), written as PNG and SVG under <out>/plots: which figures a
suite has (compbench.report.figures draws them), whether those on disk are current, and writing them.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from compbench.records import CellRecord as Record, as_records
from compbench.report.figures import (cd_blocks, factor_bars, factor_names, grid_heatmaps, similarity_scatter,
                                      split_scores, sweep_curves, theory_scatter)
from compbench.report.plot_style import SWEEP_PARAMS, _big, _ok, _plt, _small_models, model_colors

MANIFEST = "manifest.json"
# The code a plot's pixels depend on: a fixed bug in any of it redraws.
_DRAWING_CODE = ("plots.py", "figures.py", "plot_style.py", "plot_inputs.py")


@dataclass(frozen=True)
class Plot:
    """A rendered plot: file stem, caption, PNG bytes."""

    name: str
    caption: str
    png: bytes


def _figures(loaded: Any, records: list[Record]) -> Iterator[tuple[str, str, Callable[[], Any]]]:
    """(name, caption, a function drawing its Figure) for every plot of the suite: drawn only when called, so that
    processes sharing the drawing each draw their own."""
    from compbench.tasks import make_task

    colors = model_colors(_small_models(records))
    big = _big(records)
    # Records and models by task in one pass each (a pass per task cost each drawing process ~1 s on kernel-limits).
    by_task: dict[str, list[Record]] = {}
    for r in records:
        by_task.setdefault(r.task, []).append(r)
    asked_on: dict[str, list[Any]] = {}
    for m in getattr(loaded, "models", []):
        for t in dict.fromkeys(t.id for t in loaded.tasks_for(m)):
            asked_on.setdefault(t, []).append(m)
    for entry in loaded.suite.tasks:
        recs = by_task.get(entry.id, [])
        if not recs:
            continue
        stored = {r.model for r in recs}
        asked = asked_on.get(entry.id, [])
        missing = [m.id for m in asked if m.id not in stored and m.group not in big]
        data = make_task(entry.family, **entry.params)
        if any(r.theory_predictions is not None for r in _ok(recs)) or not _ok(recs):
            yield (f"theory-{entry.id}", f"{entry.id}: each model's held-out predictions against its kernel-theory prediction",
                   partial(theory_scatter, entry.id, recs, data.test_mask, colors, missing,
                           None if data.n_classes else np.asarray(data.y, dtype=float)))
        if data.n_components == 2 and (not data.vector_output or data.n_classes):
            no_sweep = [m for m in missing if not next(s for s in asked if s.id == m).sweep_values]
            yield (f"grid-{entry.id}", f"{entry.id}: truth and predictions on the conjunction grid",
                   partial(grid_heatmaps, entry.id, recs, data.cells, data.y, data.train_mask, data.component_names, no_sweep))
        factors = factor_names(recs)
        if factors:
            yield (f"factors-{entry.id}", f"{entry.id}: held-out R² per factor, each model beside its theory's",
                   partial(factor_bars, entry.id, recs, factors, colors))
        if any(r.nearest_train is not None for r in _ok(recs)):
            yield (f"similarity-{entry.id}", f"{entry.id}: each held-out cell's error against its similarity to the nearest "
                   "training sample under the model's own kernel", partial(similarity_scatter, entry.id, recs, data, colors))
    swept = [k for k in SWEEP_PARAMS if any(k in (r.sweep or {}) for r in records)]
    for param in swept:
        groups = {r.group for r in records if param in (r.sweep or {})}
        yield (f"sweep-{param}", f"held-out score and additivity against {SWEEP_PARAMS[param].split(' (')[0]}",
               partial(sweep_curves, [r for r in records if r.group in groups], param))
    from compbench.report.statistics import ceiling_models

    # ceiling_models reads every model's tags: asked once, not once per model (5,013 models: 65 s in each drawing process)
    references = ceiling_models(loaded)
    ceilings = [m for m in (getattr(loaded, "tags", None) or {}) if m in references]  # suite order
    if ceilings:
        tasks = [t.id for t in loaded.suite.tasks if any(r.task == t.id for r in records)]
        yield ("scores", "held-out score per split and model, with the theory's ceiling (models tagged `ceiling`)",
               partial(split_scores, records, tasks, ceilings))
    cd = [t.id for t in loaded.suite.tasks if t.family == "context_dependence"]
    if any(r.task in cd for r in records):
        yield ("cd-blocks", "context dependence: held-out accuracy per held-out block",
               partial(cd_blocks, [r for r in records if r.task in cd], cd))


def _digest(loaded: Any, records: list[Record]) -> str:
    """What the plots depend on: this module, matplotlib's version, the suite's tasks and the records (outputs by key,
    scores by the scoring version)."""
    records = as_records(records)
    h = hashlib.sha256(_drawing().encode())
    h.update(json.dumps([[t.id, t.family, t.params] for t in loaded.suite.tasks], sort_keys=True, default=str).encode())
    for r in records:
        # The key fixes a record's outputs, not its scores: a scoring edit rescores (same key) and the plots drawing
        # scores (sweep curves, factor bars, split scores, cd blocks) must be redrawn, so the scoring version is hashed.
        h.update(json.dumps([r.key, r.model, r.group, r.task, r.seed, r.status.value,
                             r.sweep, r.message, r.scoring], default=str).encode())
        if not r.key:  # hand-made records: hash what is drawn
            h.update(json.dumps([r.predictions, r.theory_predictions, r.nearest_train], default=str).encode())
    return h.hexdigest()


def _drawing() -> str:
    """A digest of how every plot is drawn, whatever its inputs: the drawing code and matplotlib's version."""
    import matplotlib

    h = hashlib.sha256(matplotlib.__version__.encode())
    for name in _DRAWING_CODE:
        h.update((Path(__file__).parent / name).read_bytes())
    return h.hexdigest()


@dataclass(frozen=True)
class PlotsState:
    """What the plots' manifest says before drawing: the plots still current (None: to be drawn), and the names
    of the plots it listed (removed after drawing where no longer drawn)."""

    digest: str
    current: list[Plot] | None
    stale: tuple[str, ...] = ()
    reusable: dict[str, str] = field(default_factory=dict)  # plot → its inputs' digest, where its files are intact


def plots_state(out_dir: Path | None, loaded: Any, records: list[Record], selected: frozenset[tuple[str, str]] | None = None) -> PlotsState:
    """Whether the plots under out_dir/plots are current for these records (then read back), by the manifest's digest and
    each file's sha256."""
    from compbench.files import read_contained, sha256_contained

    records = as_records(records)
    digest = _digest(loaded, records)
    if out_dir is None:
        return PlotsState(digest, None)
    try:
        manifest = json.loads(read_contained(out_dir, f"plots/{MANIFEST}") or b"null")
        listed = [(n, c) for n, c in manifest["plots"] if isinstance(n, str) and isinstance(c, str)]
        files = manifest.get("sha256", {})
        # A report of the whole suite removes what a partial one left (redrawing to get there).
        cleans = selected is None and bool(manifest.get("left"))
        if manifest.get("digest") == digest and not cleans and len(listed) == len(manifest["plots"]) and all(
                isinstance(files.get(f"{n}.{e}"), str) and sha256_contained(out_dir, f"plots/{n}.{e}") == files[f"{n}.{e}"]
                for n, _ in listed for e in ("png", "svg")):
            return PlotsState(digest, [Plot(n, c, read_contained(out_dir, f"plots/{n}.png") or b"") for n, c in listed])
        left = manifest.get("left", [])
        inputs = manifest.get("inputs", {})
        reusable = {n: inputs[n] for n, _ in listed if isinstance(inputs, dict) and isinstance(inputs.get(n), str)
                    and all(isinstance(files.get(f"{n}.{e}"), str) and _plain_name(n)
                            and sha256_contained(out_dir, f"plots/{n}.{e}") == files[f"{n}.{e}"] for e in ("png", "svg"))}
        return PlotsState(digest, None, tuple([n for n, _ in listed] + [n for n in (left if isinstance(left, list) else [])
                                                                         if isinstance(n, str)]), reusable)
    except (ValueError, KeyError, TypeError, AttributeError):  # none yet, or damaged: redrawn, nothing removed
        return PlotsState(digest, None)


def finish_plots(out_dir: Path | None, loaded: Any, state: PlotsState, drawn: list[tuple[int, Plot, dict[str, str], str | None]],
                 selected: frozenset[tuple[str, str]] | None = None) -> list[Plot]:
    """The drawn shares (`draw_share`) in the suite's order; with out_dir, the plots no longer drawn removed and the manifest written."""
    from compbench.files import OutputError, remove_contained, write_atomic

    plots: list[Plot] = []
    sha: dict[str, str] = {}
    inputs: dict[str, str] = {}
    for _, plot, files, digest in sorted(drawn, key=lambda d: d[0]):
        plots.append(plot)
        sha.update(files)
        if digest is not None:
            inputs[plot.name] = digest
    if out_dir is not None:
        left = []
        for n in sorted(set(state.stale) - {p.name for p in plots}):
            if not _plain_name(n):
                raise OutputError(f"{out_dir / 'plots' / MANIFEST}: lists {n!r}, which is not a plot of {out_dir / 'plots'}; "
                                  "nothing was deleted: the manifest was edited by hand or by a pull request — "
                                  "check it, then delete the manifest to redraw the plots")
            if not _only_selected(n, loaded, selected):
                left.append(n)  # shows a cell this (partial) report did not select: not this report's to delete
                continue
            for ext in ("png", "svg"):
                remove_contained(out_dir, f"plots/{n}.{ext}")
        doc = {"digest": state.digest, "plots": [[p.name, p.caption] for p in plots], "sha256": sha, "inputs": inputs}
        write_atomic(out_dir, f"plots/{MANIFEST}", json.dumps({**doc, "left": left} if left else doc, indent=1))
    return plots


def write_plots(out_dir: Path | None, loaded: Any, records: list[Record],
                selected: frozenset[tuple[str, str]] | None = None) -> list[Plot]:
    """Every plot of the suite; with out_dir, also written as PNG and SVG under out_dir/plots.

    Plots are redrawn only when the records, the suite's tasks or this module changed, or a plot
    file is no longer what was written (plots/manifest.json holds each file's sha256); then only
    the plots whose own inputs changed (the manifest's `inputs`, `plot_inputs`) are drawn again; files of
    plots that no longer exist are removed. The manifest arrives with published results, so it is
    not trusted to name files: an entry that is not a plot of plots/ is an error, never deleted.
    `selected` (a partial run's (model, task) pairs): a plot no longer drawn is removed only when
    every cell it shows is selected; the others are kept, and listed as `left` in the manifest so
    that a later report of the whole suite removes them. (The report draws in several processes:
    `plots_state`, `draw_share` in each, `finish_plots`; this is the same in one.)
    """
    records = as_records(records)
    state = plots_state(out_dir, loaded, records, selected)
    if state.current is not None:
        return state.current
    return finish_plots(out_dir, loaded, state, draw_share(out_dir, loaded, records, 0, 1, reusable=state.reusable), selected)


# The plots `_figures` draws of one task; every other plot (scores, sweep-*, cd-blocks) shows several tasks.
TASK_PLOTS = ("theory", "grid", "factors", "similarity")



def draw_share(out_dir: Path | None, loaded: Any, records: list[Record], shard: int, shards: int,
               counter: Any = None, reusable: dict[str, str] | None = None) -> list[tuple[int, Plot, dict[str, str], str | None]]:
    """The plots whose position among those to draw is `shard` modulo `shards`, drawn (and with out_dir written):
    (position, plot, sha256 of each file written, digest of its inputs). Each process sharing the drawing draws one share.

    `counter`: the next position no process has taken yet (a multiprocessing.Value the processes share); with it, this
    process draws the plots it claims until none is left, whatever `shard` is. A grid takes about four times a
    scatter's time and the suite lists them in turn, so a fixed share by position gave one of two processes nearly
    every grid. `reusable` (`PlotsState.reusable`): plots on disk, intact, with the digest of the inputs they were
    drawn from; one whose inputs are unchanged is read back (by shard 0), not drawn.
    """
    from compbench.files import read_contained, write_atomic
    from compbench.report.plot_inputs import plot_inputs

    plt = _plt()
    drawn: list[tuple[int, Plot, dict[str, str], str | None]] = []
    figures = list(_figures(loaded, records))
    memo: dict[int, bytes] = {}
    inputs: dict[int, str | None] = {}
    drawing = _drawing()  # a plot drawn by other code or another matplotlib is drawn again, whatever its arguments

    def digest(i: int) -> str | None:  # computed for the plots this process draws, and those it may reuse
        if i not in inputs:
            inputs[i] = plot_inputs(figures[i][2], memo, drawing) if out_dir is not None else None
        return inputs[i]

    reusable = reusable or {}
    kept = {i for i, (name, _, _) in enumerate(figures) if name in reusable and digest(i) == reusable[name]}
    todo = [i for i in range(len(figures)) if i not in kept]
    if shard == 0 and out_dir is not None:
        for i in sorted(kept):
            name, caption = figures[i][:2]
            files = {f"{name}.{e}": hashlib.sha256(read_contained(out_dir, f"plots/{name}.{e}") or b"").hexdigest()
                     for e in ("png", "svg")}
            drawn.append((i, Plot(name, caption, read_contained(out_dir, f"plots/{name}.png") or b""), files, digest(i)))
    claims = iter(partial(_claim, counter), None) if counter is not None else iter(range(shard, len(todo), shards))
    for k in claims:
        if k >= len(todo):
            break
        i = todo[k]
        name, caption, draw = figures[i]
        fig = draw()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
        sha: dict[str, str] = {}
        if out_dir is not None:
            # The layout the PNG's draw settled is kept for the SVG: constrained layout measured every label again
            # (a third of the report's drawing time on kernel-limits), for positions it had just computed.
            fig.set_layout_engine("none")
            svg = io.BytesIO()
            fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
            for ext, data in (("png", buf.getvalue()), ("svg", svg.getvalue())):
                write_atomic(out_dir, f"plots/{name}.{ext}", data)
                sha[f"{name}.{ext}"] = hashlib.sha256(data).hexdigest()
        plt.close(fig)
        drawn.append((i, Plot(name, caption, buf.getvalue()), sha, digest(i)))
    return drawn


def _claim(counter: Any) -> int:
    """The next position of a shared counter (multiprocessing.Value), taken by this process."""
    with counter.get_lock():
        position = int(counter.value)
        counter.value = position + 1
    return position


def _only_selected(name: str, loaded: Any, selected: frozenset[tuple[str, str]] | None) -> bool:
    """Whether every cell plot `name` shows is among `selected` (None: the whole suite is)."""
    if selected is None:
        return True
    for entry in loaded.suite.tasks:
        if name in {f"{kind}-{entry.id}" for kind in TASK_PLOTS}:
            return all((m.id, entry.id) in selected for m in loaded.models if entry.id in {t.id for t in loaded.tasks_for(m)})
    return False  # a plot of several tasks, or of a task the suite no longer has: a whole report's to remove


def _plain_name(name: str) -> bool:
    """A plot's file stem as `_figures` makes them: one name, no folder, not hidden."""
    return bool(name) and name not in (".", "..") and not name.startswith(".") and "/" not in name \
        and "\\" not in name and "\x00" not in name
