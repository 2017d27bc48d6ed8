"""What every figure of the report shares: the matplotlib setup, model colours and markers, axis limits that a few
outliers cannot stretch, and the record filters the figures start from."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from compbench.records import CellRecord as Record, big_groups

SWEEP_PARAMS = {
    "init_scale": "init scale σ (log scale; small = rich, 1 = lazy)",
    "width": "hidden width H (log scale)",
    "lr": "learning rate (log scale)",
}
MARKERS = "os^DvP*Xph<>"


def _plt() -> Any:  # pyplot, imported late so that matplotlib loads only when a figure is drawn
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
