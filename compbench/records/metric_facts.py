"""The one place for each metric's facts: label, direction, task kind, theory partner.

Records, claims, reports and `check` read these instead of repeating the knowledge.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

MIN_R2_CELLS = 3  # an R² over fewer held-out cells (or against a constant) says nothing


@dataclass(frozen=True)
class MetricFact:
    """What a metric is: how to label it, which way is better, which task kind has it, its theory twin."""

    name: str
    label: str
    direction: str | None  # "higher", "lower", or None (neither is better)
    kind: str | tuple[str, ...]  # "classification", "regression", "multiclass", several, or "any"
    theory: str | None = None  # the same metric computed on the model's kernel-theory prediction
    chance: float | None = None  # the value of a predictor that ignores the input (multiclass: 1/K)
    needs_theory: bool = False  # present only when the model has a theory prediction
    short: str = ""  # a column header's words, where the label is too long for one ("scale R²")
    # A training-side score: a model whose mean over seeds is on the wrong side of its fit threshold
    # (a suite's `fit_threshold`, else `fit`; None: no default) did not fit its training cells, and
    # the run, the report and `check` warn about it (a warning, never a failure).
    fit_metric: bool = False
    fit: float | None = None
    # The values the metric can take: an accuracy lies in [0, 1], an R² at most 1 (`check` refuses a
    # baseline whose numbers lie outside, or whose spread over seeds these bounds make impossible).
    low: float = float("-inf")
    high: float = float("inf")

    @property
    def kinds(self) -> tuple[str, ...]:
        """The task kinds whose records carry this metric ("any": every kind)."""
        return (self.kind,) if isinstance(self.kind, str) else self.kind


def _facts(*facts: MetricFact) -> dict[str, MetricFact]:
    return {f.name: f for f in facts}


class _Metrics(dict[str, MetricFact]):
    """The metric facts by name; a per-factor name `base.factor` (factor_r2.scale) resolves from its base's fact."""

    def __missing__(self, name: str) -> MetricFact:
        fact = per_factor_fact(name)
        if fact is None:
            raise KeyError(name)
        return fact

    def get(self, name: str, default: Any = None) -> Any:
        return self[name] if name in self else default

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or (isinstance(name, str) and per_factor_fact(name) is not None)


# Per-factor metrics of a task that names its outputs (TaskData.output_names, e.g. `sprites`): the
# record carries `base.factor` for every factor (factor_r2.scale, factor_slope.x, class_acc.shape).
PER_FACTOR: dict[str, MetricFact] = _facts(
    MetricFact("factor_r2", "held-out R² against the factor's variance over the whole grid", "higher", "regression", "theory_factor_r2", 0.0,
               short="R²", high=1.0),
    MetricFact("factor_slope", "held-out slope of prediction vs truth", None, "regression", "theory_factor_slope", short="slope"),
    MetricFact("class_acc", "held-out accuracy as a class (largest one-hot output)", "higher", "regression", "theory_class_acc",
               short="accuracy", low=0.0, high=1.0),
    MetricFact("theory_factor_r2", "held-out R² of the theory against the factor's variance", "higher", "regression", needs_theory=True, high=1.0),
    MetricFact("theory_factor_slope", "held-out slope of the theory", None, "regression", needs_theory=True),
    MetricFact("theory_class_acc", "held-out accuracy of the theory as a class", "higher", "regression", needs_theory=True, low=0.0, high=1.0),
    # What the representation knows: a linear probe from the penultimate features (compbench.theory.probe), fitted on
    # the training cells and scored on the held-out ones as the model's own read-out is (R² for an ordinal factor,
    # accuracy of the largest output for a categorical one: a category has no order for an R² to measure).
    MetricFact("probe_r2", "held-out R² of a linear probe on the penultimate features", "higher", "regression", None, 0.0,
               short="probe R²", high=1.0),
    MetricFact("probe_acc", "held-out accuracy as a class of a linear probe on the penultimate features", "higher",
               "regression", short="probe accuracy", low=0.0, high=1.0),
)


def per_factor_fact(name: str) -> MetricFact | None:
    """The fact of a per-factor metric `base.factor` (None when `name` is not one)."""
    base, dot, factor = name.partition(".")
    fact = PER_FACTOR.get(base)
    if not dot or not factor or fact is None:
        return None
    theory = f"{fact.theory}.{factor}" if fact.theory else None
    return MetricFact(name, f"{fact.label}: {factor}", fact.direction, fact.kind, theory, fact.chance, fact.needs_theory,
                      f"{factor} {fact.short}".rstrip(), low=fact.low, high=fact.high)


def per_factor_groups(names: Iterable[str]) -> dict[str, list[str]]:
    """The per-factor metrics among `names`, by base, theory twins left out: {"factor_r2": ["factor_r2.scale", …]},
    bases in PER_FACTOR's order, each base's metrics in their first appearance's order (the task's output order)."""
    groups: dict[str, dict[str, None]] = {base: {} for base, fact in PER_FACTOR.items() if not fact.needs_theory}
    for name in names:
        base = name.partition(".")[0]
        if base in groups and per_factor_fact(name) is not None:
            groups[base][name] = None
    return {base: list(found) for base, found in groups.items() if found}


def metric_allowed(metric: str, allowed: tuple[str, ...]) -> bool:
    """Whether a claim that takes `allowed` metrics takes `metric` (a per-factor name when its base is allowed)."""
    return metric in allowed or metric.partition(".")[0] in allowed and per_factor_fact(metric) is not None


METRICS: dict[str, MetricFact] = _Metrics(**_facts(
    MetricFact("heldout_acc", "held-out accuracy", "higher", ("classification", "multiclass"), "theory_acc", 0.5, low=0.0, high=1.0),
    # The paper's binary accuracy: over every held-out sample (image), where heldout_acc is over cells (each cell's
    # mean prediction). Present when a cell has several samples; CD-1's 2 held-out cells make heldout_acc 0, ½ or 1.
    MetricFact("heldout_acc_samples", "held-out accuracy over samples (each image counts, as the paper's)", "higher",
               "classification", "theory_acc_samples", 0.5, low=0.0, high=1.0, short="accuracy over samples"),
    MetricFact("train_acc", "training accuracy", "higher", ("classification", "multiclass"), fit_metric=True, fit=0.9, low=0.0, high=1.0),
    MetricFact("heldout_margin", "held-out margin y·f", "higher", "classification"),
    MetricFact("separation", "held-out separation (mean f on + minus on −)", "higher", "classification"),
    MetricFact("heldout_r2", "held-out R²", "higher", "regression", "theory_heldout_r2", 0.0, high=1.0),
    MetricFact("irrelevant_share", "held-out variance share of the irrelevant components", "lower", "any", "theory_irrelevant_share"),
    MetricFact("heldout_mse", "held-out MSE", "lower", "regression"),
    # No default fit threshold for an MSE: its scale is the task's targets' (a suite may set one).
    MetricFact("train_mse", "training MSE", "lower", "regression", fit_metric=True),
    # No default either: it is measured at new inputs of the training cells (in-distribution generalisation), so a
    # low value is not a failure to fit (a modular teacher's kernels sit at 0.89 and fit every training sample).
    MetricFact("train_r2", "R² on the training cells at new inputs (function-valued cells)", "higher", "regression",
               fit_metric=True, high=1.0),
    MetricFact("r2_gap", "train_r2 − heldout_r2: the in-distribution minus the held-out R²", "lower", "regression"),
    MetricFact("slope", "held-out slope of prediction vs truth", None, "regression", "theory_slope"),
    MetricFact("intercept", "held-out intercept", None, "regression"),
    MetricFact("corr", "held-out correlation with the truth", "higher", "regression", low=-1.0, high=1.0),
    MetricFact("additivity", "held-out conjunction-wise additivity R²", None, "any", high=1.0),
    MetricFact("theory_r2", "R²(model, its theory) on held-out cells", "higher", "any", needs_theory=True, high=1.0),
    MetricFact("theory_max_abs_diff", "max |model − theory| on held-out cells", "lower", "any", needs_theory=True),
    MetricFact("theory_acc", "held-out accuracy of the theory", "higher", ("classification", "multiclass"), needs_theory=True, low=0.0, high=1.0),
    MetricFact("theory_acc_samples", "held-out accuracy of the theory over samples", "higher", "classification",
               needs_theory=True, low=0.0, high=1.0),
    MetricFact("theory_irrelevant_share", "irrelevant share of the theory", "lower", "any", needs_theory=True),
    MetricFact("theory_slope", "held-out slope of the theory", None, "regression", needs_theory=True),
    MetricFact("theory_heldout_r2", "held-out R² of the theory", "higher", "regression", needs_theory=True, high=1.0),
    # the mean over the regressed factors of factor_r2.<factor> (Schott et al. 2022's score), and its theory's
    MetricFact("factor_r2", "mean per-factor held-out R² (against each factor's variance over the whole grid)", "higher",
               "regression", "theory_factor_r2", 0.0, short="mean R²", high=1.0),
    MetricFact("theory_factor_r2", "mean per-factor held-out R² of the theory", "higher", "regression", needs_theory=True, high=1.0),
    # the same mean for the linear probe on the penultimate features: above factor_r2, the read-out fails what the
    # representation knows; both low, the representation does not hold the factors linearly
    MetricFact("probe_r2", "mean per-factor held-out R² of a linear probe on the penultimate features", "higher",
               "regression", chance=0.0, short="probe mean R²", high=1.0),
    # Held-out cells' mean cosine similarity, under the model's own kernel, to the nearest training sample: near 1, a
    # held-out score can come from near-duplicates of training inputs rather than from composition.
    MetricFact("nearest_train_similarity", "held-out cells' mean normalised-kernel similarity to the nearest training sample",
               None, "regression", short="nearest-train similarity", low=-1.0, high=1.0),
))

# Statistics `check` computes over a big sweep's members (not metrics of one record).
SWEEP_STATISTICS: dict[str, MetricFact] = _facts(
    MetricFact("count_perfect", "members with a perfect held-out score", "higher", "any", low=0.0),
    MetricFact("mean_heldout", "mean held-out score over members", "higher", "any", high=1.0),
)


# Statistics of one model's seeds on a task together (compbench.scoring.seed_spread), not of one record:
# a claim reads them per member where it reads a per-record metric's mean over seeds.
SEED_STATISTICS: dict[str, MetricFact] = _facts(
    # 1 is the theory's value: neither direction is better.
    MetricFact("seed_var_ratio", "across-seed variance of the held-out predictions over the variance its theory predicts",
               None, "any", low=0.0),
)


def seed_var_not_applicable(n_seeds: int, predicted: float) -> str | None:
    """Why seed_var_ratio says nothing for these seeds (fewer than 2, or a theory that predicts no spread), else None."""
    if n_seeds < 2:
        return f"{n_seeds} seed{'s' if n_seeds != 1 else ''}: a variance over seeds needs 2 or more"
    if not predicted > 0:
        return "its theory predicts no spread over seeds (a centred, deterministic or kernel model)"
    return None


def _fact(metric: str) -> MetricFact | None:
    return METRICS.get(metric) or SWEEP_STATISTICS.get(metric) or SEED_STATISTICS.get(metric)


def bounds_of(metric: str) -> tuple[float, float]:
    """The values a metric (or sweep or seed statistic) can take, (low, high); (-inf, inf) when unknown."""
    fact = _fact(metric)
    return (fact.low, fact.high) if fact else (float("-inf"), float("inf"))


def direction_of(metric: str) -> str | None:
    """Which way a metric (or sweep or seed statistic) is better: "higher", "lower", or None (neither, or unknown)."""
    fact = _fact(metric)
    return fact.direction if fact else None


# The leaderboard's score per task kind, where a task's records carry no per-sample twin of it.
SCORE = {"classification": "heldout_acc", "regression": "heldout_r2", "multiclass": "heldout_acc"}
# A score's per-sample twin, which a record carries where its task's cells have several samples (an image encoding).
# There it is the headline: over cells, CD-1's 2 held-out cells score 0, ½ or 1, where the papers count every sample.
PER_SAMPLE = {"heldout_acc": "heldout_acc_samples"}


def headline_metric(kind: str | None, carried: Iterable[str] = ()) -> str:
    """A task's headline score: its kind's (accuracy for ±1 tasks, R² for regression), or that score's per-sample twin
    where the task's records carry it (`carried`: the metric names its scored records hold)."""
    score = SCORE[kind or "regression"]
    twin = PER_SAMPLE.get(score)
    return twin if twin is not None and twin in set(carried) else score


def headline_metrics(records: Iterable[Any]) -> dict[str, str]:
    """Each task's headline score from its records (CellRecords; the scored ones say which metrics the task carries)."""
    kinds: dict[str, str | None] = {}
    carried: dict[str, set[str]] = {}
    for r in records:
        if kinds.get(r.task) is None:
            kinds[r.task] = r.kind
        if getattr(r, "ok", False):
            carried.setdefault(r.task, set()).update(r.metrics)
    return {task: headline_metric(kind, carried.get(task, ())) for task, kind in kinds.items()}


def theory_partner(metric: str) -> str | None:
    """The theory's twin of a metric (heldout_acc → theory_acc), or None."""
    fact = METRICS.get(metric)
    return fact.theory if fact else None


def metrics_for(kind: str) -> list[str]:
    """Every metric a record of this task kind can carry."""
    return [m for m, f in METRICS.items() if kind in f.kinds or "any" in f.kinds]


def chance_level(metric: str, kind: str, n_classes: int = 0) -> float | None:
    """What a predictor that ignores the input scores: 1/K for a K-class accuracy, else the fact's chance."""
    fact = METRICS.get(metric)
    if fact is None:
        return None
    if kind == "multiclass" and metric == "heldout_acc" and n_classes:
        return 1.0 / n_classes
    return fact.chance


def _constant(values: Any) -> bool:
    import numpy as np

    v = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    if len(v) == 0:
        return False
    # the tolerance of compbench.scoring.metrics.r2 for a constant target, per output
    dev = np.sum((v - v.mean(axis=0)) ** 2, axis=0)
    return bool(np.all(dev <= 1e-12 * len(v) * np.maximum(1.0, np.mean(v**2, axis=0))))


def r2_not_applicable(n_heldout: int, theory_heldout: Any = None) -> str | None:
    """Why R²(model, theory) says nothing on these held-out cells (too few, or a constant theory), else None.

    An R² against a constant is 1 or 0 by convention, not a measure: the report shows it as n/a,
    `check` does not gate on it, and claims read max |model − theory| instead.
    """
    if 0 < n_heldout < MIN_R2_CELLS:
        return f"{n_heldout} cell{'s' if n_heldout > 1 else ''}"
    if theory_heldout is not None and len(theory_heldout) and _constant(theory_heldout):
        return "theory constant"
    return None


def additivity_not_applicable(vacuous: bool) -> str | None:
    """Why the additivity R² says nothing for this task's split (the seen conjunctions span every held-out prediction), else None.

    Then every model scores 1 whatever it predicts: the report shows n/a, `check` does not gate on it and a
    claim on it fails as not applicable, never passes.
    """
    return "the seen conjunctions span every held-out prediction: any model scores 1" if vacuous else None


def share_not_applicable(n_heldout: int) -> str | None:
    """Why an irrelevant share says nothing (one held-out cell: a variance across held-out cells is 0 by construction), else None."""
    return "1 cell: the share is a variance across held-out cells" if n_heldout == 1 else None


def probe_not_applicable(has_features: bool) -> str | None:
    """Why the linear probe says nothing for this model (it hands over no penultimate features: a kernel machine), else None."""
    return None if has_features else "no penultimate features: a kernel machine has no representation to probe"


def similarity_not_applicable(has_kernel: bool) -> str | None:
    """Why the nearest-training similarity says nothing for this model (no kernel, or none evaluable on one sample), else None."""
    return None if has_kernel else "no kernel of its own to measure similarity by (theory: none, or matrix-free)"


# Metrics whose value a record may declare not applicable (CellRecord.not_applicable), by rule above.
NA_RULES = {"theory_r2": r2_not_applicable, "additivity": additivity_not_applicable,
            "irrelevant_share": share_not_applicable, "theory_irrelevant_share": share_not_applicable,
            "probe_r2": probe_not_applicable, "nearest_train_similarity": similarity_not_applicable}
# Of those, the metrics a claim may not judge at all when n/a (their value cannot fail). R²(model, theory)
# is not among them: against a constant theory its conventional 1 or 0 comes with max |model − theory|,
# which `matches_kernel` reads beside it.
NA_UNJUDGEABLE = frozenset({"additivity", "irrelevant_share", "theory_irrelevant_share", "probe_r2", "nearest_train_similarity"})


def fit_metrics() -> list[str]:
    """The training-side metrics a fit threshold may be set on (train_acc, train_mse, train_r2)."""
    return [name for name, fact in METRICS.items() if fact.fit_metric]


def fit_thresholds(suite: Mapping[str, float] | None = None) -> dict[str, float]:
    """Each fit metric's threshold: the suite's `fit_threshold`, else the metric's default (none: not checked)."""
    out = {name: METRICS[name].fit for name in fit_metrics() if METRICS[name].fit is not None}
    return {**out, **dict(suite or {})}  # type: ignore[dict-item]


@dataclass(frozen=True)
class FitWarning:
    """A model that did not fit its training cells on a task: its training score against the fit threshold."""

    model: str
    task: str
    metric: str
    value: float  # mean over the seeds that scored it
    threshold: float
    n_seeds: int

    def line(self) -> str:
        """One line naming the model, the task, the training score and the threshold."""
        fact = METRICS[self.metric]
        side = "≥" if fact.direction == "higher" else "≤"
        seeds = f"mean over {self.n_seeds} seeds" if self.n_seeds > 1 else "1 seed"
        return (f"{self.model} did not fit its training cells on {self.task}: {fact.label} ({self.metric}) "
                f"{self.value:.3g} ({seeds}), fit threshold {side} {self.threshold:g}")


def fit_warnings(records: Iterable[Any], suite: Mapping[str, float] | None = None) -> list[FitWarning]:
    """Every (model, task) whose scored records' mean training score misses its fit threshold, in record order.

    `records`: CellRecords (only `ok` ones count); `suite`: the suite's `fit_threshold` over the defaults.
    """
    import math

    thresholds = fit_thresholds(suite)
    scores: dict[tuple[str, str, str], list[float]] = {}
    for r in records:
        if not getattr(r, "ok", False):
            continue
        for metric, threshold in thresholds.items():
            v = r.metrics.get(metric)
            if isinstance(v, (int, float)) and math.isfinite(v):
                scores.setdefault((r.model, r.task, metric), []).append(float(v))
    out = []
    for (model, task, metric), vals in scores.items():
        mean, threshold = sum(vals) / len(vals), thresholds[metric]
        if mean < threshold if METRICS[metric].direction == "higher" else mean > threshold:
            out.append(FitWarning(model, task, metric, mean, threshold, len(vals)))
    return out


def fit_lines(warnings: list[FitWarning], most: int = 20) -> list[str]:
    """The warnings' lines, at most `most` of them and then how many more (a big sweep may miss on many)."""
    lines = [w.line() for w in warnings[:most]]
    if len(warnings) > most:
        lines.append(f"... and {len(warnings) - most} more model/task pairs that did not fit their training cells")
    return lines
