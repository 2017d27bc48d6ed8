"""The report's figures, one function each, returning its matplotlib Figure (drawn only when called; for tests too).

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
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from compbench.records import CellRecord as Record, as_records
from compbench.records.metric_facts import METRICS, headline_metrics, per_factor_groups, theory_partner
from compbench.report.plot_style import (DODGE, EDGE_MARKERS, MARKERS, MAX_SCATTER_POINTS, SWEEP_PARAMS, _big,
                                         _failure_label, _kind, _members, _note_handle, _ok, _plt, _range,
                                         _small_models, _span, model_colors, robust_limits)


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
    values: np.ndarray | None  # a panel's; None: the model has no result to draw
    for m in models:
        recs = [r for r in records if r.model == m]
        ok = _ok(recs)
        if ok:
            first = min(ok, key=lambda r: r.seed)
            values = np.asarray(first.predictions, dtype=float)
            if values.ndim == 2:  # multi-class: the predicted class, on the truth's scale
                values = np.argmax(values, axis=1).astype(float)
            panels.append((f"{m} (seed {first.seed})", values, ""))
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
    heads = headline_metrics(records)
    for i, ((group, task), points) in enumerate(sorted(by.items())):
        color = f"C{i % 10}"
        xs = [x for x in sorted(points) if _ok(points[x])]
        failed_x += [x for x in points if not _ok(points[x])]
        if not xs:
            continue
        score = heads[task]
        theory = theory_partner(score) or ""
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
    heads = headline_metrics(records)  # the leaderboard's accuracy: over images where a block's cells have several
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
                    accs = [r.metrics[heads[task]] for r in ok]
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
            over = " over samples" if any(heads.get(t, "").endswith("_samples") for t in tasks) else ""
            ax.set_ylabel(f"held-out accuracy{over} (mean ± std over seeds)")
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
    heads = headline_metrics(ok)
    models = [m for m in dict.fromkeys(r.model for r in ok) if m not in ceilings]
    colors = model_colors(list(dict.fromkeys(r.model for r in ok)))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(tasks) + 2.5), 4.4), layout="constrained")
    width = 0.8 / max(1, len(models))
    for j, model in enumerate(models):
        means, stds = [], []
        for task in tasks:
            metric = heads.get(task, "heldout_r2")
            vals = [r.metrics[metric] for r in ok if r.model == model and r.task == task and r.metric(metric) is not None]
            means.append(float(np.mean(vals)) if vals else math.nan)
            stds.append(float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0)
        xs = np.arange(len(tasks)) - 0.4 + width * (j + 0.5)
        ax.bar(xs, means, width * 0.9, yerr=stds, capsize=2, color=colors.get(model, f"C{j % 10}"), label=model)
    for k, ceiling in enumerate(ceilings):
        for i, task in enumerate(tasks):
            metric = heads.get(task, "heldout_r2")
            vals = [r.metrics[metric] for r in ok if r.model == ceiling and r.task == task and r.metric(metric) is not None]
            if vals:
                ax.hlines(float(np.mean(vals)), i - 0.45, i + 0.45, colors="black", linestyles=("--", ":")[k % 2], lw=1.6,
                          label=f"{ceiling} (ceiling)" if i == 0 else None, zorder=4)
    ax.axhline(0, color="0.6", lw=0.8)
    ax.set_xticks(range(len(tasks)), tasks)
    ax.set_ylabel(" / ".join(dict.fromkeys(METRICS[heads[t]].label for t in tasks if t in heads)) or "held-out R²")
    ax.set_ylim(bottom=max(-1.0, min(0.0, ax.get_ylim()[0])))
    ax.set_title("held-out score per split; dashed: the theory's ceiling", fontsize=10)
    ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0, frameon=False)
    return fig
