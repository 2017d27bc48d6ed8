"""False discoveries across a check's cells: one-sided Welch p-values per cell and Benjamini–Hochberg over them.

A check tests many cells at once; at a fixed k·SE tolerance each has its own false-alarm rate, so a suite
with hundreds of cells flags some by chance. Benjamini–Hochberg (1995) bounds the expected share of false
alarms among the cells it flags by q, whatever their number.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def welch_p(worse: float, base_sd: float, base_n: int, now_sd: float, now_n: int, two_sided: bool = False) -> float:
    """The p-value of a Welch t-test that now is worse than the reference by `worse` (its mean difference, signed so
    that > 0 is worse): one-sided, or two-sided for a metric with no better direction.

    With no spread on either side the difference is exact: p = 0 when it is worse (any change, two-sided), else 1;
    a side of one value carries no degrees of freedom, so with only such sides the normal distribution is used.
    """
    from scipy import stats

    parts = [(sd * sd / max(n, 1), n) for sd, n in ((base_sd, base_n), (now_sd, now_n))]
    var = sum(v for v, _ in parts)
    if var <= 0.0:
        moved = worse != 0.0 if two_sided else worse > 0.0
        return 0.0 if moved else 1.0
    t = worse / math.sqrt(var)
    denominator = sum(v * v / (n - 1) for v, n in parts if n > 1 and v > 0)
    dof = var * var / denominator if denominator > 0 else math.inf
    tail = stats.norm.sf if math.isinf(dof) else (lambda x: stats.t.sf(x, dof))
    return float(min(1.0, 2.0 * tail(abs(t)))) if two_sided else float(tail(t))


def benjamini_hochberg(p_values: Sequence[float], q: float) -> list[bool]:
    """Which hypotheses Benjamini–Hochberg rejects at level q: sorted ascending, the first k where k is the largest
    rank with p_(k) ≤ k·q/m (m = how many p-values were tested)."""
    m = len(p_values)
    order = sorted(range(m), key=lambda i: p_values[i])
    cut = 0
    for rank, i in enumerate(order, start=1):
        if p_values[i] <= rank * q / m:
            cut = rank
    rejected = [False] * m
    for i in order[:cut]:
        rejected[i] = True
    return rejected
