"""The leaderboard's per-factor columns, from hand-made records: the tables (markdown and HTML), the CSV columns and the
terminal table, with exact values; a suite without multi-factor tasks gets none of them."""

from __future__ import annotations

import io
import math
from types import SimpleNamespace

import pytest

from compbench.records import CellError, CellRecord, Status
from compbench.report.html import table_html
from compbench.report.tables import factor_columns, factor_tables, leaderboard_frame
from compbench.report.terminal import print_leaderboard
from compbench.records.metric_facts import per_factor_groups

TASKS = ["random", "composition", "plain"]


def rec(model: str, task: str, seed: int, **metrics: float) -> CellRecord:
    """A scored record; keyword `r2_scale=0.5` stands for metric `factor_r2.scale` (`th_` for the theory's)."""
    names = {}
    for k, v in metrics.items():
        theory, k = k.startswith("th_"), k.removeprefix("th_")
        base, _, factor = k.rpartition("_")
        name = {"r2": "factor_r2", "slope": "factor_slope", "acc": "class_acc", "mean": "factor_r2", "score": "heldout_r2"}[base or k]
        if base and base != "score":
            name += f".{factor}"
        names[("theory_" if theory else "") + name] = v
    return CellRecord(key=f"{model}|{task}|{seed}", task=task, model=model, seed=seed, status=Status.OK, kind="regression",
                      metrics=names)


def records() -> list[CellRecord]:
    """cnn: 2 seeds on both factor tasks (and the plain task), its theory beside it; ntk: 1 seed, composition only."""
    cnn = dict(th_r2_scale=0.1, th_r2_x=0.8, th_slope_scale=0.2, th_slope_x=1.0, th_acc_shape=0.5)
    return [
        rec("cnn", "random", 0, mean=0.7, r2_scale=0.6, r2_x=0.8, slope_scale=0.9, slope_x=1.0, acc_shape=0.9, **cnn),
        rec("cnn", "random", 1, mean=0.5, r2_scale=0.4, r2_x=0.6, slope_scale=0.7, slope_x=0.8, acc_shape=0.7, **cnn),
        rec("cnn", "composition", 0, mean=0.1, r2_scale=-0.5, r2_x=0.7, slope_scale=0.25, slope_x=1.2, acc_shape=0.6, **cnn),
        rec("cnn", "composition", 1, mean=0.3, r2_scale=-0.3, r2_x=0.9, slope_scale=0.35, slope_x=1.0, acc_shape=0.8, **cnn),
        rec("ntk", "composition", 0, mean=0.25, r2_scale=-1.5, r2_x=0.95, slope_scale=-0.01, slope_x=1.25, acc_shape=0.4,
            th_mean=0.25, th_r2_scale=-1.5, th_r2_x=0.95, th_slope_scale=-0.01, th_slope_x=1.25, th_acc_shape=0.4),
        rec("cnn", "plain", 0, score=0.5),
    ]


EXPECTED = [("cnn", "cnn", t) for t in TASKS] + [("ntk", "ntk", "composition")]


def test_the_per_factor_metrics_come_from_the_metric_facts():
    assert per_factor_groups(["factor_r2.scale", "theory_factor_r2.scale", "factor_slope.x", "factor_r2", "heldout_r2",
                              "class_acc.shape", "factor_r2.x", "nonsense.x", "factor_r2.scale"]) == {
        "factor_r2": ["factor_r2.scale", "factor_r2.x"], "factor_slope": ["factor_slope.x"], "class_acc": ["class_acc.shape"]}
    # factor_r2's mean over the factors is a metric of its own; class_acc has none
    assert factor_columns(records()) == (["factor_r2", "factor_r2.scale", "factor_r2.x", "class_acc.shape"],
                                         ["factor_slope.scale", "factor_slope.x"])


def test_score_and_slope_tables_by_hand():
    scores, slopes = factor_tables(records(), TASKS, EXPECTED)
    assert scores.title == "Held-out score per factor" and slopes.title == "Held-out slope per factor"
    assert scores.headers == ["model", "task", "mean R² ↑", "scale R² ↑", "x R² ↑", "shape accuracy ↑"]
    assert scores.rows == [
        ["cnn", "random", "0.600", "0.500 (theory 0.100)", "0.700 (theory 0.800)", "0.800 (theory 0.500)"],
        ["cnn", "composition", "0.200", "-0.400 (theory 0.100)", "0.800 (theory 0.800)", "0.700 (theory 0.500)"],
        ["ntk", "composition", "0.250 (theory 0.250)", "-1.500 (theory -1.500)", "0.950 (theory 0.950)", "0.400 (theory 0.400)"],
    ]  # the plain task has no factors: no row
    assert slopes.headers == ["model", "task", "scale slope", "x slope"]
    assert slopes.rows == [
        ["cnn", "random", "0.800 (theory 0.200)", "0.900 (theory 1.000)"],
        ["cnn", "composition", "0.300 (theory 0.200)", "1.100 (theory 1.000)"],
        ["ntk", "composition", "-0.010 (theory -0.010)", "1.250 (theory 1.250)"],
    ]
    assert scores.sort_keys[(1, 3)] == pytest.approx(-0.4) and scores.directions[3] == "higher" and slopes.directions[2] == ""
    assert scores.row_meta[2] == {"model": "ntk", "task": "composition", "status": "ok"}
    md = scores.markdown().splitlines()
    assert md[0] == ("| model   | task        | mean R² ↑            | scale R² ↑             | x R² ↑               "
                     "| shape accuracy ↑     |")
    assert md[4] == ("| ntk     | composition | 0.250 (theory 0.250) | -1.500 (theory -1.500) | 0.950 (theory 0.950) "
                     "| 0.400 (theory 0.400) |")
    html = table_html(scores)
    assert "<button type=\"button\">shape accuracy ↑</button>" in html and 'data-v="-0.4"' in html
    assert "R²: held-out R² against the factor's variance over the whole grid." in scores.note
    assert "Slope: held-out slope of prediction vs truth." in slopes.note


def test_a_failed_cell_shows_its_status():
    failed = CellRecord(key="ntk|random|0", task="random", model="ntk", seed=0, status=Status.ERROR, kind="regression",
                        error=CellError(message="boom"))
    scores, _ = factor_tables([*records(), failed], TASKS, [*EXPECTED, ("ntk", "ntk", "random")])
    assert ["ntk", "random", "error", "error", "error", "error"] in scores.rows


def test_leaderboard_csv_gains_the_per_factor_columns():
    frame = leaderboard_frame(records(), TASKS, EXPECTED)
    assert list(frame.columns[-12:]) == [
        "factor_r2", "theory_factor_r2", "factor_r2.scale", "theory_factor_r2.scale", "factor_r2.x", "theory_factor_r2.x",
        "class_acc.shape", "theory_class_acc.shape", "factor_slope.scale", "theory_factor_slope.scale", "factor_slope.x",
        "theory_factor_slope.x"]
    row = frame[(frame.model == "cnn") & (frame.task == "composition")].iloc[0]
    assert row["factor_r2.scale"] == pytest.approx(-0.4) and row["theory_factor_r2.scale"] == pytest.approx(0.1)
    assert row["factor_slope.x"] == pytest.approx(1.1) and row["theory_factor_slope.x"] == pytest.approx(1.0)
    assert math.isnan(row["theory_factor_r2"])  # the cnn's records carry no theory mean
    plain = frame[frame.task == "plain"].iloc[0]
    assert math.isnan(plain["factor_r2.scale"]) and plain["mean"] == pytest.approx(0.5)
    assert str(frame["factor_r2.x"].dtype) == "float64"


def test_a_suite_without_factors_changes_nothing():
    plain = [rec("cnn", "plain", 0, score=0.5)]
    assert factor_tables(plain, ["plain"]) == [] and factor_columns(plain) == ([], [])
    from compbench.report.statistics import CellStats

    assert list(leaderboard_frame(plain, ["plain"]).columns) == list(CellStats.__dataclass_fields__)


def test_the_terminal_shows_the_per_factor_scores():
    models = [SimpleNamespace(id="cnn", group="cnn"), SimpleNamespace(id="ntk", group="ntk")]
    loaded = SimpleNamespace(suite=SimpleNamespace(tasks=[SimpleNamespace(id=t) for t in TASKS]), models=models,
                             tasks_for=lambda m: [SimpleNamespace(id=t) for t in (TASKS if m.id == "cnn" else ["composition"])],
                             task_kinds={t: "regression" for t in TASKS})
    out = io.StringIO()
    print_leaderboard(loaded, records(), [], out)
    text = out.getvalue()
    part = text[text.index("held-out score per factor"):].splitlines()
    assert part[0] == "held-out score per factor (mean over seeds; the model's theory in parentheses)"
    assert part[1].split() == ["model", "task", "mean", "R²", "↑", "scale", "R²", "↑", "x", "R²", "↑", "shape", "accuracy", "↑"]
    assert part[5].split() == ["ntk", "composition", "0.250", "(0.250)", "-1.500", "(-1.500)", "0.950", "(0.950)", "0.400", "(0.400)"]
    assert part[3].split()[:4] == ["cnn", "random", "0.600", "0.500"]  # no theory mean: the value alone
    assert len(part) == 6
    quiet = io.StringIO()
    print_leaderboard(loaded, records(), [], quiet, table=False)
    assert "per factor" not in quiet.getvalue()
