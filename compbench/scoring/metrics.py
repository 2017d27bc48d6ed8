"""Per-cell metrics: truth on held-out cells, agreement with theory, additivity."""

from __future__ import annotations

import numpy as np

TIE_TOL = 1e-9  # |prediction| below this (relative to max|y|) is a tie: neither sign


def sign_hits(preds: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Per prediction: 1 for the right sign, 0 for the wrong one, ½ for a tie (prediction ≈ 0)."""
    if len(y) == 0:
        return np.zeros(0)
    tie = np.abs(preds) <= TIE_TOL * max(1.0, float(np.max(np.abs(y))))
    return np.where(tie, 0.5, (np.sign(preds) == np.sign(y)).astype(float))


def sign_accuracy(preds: np.ndarray, y: np.ndarray) -> float:
    """Fraction of correct signs; a tie (prediction ≈ 0) scores ½, i.e. a coin flip."""
    if len(y) == 0:
        return float("nan")
    return float(sign_hits(preds, y).mean())


def r2(target: np.ndarray, preds: np.ndarray) -> float:
    """Coefficient of determination of preds for target; a constant target scores 1 if matched else 0."""
    ss_res = float(np.sum((target - preds) ** 2))
    ss_tot = float(np.sum((target - target.mean()) ** 2))
    scale = 1e-12 * len(target) * max(1.0, float(np.mean(target**2)))
    if ss_tot <= scale:
        return 1.0 if ss_res <= scale else 0.0
    return 1.0 - ss_res / ss_tot


def slope_intercept(truth: np.ndarray, preds: np.ndarray) -> tuple[float, float]:
    """Least-squares line of predictions against the truth."""
    if len(truth) < 2 or np.ptp(truth) == 0:
        return float("nan"), float("nan")
    slope, intercept = np.polyfit(truth, preds, 1)
    return float(slope), float(intercept)


def separation(preds: np.ndarray, y: np.ndarray) -> float:
    """Mean prediction on positive cells minus on negative cells (0: classes not separated)."""
    pos, neg = preds[y > 0], preds[y < 0]
    if len(pos) == 0 or len(neg) == 0:
        return float("nan")
    return float(pos.mean() - neg.mean())


def cell_metrics(
    kind: str,
    y: np.ndarray,
    train_mask: np.ndarray,
    preds: np.ndarray,
    theory_preds: np.ndarray | None,
    additivity: float,
    test_mask: np.ndarray | None = None,
) -> dict[str, float]:
    """Every metric of one trained model on one task (held-out = `test_mask`, default the untrained cells)."""
    test = ~train_mask if test_mask is None else test_mask
    yt, pt = y[test], preds[test]
    m: dict[str, float] = {"additivity": additivity}
    if kind == "classification":
        m["heldout_acc"] = sign_accuracy(pt, yt)
        m["train_acc"] = sign_accuracy(preds[train_mask], y[train_mask])
        m["heldout_margin"] = float(np.mean(pt * yt))
        m["separation"] = separation(pt, yt)
    else:
        m["heldout_r2"] = r2(yt, pt)
        m["heldout_mse"] = float(np.mean((pt - yt) ** 2))
        m["train_mse"] = float(np.mean((preds[train_mask] - y[train_mask]) ** 2))
        m["slope"], m["intercept"] = slope_intercept(yt, pt)
        m["corr"] = float(np.corrcoef(yt, pt)[0, 1]) if np.ptp(pt) > 0 and np.ptp(yt) > 0 else float("nan")
    if theory_preds is not None:
        th = theory_preds[test]
        m["theory_r2"] = r2(th, pt)
        m["theory_max_abs_diff"] = float(np.max(np.abs(th - pt)))
        if kind == "classification":
            m["theory_acc"] = sign_accuracy(th, yt)
        else:
            m["theory_slope"] = slope_intercept(yt, th)[0]
            m["theory_heldout_r2"] = r2(yt, th)
    return m


def pooled_r2(target: np.ndarray, preds: np.ndarray) -> float:
    """R² over rows × outputs: 1 − ΣSS_res / ΣSS_tot, each output centred on its own mean.

    Equals `r2` for one output; rows are samples (or cells), trailing axes outputs.
    """
    t = np.asarray(target, dtype=np.float64).reshape(len(target), -1)
    p = np.asarray(preds, dtype=np.float64).reshape(len(preds), -1)
    if t.shape[1] == 1:
        return r2(t[:, 0], p[:, 0])
    ss_res = float(np.sum((t - p) ** 2))
    ss_tot = float(np.sum((t - t.mean(axis=0)) ** 2))
    scale = 1e-12 * t.size * max(1.0, float(np.mean(t**2)))
    if ss_tot <= scale:
        return 1.0 if ss_res <= scale else 0.0
    return 1.0 - ss_res / ss_tot


def top1_accuracy(scores: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """Per sample: 1 if the true class has the highest score, 1/t if it ties with t − 1 others, else 0.

    A tie among the top scores counts as a fair draw among them (as a ±1 tie scores ½).
    """
    s = np.asarray(scores, dtype=np.float64)
    top = s.max(axis=1, keepdims=True)
    tol = TIE_TOL * np.maximum(1.0, np.abs(top))
    at_top = s >= top - tol
    hit = at_top[np.arange(len(s)), np.asarray(classes, dtype=np.int64)]
    return np.where(hit, 1.0 / at_top.sum(axis=1), 0.0)


def _cell_mean(values: np.ndarray, cell_ids: np.ndarray, cells: np.ndarray) -> float:
    """Mean over `cells` of each cell's mean of `values` (samples weighted so every cell counts once)."""
    n = int(max(cell_ids.max(initial=-1), cells.max(initial=-1))) + 1
    sums = np.bincount(cell_ids, weights=values, minlength=n)
    counts = np.bincount(cell_ids, minlength=n)
    chosen = cells[counts[cells] > 0]
    if len(chosen) == 0:
        return float("nan")
    return float(np.mean(sums[chosen] / counts[chosen]))


def shaped_metrics(
    kind: str,
    test_cells: np.ndarray,
    train_cells: np.ndarray,
    target: np.ndarray,
    preds: np.ndarray,
    theory: np.ndarray | None,
    row_cells: np.ndarray,
    per_task_r2: bool = False,
) -> tuple[dict[str, float], dict[str, list[float]]]:
    """Metrics of a multi-class, K-output or function-valued task: (scalar metrics, per-output lists).

    Rows are what is scored: cells (per-cell means) for tasks with one target per cell, or
    (cell, x) samples for function-valued cells; `row_cells[r]` is row r's cell. `target` holds
    classes (multiclass) or values (rows, K); `preds`/`theory` (rows, K). Held-out metrics use the
    rows of `test_cells`; accuracies average per cell first, so every cell counts once.
    `per_task_r2` (function-valued cells): R² is taken against each cell's own variance over x and
    averaged over cells, as the modular-teacher literature scores a task (`r2_per_task`).
    """
    def r2_of(t: np.ndarray, p: np.ndarray, rows: np.ndarray) -> float:
        if not per_task_r2:
            return pooled_r2(t[rows], p[rows])
        cells = np.unique(row_cells[rows])
        return float(np.mean([pooled_r2(t[row_cells == c], p[row_cells == c]) for c in cells]))

    te = np.isin(row_cells, test_cells)
    tr = np.isin(row_cells, train_cells)
    m: dict[str, float] = {}
    per_output: dict[str, list[float]] = {}
    p2 = preds.reshape(len(preds), -1)
    if kind == "multiclass":
        hits = top1_accuracy(p2, target)
        m["heldout_acc"] = _cell_mean(hits, row_cells, test_cells)
        m["train_acc"] = _cell_mean(hits, row_cells, train_cells)
    elif kind == "classification":
        # ±1 function-valued cells (a sign per sample): the scalar task's accuracy and margin, per sample.
        t1, p1 = np.asarray(target, dtype=np.float64).reshape(-1), p2[:, 0]
        hits = sign_hits(p1, t1)
        m["heldout_acc"] = _cell_mean(hits, row_cells, test_cells)
        m["train_acc"] = _cell_mean(hits, row_cells, train_cells)
        m["heldout_margin"] = float(np.mean(p1[te] * t1[te]))
    else:
        t2 = np.asarray(target, dtype=np.float64).reshape(len(target), -1)
        m["heldout_r2"] = r2_of(t2, p2, te)
        m["heldout_mse"] = float(np.mean((p2[te] - t2[te]) ** 2))
        m["train_mse"] = float(np.mean((p2[tr] - t2[tr]) ** 2)) if tr.any() else float("nan")
        if per_task_r2 and tr.any():
            # Function-valued cells are evaluated at inputs apart from the training inputs, so the training
            # cells' R² is in-distribution generalisation (new inputs, or new episodes, of trained cells).
            m["train_r2"] = r2_of(t2, p2, tr)
            m["r2_gap"] = m["train_r2"] - m["heldout_r2"]
        if p2.shape[1] > 1:
            per_output["heldout_r2"] = [r2(t2[te, k], p2[te, k]) for k in range(p2.shape[1])]
    if theory is not None:
        th = theory.reshape(len(theory), -1)
        m["theory_r2"] = pooled_r2(th[te], p2[te])
        m["theory_max_abs_diff"] = float(np.max(np.abs(th[te] - p2[te])))
        if kind == "multiclass":
            m["theory_acc"] = _cell_mean(top1_accuracy(th, target), row_cells, test_cells)
        elif kind == "classification":
            m["theory_acc"] = _cell_mean(sign_hits(th[:, 0], np.asarray(target, dtype=np.float64).reshape(-1)), row_cells, test_cells)
        else:
            m["theory_heldout_r2"] = r2_of(t2, th, te)
            if th.shape[1] > 1:
                per_output["theory_heldout_r2"] = [r2(t2[te, k], th[te, k]) for k in range(th.shape[1])]
    return m, per_output


def factor_r2(y_all: np.ndarray, target: np.ndarray, preds: np.ndarray) -> float:
    """1 − MSE(preds, target) / the variance of `y_all` (every cell of the grid), as Schott et al.'s `RSquared`.

    The variance is the population variance (mean of squared deviations) over the whole grid, not
    over the held-out cells: a split that holds out a narrow range of a factor is judged against
    the factor's full spread (github.com/bethgelab/InDomainGeneralizationBenchmark, evaluate_model.py).
    """
    var = float(np.mean((y_all - y_all.mean()) ** 2))
    if var <= 0 or len(target) == 0:
        return float("nan")
    return 1.0 - float(np.mean((preds - target) ** 2)) / var


def factor_metrics(names: tuple[str, ...], y: np.ndarray, test: np.ndarray, preds: np.ndarray,
                   theory: np.ndarray | None) -> dict[str, float]:
    """Per-factor held-out metrics of a task whose outputs are named factors (TaskData.output_names).

    `y`, `preds`, `theory`: (n_cells, K), one row per cell; `test`: the held-out cells. An output
    named `f` is a regressed factor: `factor_r2.f` (against its variance over every cell) and
    `factor_slope.f` (held-out prediction on truth); `factor_r2` is their mean over the factors.
    Outputs named `f=v` form one-hot blocks: `class_acc.f` is the held-out accuracy of the largest
    output of the block (ties as a fair draw). Each has a `theory_` twin from the theory's predictions.
    """
    out: dict[str, float] = {}
    blocks: dict[str, list[int]] = {}
    sources = [("", preds)] + ([("theory_", theory)] if theory is not None else [])
    r2s: dict[str, list[float]] = {prefix: [] for prefix, _ in sources}
    for k, name in enumerate(names):
        factor, eq, _ = name.partition("=")
        if eq:
            blocks.setdefault(factor, []).append(k)
            continue
        yk = y[:, k]
        for prefix, p in sources:
            r = factor_r2(yk, yk[test], p[test, k])
            out[f"{prefix}factor_r2.{name}"] = r
            out[f"{prefix}factor_slope.{name}"] = slope_intercept(yk[test], p[test, k])[0]
            r2s[prefix].append(r)
    for prefix, values in r2s.items():
        if values:
            out[f"{prefix}factor_r2"] = float(np.mean(values))
    for factor, cols in blocks.items():
        classes = y[test][:, cols].argmax(axis=1)
        for prefix, p in sources:
            out[f"{prefix}class_acc.{factor}"] = float(np.mean(top1_accuracy(p[test][:, cols], classes))) if len(classes) else float("nan")
    return out


def representation_metrics(names: tuple[str, ...], y: np.ndarray, test: np.ndarray, probe: np.ndarray | None,
                           nearest: list[float | None] | None) -> tuple[dict[str, float], dict[str, str]]:
    """What a model's representation knows, beside what it reads out, and why a value says nothing.

    `probe`: the linear probe's prediction per cell ((n_cells, K), compbench.theory.probe) or None: scored as
    `factor_metrics` scores the model, named `probe_r2.f` (and their mean `probe_r2`) and `probe_acc.f`.
    `nearest`: each held-out cell's nearest-training similarity (None elsewhere) or None: their mean is
    `nearest_train_similarity`. A missing one is NaN with its n/a reason (records.metric_facts' rules).
    """
    from compbench.records.metric_facts import probe_not_applicable, similarity_not_applicable

    out: dict[str, float] = {}
    na: dict[str, str] = {}
    if probe is None:
        out["probe_r2"], na["probe_r2"] = float("nan"), probe_not_applicable(False) or ""
    else:
        rename = {"factor_r2": "probe_r2", "class_acc": "probe_acc"}
        for name, value in factor_metrics(names, y, test, np.asarray(probe, dtype=np.float64), None).items():
            base, dot, factor = name.partition(".")
            if base in rename:
                out[rename[base] + dot + factor] = value
    values = [v for v, held in zip(nearest or [], test) if held and v is not None]
    if not values:
        out["nearest_train_similarity"] = float("nan")
        na["nearest_train_similarity"] = similarity_not_applicable(False) or ""
    else:
        out["nearest_train_similarity"] = float(np.mean(values))
    return out, na
