"""`report` states the outcome of what the results directory's last run asked for (#35 items 5 and 23).

A run records in summary.json its profile, the models it added and its seeds override
(`compbench.report.run_config`); a plain `report` rebuilds exactly that, so it can no longer turn a
failing `run --profile alt` green by judging the default profile, or drop a model added with `--model`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from compbench.cli import main
from tiny_suites import NET, kernel_suite

# Under the alt profile the overlap kernel keeps no less than it leaks (slope 0.5/0.5 = 1): `leak` fails there only.
PROFILED = kernel_suite("reportcfg", "leak", relu=False) + "profiles:\n  alt:\n    params: {overlap: {weights: [0.0, 0.5, 1.0]}}\n"



@pytest.fixture
def suite(tmp_path: Path) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(PROFILED, encoding="utf-8")
    return path


def _cli(*argv: str) -> int:
    return main([*argv, "--format", "csv,md", "-q"])


def _verdicts(out: Path) -> list[tuple[str, str, str]]:
    frame = pd.read_csv(out / "expectations.csv")
    return sorted(zip(frame.expectation, frame.subject, frame.verdict))


def test_report_after_a_failing_profile_run_states_that_run(suite, tmp_path, capsys):
    out = str(tmp_path / "out")
    assert _cli("run", "--suite", str(suite), "--results", out) == 0  # the default profile passes
    assert _cli("run", "--suite", str(suite), "--results", out, "--profile", "alt") == 1
    ran = capsys.readouterr().out
    assert "expectations 0/1 pass" in ran
    # A plain report: the alt profile's cells and verdict, not the default profile's green.
    assert _cli("report", "--suite", str(suite), "--results", out) == 1
    said = capsys.readouterr()
    assert "expectations 0/1 pass" in said.out
    assert _verdicts(tmp_path / "out") == [("leak", "overlap", "FAIL")]
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["profile"] == "alt"
    assert f"configuration: profile 'alt', as the last run in {out} asked" in said.out
    assert "with profile 'alt'" in said.err
    assert "| configuration | profile 'alt'" in (tmp_path / "out" / "leaderboard.md").read_text()
    assert abs(pd.read_csv(tmp_path / "out" / "expectations.csv").measured.iloc[0] - 1.0) < 1e-9
    # Another profile is reported only when named, and the report says it is not the last run's.
    assert _cli("report", "--suite", str(suite), "--results", out, "--profile", "default") == 0
    said = capsys.readouterr().out
    assert "expectations 1/1 pass" in said
    assert f"configuration: no profile, as --profile default asks; the last run in {out} used profile 'alt'" in said
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["profile"] is None


def test_a_summary_from_before_the_record_still_reports_as_it_did(suite, tmp_path, capsys):
    out = tmp_path / "out"
    assert _cli("run", "--suite", str(suite), "--results", str(out)) == 0
    assert _cli("run", "--suite", str(suite), "--results", str(out), "--profile", "alt") == 1
    summary = json.loads((out / "summary.json").read_text())
    for key in ("profile", "added_models", "seeds"):  # what summary.json held before it recorded them
        summary.pop(key, None)
    (out / "summary.json").write_text(json.dumps(summary))
    capsys.readouterr()
    # No record of the profile: the default profile, as every report did before.
    assert _cli("report", "--suite", str(suite), "--results", str(out)) == 0
    said = capsys.readouterr().out
    assert "expectations 1/1 pass" in said
    assert _cli("report", "--suite", str(suite), "--results", str(out), "--profile", "alt") == 1


def test_report_after_run_with_an_added_adapter_keeps_its_rows(suite, tmp_path, capsys):
    out = tmp_path / "out"
    assert _cli("run", "--suite", str(suite), "--results", str(out)) == 0
    assert _cli("run", "--suite", str(suite), "--results", str(out), "--model", "kernel", "--model-args", "kernel=relu_ntk") == 0
    models = sorted(set(pd.read_csv(out / "records.csv").model))
    assert models == ["kernel", "overlap"]
    capsys.readouterr()
    assert _cli("report", "--suite", str(suite), "--results", str(out)) == 0
    records = pd.read_csv(out / "records.csv")
    assert sorted(set(records.model)) == ["kernel", "overlap"]
    assert set(records[records.model == "kernel"].task) == {"add", "te"}
    assert "kernel" in set(pd.read_csv(out / "leaderboard.csv").model)
    assert "configuration: no profile, added model kernel, as the last run" in capsys.readouterr().out


def test_report_after_a_file_model_only_run_reports_it_and_refuses_when_its_file_is_gone(suite, tmp_path, capsys,
                                                                                         monkeypatch):
    pytest.importorskip("torch")
    (tmp_path / "net.py").write_text(NET, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    args = ("--suite", str(suite), "--results", "out")
    assert _cli("run", *args, "--model", "net.py:Net", "--model-args", "lr=0.01,steps=30", "--seeds", "2",
                "--device", "cpu") == 0
    capsys.readouterr()
    # Before: "no stored results ... run first". The suite's own model never ran: missing, exit 1 (as run's own report).
    assert _cli("report", *args) == 1
    said = capsys.readouterr()
    assert "no stored results" not in said.err
    assert "2 cell(s) missing from the store, e.g. overlap on add seed 0" in said.err
    records = pd.read_csv("out/records.csv")
    assert sorted(zip(records.model, records.task, records.seed, records.status)) == [
        ("Net", "add", 0, "ok"), ("Net", "add", 1, "ok"), ("Net", "te", 0, "ok"), ("Net", "te", 1, "ok")]  # --seeds 2 kept
    assert f"configuration: no profile, added model Net (from {tmp_path.resolve()}/net.py:Net), --seeds 2, as the last run" \
        in said.out
    added = json.loads(Path("out/summary.json").read_text())["added_models"]
    assert added == [{"id": "Net", "given": "net.py:Net", "reference": f"{tmp_path.resolve()}/net.py:Net",
                      "args": {"lr": 0.01, "steps": 30}, "tags": []}]
    # Its file gone: one line, exit 2, rather than a report without it.
    (tmp_path / "net.py").unlink()
    assert _cli("report", *args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 2 and err.startswith("suite ")  # the suite line, then the one error line
    line = err.splitlines()[1]
    assert line.startswith(f"compbench: out/summary.json: the last run added model Net (from {tmp_path.resolve()}/net.py:Net), "
                           "which cannot be rebuilt")
    assert "no such file" in line and "run the suite again without it" in line


@pytest.mark.slow
def test_evaluate_records_what_it_asked_for_and_report_rebuilds_it(suite, tmp_path, capsys):
    import compbench

    out = tmp_path / "out"
    res = compbench.evaluate(str(suite), models=["kernel"], out=out, profile="alt", report=True,
                             model_args={"kernel": "relu_ntk"})
    assert sorted({r.model for r in res.records}) == ["kernel"]
    assert main(["report", "--suite", str(suite), "--results", str(out), "--format", "csv", "-q"]) == 1
    said = capsys.readouterr()
    assert "with profile 'alt'" in said.err  # the profile evaluate() was given, not the suite's defaults
    records = pd.read_csv(out / "records.csv")
    assert sorted(set(zip(records.model, records.task))) == [("kernel", "add"), ("kernel", "te")]
    assert "1 cell(s) missing from the store" not in said.err and "2 cell(s) missing from the store, e.g. overlap" in said.err


@pytest.mark.slow
def test_a_model_added_as_a_python_object_is_named_not_dropped(suite, tmp_path, capsys):
    torch = pytest.importorskip("torch")
    import compbench

    class Tiny(torch.nn.Module):
        def __init__(self, in_shape, n_out):
            super().__init__()
            self.out = torch.nn.Linear(in_shape[0], n_out)

        def forward(self, x):
            return self.out(x)

    out = tmp_path / "out"
    compbench.evaluate(str(suite), models=[Tiny], out=out, report=True, model_args={"lr": 0.01, "steps": 10}, device="cpu")
    assert main(["report", "--suite", str(suite), "--results", str(out), "--format", "csv", "-q"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[1:] == [f"compbench: {out}/summary.json: the last run (compbench.evaluate) added model 'Tiny' as a Python "
                       "object, which `compbench report` cannot import; report it with evaluate(..., out=..., report=True), "
                       f"or run the suite again without it (`compbench run --suite reportcfg --results {out}`) to report "
                       "without it"]
