"""Plots of a suite's results (matplotlib, Agg backend), written as PNG and SVG under <out>/plots.

- theory-<task>: each model's held-out predictions against its own kernel-theory prediction (y = x:
  the theory holds); big sweeps are summarised in the legend, not drawn point by point.
- grid-<task>: for 2-component tasks, the conjunction grid: the truth, and each (non-sweep) model's
  held-out predictions for its first seed, training cells greyed and outlined.
- sweep-<param>: held-out score (with the kernel theory's) and additivity against a swept parameter
  (init scale σ, width).
- cd-blocks: context dependence: held-out accuracy per held-out block, per model; big kernel sweeps
  as the share of kernels with perfect held-out accuracy.
- similarity-<task>: tasks whose outputs are named factors: each held-out cell's error against its
  similarity to the nearest training sample under each model's own kernel.

Every plotting function returns its matplotlib Figure (for tests); `write_plots` saves them.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from compbench.records import big_groups  # noqa: E402 — big sweeps are aggregated, never drawn member by member
SWEEP_PARAMS = {
    "init_scale": "init scale σ (log scale; small = rich, 1 = lazy)",
    "width": "hidden width H (log scale)",
    "lr": "learning rate (log scale)",
}
MARKERS = "os^DvP*Xph<>"
MANIFEST = "manifest.json"

from compbench.records import CellRecord as Record, as_records  # noqa: E402
from compbench.scoring.metric_facts import per_factor_groups  # noqa: E402


def _plt():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "compbench"  # stable SVG ids: re-running gives identical files
    return plt


def _ok(records: list[Record]) -> list[Record]:
    return [r for r in records if r.ok]


def _members(records: list[Record]) -> dict[str, list[str]]:
    members: dict[str, dict[str, None]] = defaultdict(dict)
    for r in records:
        if not r.skipped:
            members[r.group][r.model] = None
    return {g: list(m) for g, m in members.items()}


def _big(records: list[Record]) -> set[str]:
    return big_groups(records)


def _small_models(records: list[Record], include_sweeps: bool = True) -> list[str]:
    """Models drawn one by one: not members of a big sweep (and, optionally, not sweep members at all)."""
    big = _big(records)
    return list(dict.fromkeys(
        r.model for r in records if r.group not in big and (include_sweeps or not r.sweep)
    ))


def model_colors(models: Sequence[str]) -> dict[str, Any]:
    """One colour per model, the same in every plot of a report."""
    plt = _plt()
    cmap = plt.get_cmap("tab10" if len(models) <= 10 else "tab20")
    return {m: cmap(i % cmap.N) for i, m in enumerate(models)}


def _failure_label(model: str, recs: list[Record]) -> str | None:
    """'model: error (…)' when the model has no scored record here, else None."""
    if any(r.ok for r in recs):
        return None
    statuses = {r.status.value for r in recs}
    if "error" in statuses:
        msg = next(str(r.message) for r in recs if r.failed)
        return f"{model}: error ({_short(msg, 40)})"
    return f"{model}: skipped (invalid model)"


def _short(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def _kind(records: list[Record]) -> str:
    return "classification" if any(r.kind in ("classification", "multiclass") for r in _ok(records)) else "regression"


def _note_handle(label: str):  # type: ignore[no-untyped-def]
    from matplotlib.lines import Line2D

    return Line2D([], [], linestyle="none", marker="", label=label)


MAX_SCATTER_POINTS = 5000  # per model; more makes multi-megabyte SVGs without showing more
# Axis limits of the model-vs-theory scatter are robust: the 2nd to 98th percentile of the points, widened to the
# truth's range (and, for the model axis, the theory axis's), but never beyond that range plus REACH times its span
# on either side. A point beyond is drawn at the edge (a triangle pointing its way) and counted in the legend, so a
# few huge predictions (a lazy network's ±10 on ±1 targets) cannot squash the rest of the plot into a line.
CLIP_QUANTILE = 0.02
REACH = 1.0
# Where the theory predicts 0 for several models (kernels on held-out transitive-equivalence pairs), their points
# would stack on one vertical line: each model gets its own column inside a shaded band around 0 (DODGE of the axis).
DODGE = 0.3
EDGE_MARKERS = {(0, 1): "^", (0, -1): "v", (1, 0): ">", (-1, 0): "<"}


@dataclass(frozen=True)
class Limits:
    """One axis's view (lo, hi), padded; a point beyond it is drawn in the padding, at the edge."""

    lo: float
    hi: float
    margin: float  # the padding on each side: where points beyond the view are drawn

    def clip(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(values moved into the edge margin where beyond the view, −1/0/+1: which side each was beyond)."""
        side = np.where(v > self.hi, 1, np.where(v < self.lo, -1, 0))
        inset = 0.4 * self.margin
        return np.clip(v, self.lo + inset, self.hi - inset), side


def robust_limits(values: np.ndarray, keep: tuple[float, float] | None = None, q: float = CLIP_QUANTILE,
                  reach: float = REACH) -> Limits:
    """Axis limits for `values`: the q..1−q quantile range, widened to `keep` and capped at `keep` ± reach × its span.

    Padded by 6% of the span on each side (0.25 when the span is under 0.2). Deterministic.
    """
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        lo, hi = keep if keep is not None else (-1.0, 1.0)
    else:
        lo, hi = (float(x) for x in np.quantile(v, [q, 1 - q]))
    if keep is not None:
        k0, k1 = keep
        lo, hi = min(lo, k0), max(hi, k1)
        span = k1 - k0
        if span > 0:
            lo, hi = max(lo, k0 - reach * span), min(hi, k1 + reach * span)
    pad = 0.06 * (hi - lo) if hi - lo > 0.2 else 0.25
    return Limits(lo - pad, hi + pad, pad)


def _span(*ranges: tuple[float, float] | None) -> tuple[float, float] | None:
    got = [r for r in ranges if r is not None]
    return (min(r[0] for r in got), max(r[1] for r in got)) if got else None


def _range(v: np.ndarray | None) -> tuple[float, float] | None:
    if v is None:
        return None
    v = np.asarray(v, dtype=float)
    v = v[np.isfinite(v)]
    return (float(v.min()), float(v.max())) if v.size else None


def theory_scatter(  # type: ignore[no-untyped-def]
    task: str, records: list[Record], test_mask: np.ndarray, colors: dict[str, Any] | None = None, missing: Sequence[str] = (),
    truth: np.ndarray | None = None,
):
    """Each model's held-out prediction against its own kernel-theory prediction, all seeds (y = x: theory holds).

    `missing`: models the suite runs on this task that have no stored record; listed in the legend.
    `truth`: the task's targets (every cell), whose held-out range both axes always show.
    Axis limits are robust (`robust_limits`): a point beyond them is drawn at the edge as a triangle and
    counted in its model's legend entry and in a note. Where several models' theory is 0, each model's
    points there get a column of their own in a shaded band around 0 (said in the legend).
    """
    records = as_records(records)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.6, 4.8), layout="constrained")
    colors = colors or model_colors(_small_models(records))
    handles: list[Any] = []
    models = _small_models(records)
    # Kernel machines sit exactly on y = x: draw them last, hollow, so the networks beneath stay visible.
    models.sort(key=lambda m: any(r.adapter == "kernel" for r in records if r.model == m))
    drawn: list[tuple[int, str, np.ndarray, np.ndarray, bool, str]] = []  # (index, model, theory, prediction, kernel, label)
    entries: list[tuple[str, Any]] = []  # legend in model order: ("model", index in drawn) or ("note", handle)
    for i, model in enumerate(models):
        recs = [r for r in records if r.model == model]
        failed = _failure_label(model, recs)
        ok = [r for r in _ok(recs) if r.theory_predictions is not None]
        if failed or not ok:
            entries.append(("note", _note_handle(failed or f"{model}: no theory prediction")))
            continue
        # vector outputs: every (cell, output) is a point
        th = np.concatenate([np.asarray(r.theory_predictions, dtype=float)[test_mask].ravel() for r in ok])
        pr = np.concatenate([np.asarray(r.predictions, dtype=float)[test_mask].ravel() for r in ok])
        kernel = all(r.adapter == "kernel" for r in ok)
        r2 = np.mean([r.metrics["theory_r2"] for r in ok if r.metric("theory_r2") is not None] or [math.nan])
        n_err = sum(r.failed for r in recs)
        label = f"{model} (R² {r2:.3f}" + (f", {n_err} seed(s) failed" if n_err else "")
        if len(th) > MAX_SCATTER_POINTS:  # e.g. 256-pixel outputs: an evenly spaced subset keeps the file small
            stride = math.ceil(len(th) / MAX_SCATTER_POINTS)
            th, pr = th[::stride], pr[::stride]
            label += f", every {stride}th point"
        finite = np.isfinite(th) & np.isfinite(pr)
        entries.append(("model", len(drawn)))
        drawn.append((i, model, th[finite], pr[finite], kernel, label))
    big = _big(records)
    notes = []
    for group in dict.fromkeys(r.group for r in records if r.group in big):
        ok = [r for r in _ok(records) if r.group == group]
        worst = min((r.metrics["theory_r2"] for r in ok if r.metric("theory_r2") is not None), default=math.nan)
        n = len({r.model for r in ok})
        notes.append(_note_handle(f"{group}: {n}-model sweep not drawn (worst R² {worst:.3f})"))
    notes += [_note_handle(f"{m}: missing (no stored result)") for m in missing]
    if any(len(d[2]) for d in drawn):
        xs, ys = np.concatenate([d[2] for d in drawn]), np.concatenate([d[3] for d in drawn])
        held = _range(np.asarray(truth)[test_mask].ravel() if truth is not None else None)
        xl = robust_limits(xs, held)
        yl = robust_limits(ys, _span(held, (xl.lo + xl.margin, xl.hi - xl.margin)))
        # Models whose theory is 0 at some point: one column each, in a band around 0.
        scale = max(1.0, float(np.max(np.abs(xs))))
        at_zero = [k for k, d in enumerate(drawn) if np.any(np.abs(d[2]) <= 1e-9 * scale)]
        step = DODGE * (xl.hi - xl.lo) / max(len(at_zero), 1) if len(at_zero) > 1 else 0.0
        offsets = {k: (n - (len(at_zero) - 1) / 2) * step for n, k in enumerate(at_zero)}
        n_clipped = 0
        model_handles: list[Any] = []
        for i, model, th, pr, kernel, label in drawn:
            k = len(model_handles)
            shift = np.where(np.abs(th) <= 1e-9 * scale, offsets.get(k, 0.0), 0.0)
            x, sx = xl.clip(th + shift)
            y, sy = yl.clip(pr)
            out = (sx != 0) | (sy != 0)
            n_clipped += int(out.sum())
            color = (colors or {}).get(model, f"C{i % 10}")
            text = label + (f", {int(out.sum())} beyond the axes)" if out.any() else ")")
            h = ax.scatter(x[~out], y[~out], s=40 if kernel else 16, marker=MARKERS[i % len(MARKERS)], label=text,
                           facecolors="none" if kernel else color, edgecolors=color, linewidths=1.2 if kernel else 0.4,
                           alpha=0.9 if kernel else 0.55, zorder=3 if kernel else 2)
            for (ax_side, ay_side), marker in EDGE_MARKERS.items():
                # y beyond wins the marker (a point beyond both is drawn in the corner, pointing up or down)
                pick = out & ((sy == ay_side) if ay_side else ((sy == 0) & (sx == ax_side)))
                if pick.any():
                    ax.scatter(x[pick], y[pick], s=30, marker=marker, color=color, edgecolors="black", linewidths=0.5,
                               zorder=4, clip_on=False)
            model_handles.append(h)
        handles = [model_handles[ref] if kind == "model" else ref for kind, ref in entries] + notes
        lim = (min(xl.lo, yl.lo), max(xl.hi, yl.hi))
        handles.append(ax.plot(lim, lim, "k--", lw=1, label="y = x (model = theory)", zorder=1)[0])
        if step:
            half = step * len(at_zero) / 2
            ax.axvspan(-half, half, color="0.93", zorder=0)
            from matplotlib.patches import Patch

            handles.append(Patch(color="0.93", label=f"theory = 0 for {len(at_zero)} models: one column each "
                                                     "(x spread, not theory)"))
        if n_clipped:
            handles.append(_note_handle(f"▲▼◀▶ at the edge: {n_clipped} of {len(xs)} points beyond the axes"))
        ax.set_xlim(xl.lo, xl.hi)
        ax.set_ylim(yl.lo, yl.hi)
        if _kind(records) == "classification":
            ax.axhline(0, color="0.8", lw=0.8, zorder=0)
            ax.axvline(0, color="0.8", lw=0.8, zorder=0)
    else:
        handles = [ref if kind == "note" else _note_handle(f"{drawn[ref][1]}: no finite prediction") for kind, ref in entries]
        handles += notes
        ax.text(0.5, 0.5, "no scored model on this task", ha="center", va="center", transform=ax.transAxes)
    ax.set_xlabel("kernel-theory prediction (held-out cells)")
    ax.set_ylabel("model prediction (held-out cells)")
    ax.set_title(f"{task}: each model vs its own kernel-theory prediction\n(held-out cells, every seed; "
                 "R² = agreement with the theory)", fontsize=10)
    ax.legend(handles=handles, fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False)
    return fig


def grid_heatmaps(  # type: ignore[no-untyped-def]
    task: str,
    records: list[Record],
    cells: np.ndarray,
    y: np.ndarray,
    train_mask: np.ndarray,
    component_names: Sequence[str] = ("component 1", "component 2"),
    missing: Sequence[str] = (),
):
    """The conjunction grid: truth, and each non-sweep model's predictions (its first seed) on held-out cells.

    `missing`: models the suite runs on this task that have no stored record; shown as such.
    """
    records = as_records(records)
    plt = _plt()
    from matplotlib.patches import Rectangle

    models = _small_models(records, include_sweeps=False)
    n0, n1 = int(cells[:, 0].max()) + 1, int(cells[:, 1].max()) + 1
    panels: list[tuple[str, np.ndarray | None, str]] = [("truth", np.asarray(y, dtype=float), "")]
    for m in models:
        recs = [r for r in records if r.model == m]
        ok = _ok(recs)
        if ok:
            first = min(ok, key=lambda r: r.seed)
            shown = np.asarray(first.predictions, dtype=float)
            if shown.ndim == 2:  # multi-class: the predicted class, on the truth's scale
                shown = np.argmax(shown, axis=1).astype(float)
            panels.append((f"{m} (seed {first.seed})", shown, ""))
        else:
            panels.append((m, None, _failure_label(m, recs) or "no result"))
    panels += [(m, None, f"{m}: missing (no stored result)") for m in missing]
    ncols = min(len(panels), 3)
    nrows = math.ceil(len(panels) / ncols)
    side = min(3.0, max(2.2, 0.32 * max(n0, n1)))
    fig, axes = plt.subplots(nrows, ncols, figsize=(side * ncols + 1.4, side * nrows + 1.0), squeeze=False, layout="constrained")
    vmax = float(np.nanmax(np.abs(y))) or 1.0
    cmap = plt.get_cmap("RdBu_r").with_extremes(bad="white")  # white: conjunctions that are not part of the task
    annotate = n0 <= 7 and n1 <= 7
    extend = "neither"
    im = None
    for k, ax in enumerate(axes.flat):
        if k >= len(panels):
            ax.set_visible(False)
            continue
        name, values, failure = panels[k]
        ax.set_title(name, fontsize=9)
        if values is None:
            ax.text(0.5, 0.5, failure.replace(": ", ":\n", 1), ha="center", va="center", fontsize=8, color="darkred",
                    transform=ax.transAxes, wrap=True)
            ax.set_xticks([])
            ax.set_yticks([])
            continue
        grid = np.full((n0, n1), np.nan)
        grid[cells[:, 0], cells[:, 1]] = values
        if name != "truth" and np.nanmax(np.abs(values[~train_mask]), initial=0) > vmax:
            extend = "both"
        im = ax.imshow(grid, cmap=cmap, vmin=-vmax, vmax=vmax, origin="upper")
        for (a, b), tr, v in zip(cells, train_mask, values):
            if tr:  # training cells: outlined; greyed in the model panels (only held-out cells are predictions)
                ax.add_patch(Rectangle((b - 0.5, a - 0.5), 1, 1, facecolor="0.85" if name != "truth" else "none",
                                       edgecolor="black", lw=1.2))
            elif annotate and math.isfinite(v):
                ax.text(b, a, f"{v:.2f}" if name != "truth" else f"{v:g}", ha="center", va="center", fontsize=6.5,
                        color="white" if abs(v) > 0.6 * vmax else "black")
        step = 1 if max(n0, n1) <= 10 else 2
        ax.set_xticks(range(0, n1, step))
        ax.set_yticks(range(0, n0, step))
        ax.set_xlabel(component_names[1] if len(component_names) > 1 else "component 2")
        ax.set_ylabel(component_names[0] if component_names else "component 1")
    if im is not None:
        fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, extend=extend, label="truth / model prediction")
    fig.suptitle(f"{task}: truth and predictions on the conjunction grid\n(grey, outlined: training cells; "
                 "coloured: held-out cells)", fontsize=10)
    return fig


def sweep_curves(records: list[Record], param: str):  # type: ignore[no-untyped-def]
    """Held-out score (and the kernel theory's) and additivity against a swept parameter, mean ± std over seeds."""
    records = as_records(records)
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
    by: dict[tuple[str, str], dict[float, list[Record]]] = defaultdict(lambda: defaultdict(list))
    for r in records:
        if param in (r.sweep or {}) and not r.skipped:
            by[(r.group, r.task)][float(r.sweep[param])].append(r)
    failed_x: list[float] = []
    handles = []
    for i, ((group, task), points) in enumerate(sorted(by.items())):
        color = f"C{i % 10}"
        xs = [x for x in sorted(points) if _ok(points[x])]
        failed_x += [x for x in points if not _ok(points[x])]
        if not xs:
            continue
        score = "heldout_acc" if "heldout_acc" in _ok(points[xs[0]])[0] else "heldout_r2"
        theory = "theory_acc" if score == "heldout_acc" else "theory_heldout_r2"
        for ax, metric in ((ax1, score), (ax2, "additivity")):
            vals = [[r.metrics[metric] for r in _ok(points[x]) if r.metric(metric) is not None] for x in xs]
            h = ax.errorbar(xs, [np.mean(v) for v in vals], yerr=[np.std(v) for v in vals], marker="o", ms=4, capsize=2,
                            color=color, label=f"{group} on {task}")
        handles.append(h)
        th = [[r.metrics[theory] for r in _ok(points[x]) if r.metric(theory) is not None] for x in xs]
        if all(th):
            handles += ax1.plot(xs, [np.mean(v) for v in th], ls="--", color=color, alpha=0.8,
                                label=f"{group} on {task}: its kernel theory")
    for ax in (ax1, ax2):
        if failed_x:  # marked at the bottom of both panels
            failed = ax.plot(failed_x, [0.02] * len(failed_x), "x", color="darkred", ms=8,
                             transform=ax.get_xaxis_transform(), label="every seed failed")
        if param in SWEEP_PARAMS:
            ax.set_xscale("log")
        ax.set_xlabel(SWEEP_PARAMS.get(param, param))
        ax.grid(alpha=0.3)
    ax1.set_ylabel("held-out score (accuracy; R² for regression)")
    ax2.set_ylabel("held-out additivity R²")
    name = SWEEP_PARAMS.get(param, param).split(" (")[0]
    ax1.set_title(f"held-out score vs {name}", fontsize=10)
    ax2.set_title(f"conjunction-wise additivity vs {name}\n(1 = only adds up seen conjunctions)", fontsize=10)
    if failed_x:
        handles += failed
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 3), fontsize=8, frameon=False)
    else:
        ax1.text(0.5, 0.5, "no scored sweep member", ha="center", va="center", transform=ax1.transAxes)
    return fig


def cd_blocks(records: list[Record], tasks: list[str]):  # type: ignore[no-untyped-def]
    """Context dependence: held-out accuracy per held-out block, per model; big sweeps: share of perfect kernels."""
    records = as_records(records)
    plt = _plt()
    big = _big(records)
    members = _members(records)
    small = _small_models(records)
    groups = list(dict.fromkeys(r.group for r in records if r.group in big))
    n_test = {t: next((r.n_test for r in records if r.task == t and r.n_test is not None), None) for t in tasks}
    labels = {t: f"{t} ({n_test[t]} held-out cells)" if n_test[t] else t for t in tasks}
    panels = [p for p in (("models", small), ("sweeps", groups)) if p[1]]
    widths = [max(len(rows), 1.5) for _, rows in panels] or [1]
    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(2.2 + 1.15 * sum(widths), 4.6), squeeze=False,
                             gridspec_kw={"width_ratios": widths}, layout="constrained")
    width = 0.8 / max(len(tasks), 1)
    for ax, (what, rows) in zip(axes[0], panels):
        x = np.arange(len(rows))
        for j, task in enumerate(tasks):
            offs = x + (j - (len(tasks) - 1) / 2) * width
            for k, row in enumerate(rows):
                recs = [r for r in records if r.task == task and (r.group == row if what == "sweeps" else r.model == row)]
                if not recs:
                    continue  # the suite does not run this model on this task
                ok = _ok(recs)
                if not ok:
                    ax.text(offs[k], 0.02, "error" if any(r.failed for r in recs) else "skipped",
                            rotation=90, ha="center", va="bottom", fontsize=7, color="darkred")
                    continue
                if what == "sweeps":
                    per: dict[str, list[float]] = defaultdict(list)
                    for r in ok:
                        per[r.model].append(r.metrics["heldout_acc"])
                    perfect = sum(np.mean(v) >= 1 - 1e-9 for v in per.values())
                    ax.bar(offs[k], perfect / len(per), width, color=f"C{j}")
                    ax.text(offs[k], perfect / len(per) + 0.01, f"{perfect}", rotation=90, ha="center", va="bottom", fontsize=7)
                else:
                    accs = [r.metrics["heldout_acc"] for r in ok]
                    ax.bar(offs[k], np.mean(accs), width, yerr=np.std(accs) if len(accs) > 1 else None, capsize=2,
                           color=f"C{j}", error_kw={"lw": 0.8})
                    if len(ok) < len(recs):
                        ax.text(offs[k], 0.02, f"{len(recs) - len(ok)} err", rotation=90, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(x)
        if what == "sweeps":
            ax.set_xticklabels([f"{g}\n({len(members[g])} valid kernels)" for g in rows], fontsize=8)
            ax.set_ylabel("share of kernels with 100% held-out accuracy\n(number above each bar)")
            ax.set_xlabel("kernel sweep")
            ax.set_title("kernel sweeps", fontsize=10)
        else:
            ax.set_xticklabels(rows, rotation=25, ha="right", fontsize=8)
            ax.set_ylabel("held-out accuracy (mean ± std over seeds)")
            ax.set_xlabel("model")
            ax.set_title("models", fontsize=10)
        ax.set_ylim(0, 1.12)
        ax.grid(axis="y", alpha=0.3)
    if not panels:
        axes[0][0].text(0.5, 0.5, "no context-dependence results", ha="center", va="center")
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(color=f"C{j}", label=labels[t]) for j, t in enumerate(tasks)], loc="outside lower center",
               ncols=len(tasks), fontsize=8, frameon=False)
    fig.suptitle("Context dependence: held-out accuracy per held-out block\n(bigger blocks invite the context shortcut)",
                 fontsize=10)
    return fig


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
    for entry in loaded.suite.tasks:
        recs = [r for r in records if r.task == entry.id]
        if not recs:
            continue
        stored = {r.model for r in recs}
        asked = [m for m in getattr(loaded, "models", []) if any(t.id == entry.id for t in loaded.tasks_for(m))]
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
    from compbench.report.tables import ceiling_models

    ceilings = [m for m in (getattr(loaded, "tags", None) or {}) if m in ceiling_models(loaded)]  # suite order
    if ceilings:
        tasks = [t.id for t in loaded.suite.tasks if any(r.task == t.id for r in records)]
        yield ("scores", "held-out score per split and model, with the theory's ceiling (models tagged `ceiling`)",
               partial(split_scores, records, tasks, ceilings))
    cd = [t.id for t in loaded.suite.tasks if t.family == "context_dependence"]
    if any(r.task in cd for r in records):
        yield ("cd-blocks", "context dependence: held-out accuracy per held-out block",
               partial(cd_blocks, [r for r in records if r.task in cd], cd))


FACTOR_FLOOR = -1.0  # bars below this R² are cut at it (and say so): one very negative factor would hide the rest


def factor_names(records: list[Record]) -> list[str]:
    """The factors a multi-factor task scores per factor (`factor_r2.<factor>` metrics), in the records' order."""
    names = per_factor_groups(k for r in _ok(records) for k in r.metrics).get("factor_r2", [])
    return [n.partition(".")[2] for n in names]


def factor_bars(task: str, records: list[Record], factors: Sequence[str], colors: dict[str, Any]):  # type: ignore[no-untyped-def]
    """Held-out R² per factor (`factor_r2.<f>`), one group of bars per factor: each model (mean ± std over
    seeds, solid) beside its theory's (`theory_factor_r2.<f>`, hatched). Bars below FACTOR_FLOOR end at it,
    marked with their value."""
    records = as_records(records)
    plt = _plt()
    ok = _ok(records)
    models = list(dict.fromkeys(r.model for r in ok))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(factors) * max(1, len(models)) / 2 + 2.5), 4.4), layout="constrained")
    slots = 2 * max(1, len(models))
    width = 0.84 / slots
    for j, model in enumerate(models):
        mine = [r for r in ok if r.model == model]
        for k, (prefix, hatch, alpha) in enumerate((("factor_r2", None, 1.0), ("theory_factor_r2", "//", 0.45))):
            means, stds = [], []
            for f in factors:
                vals = [v for r in mine if (v := r.metric(f"{prefix}.{f}")) is not None and math.isfinite(v)]
                means.append(float(np.mean(vals)) if vals else math.nan)
                stds.append(float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0)
            xs = np.arange(len(factors)) - 0.42 + width * (2 * j + k + 0.5)
            shown = [max(m, FACTOR_FLOOR) if math.isfinite(m) else math.nan for m in means]
            ax.bar(xs, shown, width * 0.92, yerr=[s if m > FACTOR_FLOOR else 0 for s, m in zip(stds, means)], capsize=1.5,
                   color=colors.get(model, f"C{j % 10}"), alpha=alpha, hatch=hatch, edgecolor=colors.get(model, f"C{j % 10}"),
                   label=model if k == 0 else f"{model}: its theory")
            for x, m in zip(xs, means):
                if math.isfinite(m) and m < FACTOR_FLOOR:
                    ax.annotate(f"{m:.2f}", (x, FACTOR_FLOOR), textcoords="offset points", xytext=(0, 2), ha="center",
                                fontsize=6, rotation=90, va="bottom")
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xticks(range(len(factors)), list(factors))
    ax.set_ylabel("held-out R² (against the factor's variance over the grid)")
    ax.set_ylim(FACTOR_FLOOR - 0.05, 1.05)
    ax.set_title(f"{task}: held-out R² per factor; hatched: the model's kernel theory", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False)
    return fig


def cell_errors(record: Record, data: Any) -> np.ndarray:
    """Each cell's squared error of the record's prediction, averaged over the task's ordinal (regressed) factors."""
    names = data.output_names or tuple(str(k) for k in range(np.shape(data.y)[1] if np.ndim(data.y) == 2 else 1))
    cols = [k for k, name in enumerate(names) if "=" not in name]
    preds = np.asarray(record.predictions, dtype=float).reshape(len(data.cells), -1)[:, cols]
    truth = np.asarray(data.y, dtype=float).reshape(len(data.cells), -1)[:, cols]
    return np.mean((preds - truth) ** 2, axis=1)


def similarity_scatter(task: str, records: list[Record], data: Any, colors: dict[str, Any]):  # type: ignore[no-untyped-def]
    """One panel per model with a kernel: each held-out cell's error (`cell_errors`, every seed) against its similarity to
    the nearest training sample under that model's own kernel (`CellRecord.nearest_train`): error falling with
    similarity is interpolation between near-duplicates, a flat cloud composition or its failure."""
    records = as_records(records)
    plt = _plt()
    ok = [r for r in _ok(records) if r.nearest_train is not None and r.predictions is not None]
    models = list(dict.fromkeys(r.model for r in ok))
    ncols = min(3, max(1, len(models)))
    nrows = math.ceil(max(1, len(models)) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols + 0.6, 3.0 * nrows + 0.6), squeeze=False, layout="constrained",
                             sharey=True)
    for k, ax in enumerate(axes.flat):
        if k >= len(models):
            ax.set_visible(False)
            continue
        model = models[k]
        xs, ys = [], []
        for r in (r for r in ok if r.model == model):
            err = cell_errors(r, data)
            pairs = [(s, e) for s, e in zip(r.nearest_train or (), err) if s is not None and math.isfinite(e)]
            xs += [s for s, _ in pairs]
            ys += [e for _, e in pairs]
        ax.scatter(xs, ys, s=9, alpha=0.6, color=colors.get(model, f"C{k % 10}"), edgecolors="none")
        r_xy = float(np.corrcoef(xs, ys)[0, 1]) if len(xs) > 2 and np.std(xs) > 0 and np.std(ys) > 0 else math.nan
        ax.set_title(f"{model}" + ("" if math.isnan(r_xy) else f" (r = {r_xy:.2f})"), fontsize=9)
        ax.set_xlabel("similarity to the nearest training sample", fontsize=8)
        if k % ncols == 0:
            ax.set_ylabel("held-out squared error (mean over factors)", fontsize=8)
    fig.suptitle(f"{task}: held-out error against nearest-training similarity under each model's own kernel", fontsize=10)
    return fig


def split_scores(records: list[Record], tasks: Sequence[str], ceilings: Sequence[str]):  # type: ignore[no-untyped-def]
    """Held-out score per task (split) and model: networks as bars (mean ± std over seeds), `ceilings` as lines.

    A ceiling is a model tagged `ceiling` (e.g. `additive_projection`: the best module-additive fit of the
    teacher, which bounds a kernel model on held-out combinations), drawn across each task's group of bars.
    """
    records = as_records(records)
    plt = _plt()
    ok = _ok(records)
    metric = "heldout_acc" if _kind(records) == "classification" else "heldout_r2"
    models = [m for m in dict.fromkeys(r.model for r in ok) if m not in ceilings]
    colors = model_colors(list(dict.fromkeys(r.model for r in ok)))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(tasks) + 2.5), 4.4), layout="constrained")
    width = 0.8 / max(1, len(models))
    for j, model in enumerate(models):
        means, stds = [], []
        for task in tasks:
            vals = [r.metrics[metric] for r in ok if r.model == model and r.task == task and r.metric(metric) is not None]
            means.append(float(np.mean(vals)) if vals else math.nan)
            stds.append(float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0)
        xs = np.arange(len(tasks)) - 0.4 + width * (j + 0.5)
        ax.bar(xs, means, width * 0.9, yerr=stds, capsize=2, color=colors.get(model, f"C{j % 10}"), label=model)
    for k, ceiling in enumerate(ceilings):
        for i, task in enumerate(tasks):
            vals = [r.metrics[metric] for r in ok if r.model == ceiling and r.task == task and r.metric(metric) is not None]
            if vals:
                ax.hlines(float(np.mean(vals)), i - 0.45, i + 0.45, colors="black", linestyles=("--", ":")[k % 2], lw=1.6,
                          label=f"{ceiling} (ceiling)" if i == 0 else None, zorder=4)
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set_ylabel("held-out accuracy" if metric == "heldout_acc" else "held-out R²")
    ax.set_ylim(bottom=max(-1.0, min(0.0, ax.get_ylim()[0])))
    ax.set_title("held-out score per split; dashed: the theory's ceiling", fontsize=10)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False)
    return fig


def _digest(loaded: Any, records: list[Record]) -> str:
    """What the plots depend on: this module, matplotlib's version, the suite's tasks and the records."""
    records = as_records(records)
    import matplotlib

    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(matplotlib.__version__.encode())
    h.update(json.dumps([[t.id, t.family, t.params] for t in loaded.suite.tasks], sort_keys=True, default=str).encode())
    for r in records:
        h.update(json.dumps([r.key, r.model, r.group, r.task, r.seed, r.status.value,
                             r.sweep, r.message], default=str).encode())
        if not r.key:  # hand-made records: hash what is drawn
            h.update(json.dumps([r.predictions, r.theory_predictions, r.nearest_train], default=str).encode())
    return h.hexdigest()


@dataclass(frozen=True)
class PlotsState:
    """What the plots' manifest says before drawing: the plots still current (None: to be drawn), and the names
    of the plots it listed (removed after drawing where no longer drawn)."""

    digest: str
    current: list[Plot] | None
    stale: tuple[str, ...] = ()


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
        return PlotsState(digest, None, tuple([n for n, _ in listed] + [n for n in (left if isinstance(left, list) else [])
                                                                         if isinstance(n, str)]))
    except (ValueError, KeyError, TypeError, AttributeError):  # none yet, or damaged: redrawn, nothing removed
        return PlotsState(digest, None)


def finish_plots(out_dir: Path | None, loaded: Any, state: PlotsState, drawn: list[tuple[int, Plot, dict[str, str]]],
                 selected: frozenset[tuple[str, str]] | None = None) -> list[Plot]:
    """The drawn shares (`draw_share`) in the suite's order; with out_dir, the plots no longer drawn removed and the manifest written."""
    from compbench.files import OutputError, remove_contained, write_atomic

    plots: list[Plot] = []
    sha: dict[str, str] = {}
    for _, plot, files in sorted(drawn, key=lambda d: d[0]):
        plots.append(plot)
        sha.update(files)
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
        doc = {"digest": state.digest, "plots": [[p.name, p.caption] for p in plots], "sha256": sha}
        write_atomic(out_dir, f"plots/{MANIFEST}", json.dumps({**doc, "left": left} if left else doc, indent=1))
    return plots


def write_plots(out_dir: Path | None, loaded: Any, records: list[Record],
                selected: frozenset[tuple[str, str]] | None = None) -> list[Plot]:
    """Every plot of the suite; with out_dir, also written as PNG and SVG under out_dir/plots.

    Plots are redrawn only when the records, the suite's tasks or this module changed, or a plot
    file is no longer what was written (plots/manifest.json holds each file's sha256); files of
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
    return finish_plots(out_dir, loaded, state, draw_share(out_dir, loaded, records, 0, 1), selected)


# The plots `_figures` draws of one task; every other plot (scores, sweep-*, cd-blocks) shows several tasks.
TASK_PLOTS = ("theory", "grid", "factors", "similarity")



def draw_share(out_dir: Path | None, loaded: Any, records: list[Record], shard: int, shards: int) -> list[tuple[int, Plot, dict[str, str]]]:
    """The plots whose position in the suite's list is `shard` modulo `shards`, drawn (and with out_dir written):
    (position, plot, sha256 of each file written). Each process sharing the drawing draws one share."""
    from compbench.files import write_atomic

    plt = _plt()
    drawn = []
    for i, (name, caption, draw) in enumerate(_figures(loaded, records)):
        if i % shards != shard:
            continue
        fig = draw()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
        sha: dict[str, str] = {}
        if out_dir is not None:
            svg = io.BytesIO()
            fig.savefig(svg, format="svg", metadata={"Date": None, "Creator": None})
            for ext, data in (("png", buf.getvalue()), ("svg", svg.getvalue())):
                write_atomic(out_dir, f"plots/{name}.{ext}", data)
                sha[f"{name}.{ext}"] = hashlib.sha256(data).hexdigest()
        plt.close(fig)
        drawn.append((i, Plot(name, caption, buf.getvalue()), sha))
    return drawn


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
