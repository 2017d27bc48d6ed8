"""The per-sample headline (issue #33, items 6 and 8): where a task's cells have several samples (images), its
leaderboard score is the accuracy over samples, as the papers count, named so in the column; else the one over cells.
Every face reads the choice from one place (compbench.records.metric_facts.headline_metric).

The model below is scored on 4 held-out cells of 4 images each, right on 4, 3, 2 and 1 of their images, and its cell
means are right on the first two cells only: accuracy over cells 2/4 = 0.5, over images 10/16 = 0.625.
"""

from __future__ import annotations

import csv
import json
import textwrap
from pathlib import Path

import numpy as np
import pytest
from tiny_suites import cli

from compbench.runner.cells import PreparedTask
from compbench.scoring.score import score_outputs
from compbench.tasks import make_task

MODEL = textwrap.dedent('''
    import numpy as np
    from compbench.adapters import Adapter, AdapterParams, Fitted

    # per held-out cell (in cell order): its 4 images' predictions times the label; the cell mean's sign is the
    # cell's: right, right, wrong, wrong; the images right: 4, 3, 2, 1 of 4
    PATTERN = [[1, 1, 1, 1], [1, 1, 1, -1], [0.1, 0.1, -1, -1], [0.1, -1, -1, -1]]

    class Fixed(Adapter):
        Params = AdapterParams

        def fit_seeds(self, train, evaluate, seeds):
            y = np.asarray(evaluate.y, dtype=float)
            pred = y.copy()
            if len(np.unique(evaluate.cell_ids)) == len(y):  # one sample per cell (te-cells): every cell right
                return [Fitted(pred) for _ in seeds]
            held = sorted(set(np.asarray(evaluate.cell_ids).tolist()) - set(np.asarray(train.cell_ids).tolist()))
            assert len(held) == 4, held
            for cell, signs in zip(held, PATTERN):
                rows = np.flatnonzero(np.asarray(evaluate.cell_ids) == cell)
                assert len(rows) == 4, rows
                pred[rows] = y[rows] * np.asarray(signs)
            return [Fitted(pred) for _ in seeds]
''')

SUITE = textwrap.dedent("""\
    name: per-sample
    seeds: 1
    tasks:
      - id: te
        family: transitive_equivalence
        params: {classes: [2, 2], train_items: [1, 1]}
        encoding: {name: digits, samples_per_cell: 2, eval_samples_per_cell: 4}
      - {id: te-cells, family: transitive_equivalence, params: {classes: [2, 2], train_items: [1, 1]}}
    models:
      - {id: overlap, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}, tasks: [te-cells]}
    """)


@pytest.fixture()
def run(tmp_path: Path) -> tuple[Path, Path, Path]:
    (tmp_path / "fixed.py").write_text(MODEL, encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE, encoding="utf-8")
    out = tmp_path / "results"
    res = cli("run", "--suite", str(suite), "--model", f"{tmp_path / 'fixed.py'}:Fixed", "--model", "overlap",
              "--results", str(out), "--executor", "local")
    assert res.rc == 0, res.text
    return suite, out, tmp_path / "fixed.py"


def test_a_task_with_several_images_per_cell_heads_with_its_accuracy_over_images(run):
    """0.5 over cells, 0.625 over images: the leaderboard (md, csv, html) and the terminal show 0.625 under a column
    that says it is over samples; a one-hot task (one sample per cell) keeps its accuracy over cells."""
    suite, out, _ = run
    records = list(csv.DictReader((out / "records.csv").open(encoding="utf-8")))
    fixed = next(r for r in records if r["model"] == "Fixed" and r["task"] == "te")
    assert float(fixed["heldout_acc"]) == 0.5 and float(fixed["heldout_acc_samples"]) == 0.625

    md = (out / "leaderboard.md").read_text(encoding="utf-8")
    board = md[md.index("## Held-out score"):]
    header = next(line for line in board.splitlines() if line.startswith("| model"))
    assert "te (accuracy over samples ↑)" in header and "te-cells (accuracy ↑)" in header
    row = next(line for line in board.splitlines() if line.startswith("| Fixed"))
    assert "0.625" in row and "0.500" not in row

    frame = {(r["model"], r["task"]): r for r in csv.DictReader((out / "leaderboard.csv").open(encoding="utf-8"))}
    assert frame[("Fixed", "te")]["metric"] == "heldout_acc_samples" and float(frame[("Fixed", "te")]["mean"]) == 0.625
    assert frame[("overlap", "te-cells")]["metric"] == "heldout_acc"
    assert "te (accuracy over samples ↑)" in (out / "leaderboard.html").read_text(encoding="utf-8")

    shown = cli("report", "--suite", str(suite), "--results", str(out))  # the terminal's compact leaderboard
    assert shown.rc == 0, shown.text
    assert "accuracy over samples" in shown.out and "0.625" in shown.out


def test_check_compare_and_history_read_the_accuracy_over_images(run, tmp_path):
    """`baseline record` records the per-sample headline (0.625) and `check` gates on it; `compare` pairs the cell on
    it and `history` shows it."""
    suite, out, model = run
    base = tmp_path / "base.json"
    rec = cli("baseline", "record", "--suite", str(suite), "--model", f"{model}:Fixed", "--model", "overlap",
              "--results", str(out), "--out", str(base))
    assert rec.rc == 0, rec.text
    cell = json.loads(base.read_text(encoding="utf-8"))["cells"]["Fixed/te"]["metrics"]
    assert cell["heldout_acc_samples"]["values"] == [0.625] and "heldout_acc" not in cell
    checked = cli("check", "--suite", str(suite), "--model", f"{model}:Fixed", "--model", "overlap",
                  "--results", str(out), "--baseline", str(base), "-v")
    assert checked.rc == 0, checked.text
    assert any("Fixed/te" in line and "heldout_acc_samples" in line for line in checked.out.splitlines()), checked.out

    compared = cli("compare", str(out), str(out), "--format", "json", "--out", str(tmp_path))
    assert compared.rc == 0, compared.text
    cells = json.loads((tmp_path / "compare.json").read_text(encoding="utf-8"))["cells"]
    pair = next(c for c in cells if c["model"] == "Fixed" and c["task"] == "te")
    assert pair["metric"] == "heldout_acc_samples" and pair["a"] == pair["b"] == 0.625

    history = cli("history", "--suite", str(suite), "--results", str(out), "--format", "json")
    assert history.rc == 0, history.text
    rows = {(r["model"], r["task"]): r for r in json.loads(history.out)["rows"]}
    assert rows[("Fixed", "te")]["metric"] == "heldout_acc_samples" and rows[("Fixed", "te")]["mean"] == 0.625
    assert rows[("Fixed", "te-cells")]["metric"] == "heldout_acc"


def test_the_theory_twin_is_scored_over_samples_too():
    """A theory prediction per image gives the per-sample headline its theory twin (the leaderboard's `(theory x)`):
    one held-out cell's four images, the theory right on 1 of them, the others all right: 13 of 16."""
    data = make_task("transitive_equivalence", classes=[2, 2], train_items=[1, 1])
    task = PreparedTask(entry=None, data=data)
    test = np.flatnonzero(data.test_mask)
    ids = np.repeat(np.arange(len(data.cells)), 4)
    y = np.asarray(data.y, dtype=np.float64)[ids]
    theory = y.copy()
    first = np.flatnonzero(ids == test[0])
    theory[first] = y[first] * np.array([1.0, -1.0, -1.0, -1.0])
    m = score_outputs(task, y, theory, ids)["metrics"]
    assert m["heldout_acc_samples"] == 1.0 and m["theory_acc_samples"] == pytest.approx(13 / 16)


def test_the_context_dependence_plot_draws_the_headline_accuracy(run):
    """The cd-blocks plot (linked from the shortcut claims) draws each block's headline: 0.625 over images, not 0.5."""
    from compbench.report.figures import cd_blocks
    from compbench.store.records import ResultStore

    _, out, _ = run
    store = ResultStore(out / "store")
    try:
        records = [r for r in store if r.model == "Fixed" and r.task == "te"]
    finally:
        store.close()
    fig = cd_blocks(records, ["te"])
    ax = fig.axes[0]
    assert [round(p.get_height(), 6) for p in ax.patches] == [0.625]
    assert "over samples" in ax.get_ylabel()


def test_the_site_history_draws_the_headline_accuracy(run):
    """The site's history plots (compbench site) read each task's headline across runs: 0.625 over images on te."""
    from compbench.site.history import run_means
    from compbench.store.records import ResultStore

    _, out, _ = run
    store = ResultStore(out / "store")
    try:
        runs = store.runs()
    finally:
        store.close()
    means = run_means(out, runs)
    assert means["heldout_acc_samples"][("Fixed", "te")] == [0.625]
    assert ("Fixed", "te") not in means.get("heldout_acc", {})


def test_chance_and_kernel_claims_judge_the_headline_accuracy_over_images(tmp_path):
    """at_chance and beats_kernel read the accuracy the leaderboard heads with: over images, 0.625, not 0.5 over cells.
    Within 0.1 of chance over cells, 0.125 from it over images: the claim fails, and says which accuracy it read."""
    (tmp_path / "fixed.py").write_text(MODEL.replace("class Fixed(Adapter):", "class Fixed(Adapter):\n    tags = ('lazy',)"),
                                       encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE + textwrap.dedent("""\
          - {id: fixed, adapter: fixed.py:Fixed, tasks: [te]}
        expectations:
          - {id: chance, source: {paper: compbench, threshold: a test fixture}, claim: at_chance, models: [fixed],
             tasks: [te], tolerance: 0.1}
          - {id: beats, source: {paper: compbench, threshold: a test fixture}, claim: beats_kernel, models: [fixed],
             tasks: [te], tolerance: 0.0}
        """), encoding="utf-8")
    out = tmp_path / "results"
    res = cli("run", "--suite", str(suite), "--results", str(out), "--executor", "local", "--task", "te")
    assert (out / "expectations.csv").exists(), res.text
    verdicts = {r["expectation"]: r for r in csv.DictReader((out / "expectations.csv").open(encoding="utf-8"))}
    chance = verdicts["chance"]
    assert float(chance["measured"]) == pytest.approx(0.625), chance
    assert chance["verdict"] == "FAIL" and chance["detail"].startswith("held-out accuracy over samples"), chance
    assert "theory_acc_samples" in verdicts["beats"]["detail"], verdicts["beats"]  # the headline's theory twin
    assert res.rc == 1, res.text
