"""Statistics of one model's seeds on one task taken together: how far they disagree, against their theory."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from compbench.records import CellRecord
from compbench.records.metric_facts import seed_var_not_applicable


@dataclass(frozen=True)
class SeedSpread:
    """The seeds' variance of their held-out predictions, the variance their theory predicts, and the ratio."""

    ratio: float  # measured / predicted (NaN when not applicable)
    measured: float  # mean over the held-out cells (and outputs) of the across-seed variance of the prediction
    predicted: float  # the same mean of the predicted variance
    n_seeds: int
    source: str  # "NTK-GP" (closed form) or "seed theories" (the spread of each seed's own theory prediction)
    not_applicable: str | None = None


def _cells(records: Sequence[CellRecord], field: str) -> np.ndarray:
    """(seeds, cells, outputs) of a list field of the records (NaN for a missing entry)."""
    rows = [np.asarray([np.nan if v is None else v for v in getattr(r, field)], dtype=np.float64) for r in records]
    a = np.stack(rows)
    return a.reshape(a.shape[0], a.shape[1], -1)


def seed_spread(records: Sequence[CellRecord]) -> SeedSpread:
    """seed_var_ratio of one model's scored seeds on one task (records of one member and task).

    The predicted variance is the NTK-GP's closed form (CellRecord.theory_variance) where the model
    has one; else, where each seed's theory starts from that seed's own f₀ (an empirical NTK), the
    variance over the seeds of their theory predictions, on the cells where those disagree.
    """
    ok = [r for r in records if r.ok and r.predictions is not None]
    n = len(ok)
    closed = next((r.theory_variance for r in ok if r.theory_variance is not None), None)
    if n < 2:
        return SeedSpread(float("nan"), float("nan"), float("nan"), n, "NTK-GP" if closed else "seed theories",
                          seed_var_not_applicable(n, float("nan")))
    measured_cells = _cells(ok, "predictions").var(axis=0, ddof=1).mean(axis=1)  # mean over outputs
    if closed is not None:
        predicted_cells = np.asarray([np.nan if v is None else v for v in closed], dtype=np.float64)
        source = "NTK-GP"
    elif all(r.theory_predictions is not None for r in ok):
        theory = _cells(ok, "theory_predictions").var(axis=0, ddof=1).mean(axis=1)
        # a theory that interpolates its training cells agrees there to rounding: held-out cells are where it spreads
        predicted_cells = np.where(theory > 1e-12 * max(1.0, float(np.nanmax(np.abs(_cells(ok, "theory_predictions"))))),
                                   theory, np.nan)
        source = "seed theories"
    else:
        predicted_cells, source = np.full_like(measured_cells, np.nan), "seed theories"
    use = np.isfinite(predicted_cells) & np.isfinite(measured_cells)
    predicted = float(predicted_cells[use].mean()) if use.any() else 0.0
    measured = float(measured_cells[use].mean()) if use.any() else float("nan")
    why = seed_var_not_applicable(n, predicted)
    return SeedSpread(measured / predicted if why is None else float("nan"), measured, predicted, n, source, why)


def seed_statistic(records: Sequence[CellRecord], name: str) -> tuple[float, str | None]:
    """A seed statistic (metric_facts.SEED_STATISTICS) of one member's records on one task: (value, why not applicable)."""
    if name != "seed_var_ratio":
        raise KeyError(f"unknown seed statistic {name!r}")
    s = seed_spread(records)
    return s.ratio, s.not_applicable
