"""Plots of a suite's results (matplotlib, Agg): theory vs network, grids, σ sweeps, CD blocks."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

BIG_SWEEP = 12


def _plt():  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ok(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["status"] == "ok"]


def _small_models(records: list[dict[str, Any]]) -> list[str]:
    members: dict[str, set[str]] = defaultdict(set)
    for r in records:
        members[r["group"]].add(r["model"])
    return list(dict.fromkeys(r["model"] for r in records if len(members[r["group"]]) <= BIG_SWEEP and not r.get("sweep")))


def theory_scatter(task: str, records: list[dict[str, Any]], test_mask: np.ndarray):  # type: ignore[no-untyped-def]
    """Held-out prediction of each model vs its kernel-theory prediction (y = x: theory holds)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    models = _small_models(records)
    lo, hi = np.inf, -np.inf
    for i, model in enumerate(models):
        recs = [r for r in _ok(records) if r["model"] == model and r.get("theory_predictions") is not None]
        if not recs:
            continue
        th = np.concatenate([np.asarray(r["theory_predictions"])[test_mask] for r in recs])
        pr = np.concatenate([np.asarray(r["predictions"])[test_mask] for r in recs])
        ax.scatter(th, pr, s=14, alpha=0.6, color=f"C{i}", label=model)
        lo, hi = min(lo, th.min(), pr.min()), max(hi, th.max(), pr.max())
    if np.isfinite(lo):
        pad = 0.05 * (hi - lo + 1e-9)
        ax.plot([lo - pad, hi + pad], [lo - pad, hi + pad], "k--", lw=1, label="y = x (model = theory)")
    ax.set_xlabel("kernel-theory prediction (held-out cells)")
    ax.set_ylabel("model prediction (held-out cells)")
    ax.set_title(f"{task}: model vs its kernel theory")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def grid_heatmaps(task: str, records: list[dict[str, Any]], cells: np.ndarray, y: np.ndarray, train_mask: np.ndarray):  # type: ignore[no-untyped-def]
    """For a 2-component task: truth and each model's predictions (seed 0) on the grid; train cells outlined."""
    plt = _plt()
    from matplotlib.patches import Rectangle

    models = [m for m in _small_models(records) if any(r["model"] == m for r in _ok(records))]
    n0, n1 = int(cells[:, 0].max()) + 1, int(cells[:, 1].max()) + 1
    panels = [("truth", y)] + [
        (m, np.asarray(min((r for r in _ok(records) if r["model"] == m), key=lambda r: r["seed"])["predictions"])) for m in models
    ]
    fig, axes = plt.subplots(1, len(panels), figsize=(2.6 * len(panels) + 0.8, 3.0), squeeze=False)
    vmax = float(np.nanmax(np.abs(y))) or 1.0
    for ax, (name, values) in zip(axes[0], panels):
        grid = np.full((n0, n1), np.nan)
        grid[cells[:, 0], cells[:, 1]] = values
        im = ax.imshow(grid, cmap="RdBu_r", vmin=-vmax, vmax=vmax, origin="upper")
        for (a, b), tr in zip(cells, train_mask):
            if tr:
                ax.add_patch(Rectangle((b - 0.5, a - 0.5), 1, 1, fill=False, edgecolor="black", lw=1.2))
        ax.set_title(name, fontsize=8)
        ax.set_xlabel("component 2 value")
    axes[0][0].set_ylabel("component 1 value")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.8, label="target / prediction")
    fig.suptitle(f"{task}: truth and predictions (outlined = training cells)", fontsize=9)
    return fig


def sweep_curves(records: list[dict[str, Any]], param: str):  # type: ignore[no-untyped-def]
    """Held-out score and additivity vs a swept parameter (e.g. init scale σ: lazy → rich)."""
    plt = _plt()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(9.5, 3.8))
    by: dict[tuple[str, str], dict[float, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for r in _ok(records):
        if param in (r.get("sweep") or {}):
            by[(r["group"], r["task"])][float(r["sweep"][param])].append(r)
    for i, ((group, task), points) in enumerate(sorted(by.items())):
        xs = sorted(points)
        score = "heldout_acc" if "heldout_acc" in points[xs[0]][0] else "heldout_r2"
        for ax, metric in ((ax1, score), (ax2, "additivity")):
            means = [np.mean([r[metric] for r in points[x]]) for x in xs]
            sds = [np.std([r[metric] for r in points[x]]) for x in xs]
            ax.errorbar(xs, means, yerr=sds, marker="o", ms=4, capsize=2, color=f"C{i}", label=f"{group} on {task}")
    for ax, label in ((ax1, "held-out score (accuracy or R²)"), (ax2, "held-out additivity R²")):
        if param in ("init_scale", "width", "lr"):
            ax.set_xscale("log")
        ax.set_xlabel({"init_scale": "init scale σ (small = rich, 1 = lazy)"}.get(param, param))
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    ax1.set_title(f"held-out score vs {param}")
    ax2.set_title(f"additivity vs {param}")
    ax2.legend(fontsize=7)
    fig.tight_layout()
    return fig


def cd_blocks(records: list[dict[str, Any]], tasks: list[str]):  # type: ignore[no-untyped-def]
    """Held-out accuracy per context-dependence block size, per model (sweeps: share of perfect kernels)."""
    plt = _plt()
    members: dict[str, set[str]] = defaultdict(set)
    for r in records:
        if r["status"] != "skipped":
            members[r["group"]].add(r["model"])
    rows = list(dict.fromkeys(r["group"] if len(members[r["group"]]) > BIG_SWEEP else r["model"] for r in records if r["task"] in tasks))
    fig, ax = plt.subplots(figsize=(1.2 + 1.3 * len(rows), 3.8))
    width = 0.8 / max(len(tasks), 1)
    for j, task in enumerate(tasks):
        vals = []
        for row in rows:
            ok = [r for r in _ok(records) if r["task"] == task and (r["model"] == row or r["group"] == row)]
            if not ok:
                vals.append(np.nan)
            elif len(members[row]) > BIG_SWEEP:
                per = defaultdict(list)
                for r in ok:
                    per[r["model"]].append(r["heldout_acc"])
                vals.append(np.mean([np.mean(v) >= 1 - 1e-9 for v in per.values()]))
            else:
                vals.append(np.mean([r["heldout_acc"] for r in ok]))
        ax.bar(np.arange(len(rows)) + j * width, vals, width, label=task, color=f"C{j}")
    ax.set_xticks(np.arange(len(rows)) + width * (len(tasks) - 1) / 2)
    ax.set_xticklabels(rows, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("held-out accuracy\n(sweeps: share of kernels at 100%)")
    ax.set_xlabel("model")
    ax.set_ylim(0, 1.05)
    ax.set_title("context dependence: larger held-out blocks invite the context shortcut")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def write_plots(out_dir: Path, loaded: Any, records: list[dict[str, Any]]) -> list[Path]:
    """Every plot of the suite as PNG and SVG under out_dir/plots; returns the PNG paths."""
    from compbench.tasks import make_task

    plt = _plt()
    plot_dir = out_dir / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []

    def save(name: str, fig: Any) -> None:
        for ext in ("png", "svg"):
            fig.savefig(plot_dir / f"{name}.{ext}", dpi=100)
        plt.close(fig)
        paths.append(plot_dir / f"{name}.png")

    for entry in loaded.suite.tasks:
        recs = [r for r in records if r["task"] == entry.id]
        if not _ok(recs):
            continue
        data = make_task(entry.family, **entry.params)
        # Kernel machines lie on y = x by construction; the scatter is worth drawing where networks are.
        if any(r.get("theory_predictions") is not None and r.get("adapter") != "kernel" for r in _ok(recs)):
            save(f"theory-{entry.id}", theory_scatter(entry.id, recs, ~data.train_mask))
        if data.n_components == 2:
            save(f"grid-{entry.id}", grid_heatmaps(entry.id, recs, data.cells, data.y, data.train_mask))
    swept = sorted({k for r in records for k in (r.get("sweep") or {}) if k in ("init_scale", "width", "lr")})
    for param in swept:
        groups = {r["group"] for r in records if param in (r.get("sweep") or {})}
        save(f"sweep-{param}", sweep_curves([r for r in records if r["group"] in groups], param))
    cd = [t.id for t in loaded.suite.tasks if t.family == "context_dependence"]
    if cd:
        save("cd-blocks", cd_blocks([r for r in records if r["task"] in cd], cd))
    return paths
