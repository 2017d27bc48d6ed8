"""CLI end to end: a tiny suite writes the leaderboard, records and verdicts; errors are clean."""

from __future__ import annotations

import pandas as pd
import pytest

from compbench.cli import main
from compbench.tasks import make_task
from tiny_suites import TINY


@pytest.mark.slow
def test_run_writes_leaderboard_records_and_verdicts(tmp_path, capsys):
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY)
    out = tmp_path / "out"
    code = main(["run", "--suite", str(suite), "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr()
    records = pd.read_csv(out / "records.csv")
    # kernel: 1 seed (deterministic) × 2 tasks; mlp: 2 seeds × 2 tasks
    assert sorted(zip(records.model, records.task, records.seed)) == [
        ("lazy", "add", 0), ("lazy", "add", 1), ("lazy", "te", 0), ("lazy", "te", 1),
        ("overlap", "add", 0), ("overlap", "te", 0),
    ]
    assert (records.status == "ok").all()
    row = records[(records.model == "overlap") & (records.task == "add")].iloc[0]
    assert abs(row.slope - 0.4 / 0.6) < 1e-9  # closed form S/(1-S) for p = 1
    assert row.n_train == 17 and row.n_test == 64
    board = (out / "leaderboard.md").read_text()
    assert "| model" in board and "| overlap " in board and "| lazy " in board
    assert board.count("PASS") == 4  # exact (2 tasks), leak, chance
    verdicts = pd.read_csv(out / "expectations.csv")
    assert set(verdicts.verdict) == {"PASS"}

    # Re-running reuses every cell from the cache.
    capsys.readouterr()
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet"]) == 0
    assert "0 cells run, 6 reused from the cache" in capsys.readouterr().out


@pytest.mark.slow
def test_failing_expectation_gives_exit_code_1(tmp_path, capsys):
    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY + "  - {id: impossible, source: {paper: compbench, threshold: a test fixture}, claim: beats_kernel, models: [overlap], tasks: [te]}\n")
    assert main(["run", "--suite", str(suite), "--out", str(tmp_path / "o"), "--quiet"]) == 1
    assert "FAIL impossible [beats_kernel] overlap on te" in capsys.readouterr().out


def test_missing_suite_and_bad_yaml_are_clean_errors(tmp_path, capsys):
    assert main(["run", "--suite", str(tmp_path / "none.yaml")]) == 2
    assert "no such suite file" in capsys.readouterr().err
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed\n")
    assert main(["validate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:" in err and "invalid YAML" in err and "Traceback" not in err


def test_list_and_validate(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "kernel-limits" in out and "transitive_equivalence" in out and "mlp" in out
    from compbench.suite import bundled_dir

    assert main(["validate", str(bundled_dir("suites") / "kernel-limits.yaml")]) == 0
    assert "OK" in capsys.readouterr().out


def test_list_and_validate_do_not_import_torch():
    import subprocess
    import sys

    from compbench.suite import bundled_dir

    code = (
        "import sys; from compbench.cli import main; "
        f"main(['list']); main(['validate', {str(bundled_dir('suites') / 'kernel-limits.yaml')!r}]); "
        "print('TORCH', 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "TORCH False" in out


def test_model_flag_adds_an_adapter_that_is_not_in_the_suite(tmp_path, capsys):
    import numpy as np

    from compbench.adapters import Adapter, Fitted, register_adapter

    @register_adapter("mean-of-train")
    class MeanOfTrain(Adapter):
        """Predicts the mean training target everywhere (one seed suffices)."""

        deterministic = True

        def fit_seeds(self, train, evaluate, seeds):
            return [Fitted(np.full(len(evaluate), float(np.mean(train.y)))) for _ in seeds]

    suite = tmp_path / "tiny.yaml"
    suite.write_text(TINY)
    out = tmp_path / "out"
    code = main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--model", "mean-of-train"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "adding adapter 'mean-of-train' with its default parameters on every task of tiny" in printed
    records = pd.read_csv(out / "records.csv")
    assert sorted(zip(records.model, records.task)) == [("mean-of-train", "add"), ("mean-of-train", "te")]
    task = make_task("additive", anchors=[[4], [4]])  # held-out truth minus the training mean (0)
    expected = np.mean((task.y[~task.train_mask] - task.y[task.train_mask].mean()) ** 2)
    assert records[records.task == "add"].heldout_mse.iloc[0] == pytest.approx(expected)

    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--model", "kernel"]) == 2
    assert "adapter 'kernel' has no usable defaults" in capsys.readouterr().err
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--model", "nothing-like-it"]) == 2
    assert "matches no model of suite tiny and no adapter (models: overlap, lazy" in capsys.readouterr().err
