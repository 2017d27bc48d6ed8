"""A cached re-run does not rewrite the report: a writer runs again only when what it reads changed."""

from __future__ import annotations

import pytest

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd

from compbench.cli import main
from compbench.report.publish import MANIFEST_FILE
from tiny_suites import kernel_suite

SUITE = kernel_suite("cachey", "chance")
PAST = 1_000_000_000  # 2001: a file rewritten by the run cannot keep this mtime


def _report_files(out: Path) -> list[Path]:
    return sorted(p for p in out.rglob("*") if p.is_file() and "store" not in p.parts and ".report" not in p.parts
                  and p.name not in ("summary.json", ".compbench"))  # the run's facts and the directory's claim marker


def _age(files: list[Path]) -> dict[Path, bytes]:
    """Set every file's mtime to PAST; return its bytes."""
    for p in files:
        os.utime(p, ns=(PAST * 10**9, PAST * 10**9))
    return {p: p.read_bytes() for p in files}


def _untouched(files: list[Path]) -> set[str]:
    return {p.name for p in files if p.stat().st_mtime_ns == PAST * 10**9}


def _run(suite: Path, out: Path, capsys) -> str:
    capsys.readouterr()
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet"]) == 0
    return capsys.readouterr().out


def test_warm_run_leaves_every_report_file_untouched_and_says_so(tmp_path, capsys):
    suite, out = tmp_path / "cachey.yaml", tmp_path / "out"
    suite.write_text(SUITE)
    first = _run(suite, out, capsys)
    assert "report unchanged" not in first
    files = _report_files(out)
    names = {p.name for p in files}
    assert {"leaderboard.md", "leaderboard.html", "records.csv", "predictions.parquet", "theory.csv"} <= names
    assert any(p.suffix == ".svg" for p in files) and any(p.suffix == ".png" for p in files)
    before = _age(files)
    second = _run(suite, out, capsys)
    assert "0 cells run, 4 reused from the cache" in second
    assert second.rstrip().splitlines()[-1] == "report unchanged: 5 writers skipped (md, csv, html, png, predictions; inputs identical)"
    assert _untouched(files) == names
    assert {p: p.read_bytes() for p in files} == before
    # The page keeps describing the run that produced its numbers, not the cached re-run.
    board = (out / "leaderboard.md").read_text()
    assert re.search(r"\| cells run +\| 4 +\|", board) and re.search(r"\| cells cached +\| 0 +\|", board)
    assert json.loads((out / "summary.json").read_text())["n_cached"] == 4


@pytest.mark.slow
def test_deleting_one_file_rewrites_only_its_writer(tmp_path, capsys):
    suite, out = tmp_path / "cachey.yaml", tmp_path / "out"
    suite.write_text(SUITE)
    _run(suite, out, capsys)
    files = _report_files(out)
    before = _age(files)
    (out / "theory.csv").unlink()
    svg = next(p for p in files if p.suffix == ".svg")
    svg.unlink()  # a plot's SVG is written beside its PNG: losing it redraws that plot (the others are intact)
    text = _run(suite, out, capsys)
    assert text.rstrip().splitlines()[-1] == "report partly rewritten: 3 writers skipped (md, html, predictions; inputs identical)"
    rewritten = {"leaderboard.csv", "theory.csv", "records.csv", "expectations.csv", svg.name, svg.with_suffix(".png").name,
                 "manifest.json"}
    assert _untouched(files) == {p.name for p in files} - rewritten
    assert {p: p.read_bytes() for p in files} == before  # rewritten from the same inputs: the same bytes


@pytest.mark.slow
def test_changing_a_model_rewrites_the_report(tmp_path, capsys):
    suite, out = tmp_path / "cachey.yaml", tmp_path / "out"
    suite.write_text(SUITE)
    _run(suite, out, capsys)
    files = _report_files(out)
    before = _age(files)
    suite.write_text(SUITE.replace("weights: [0.0, 0.4, 1.0]", "weights: [0.0, 0.2, 1.0]"))
    text = _run(suite, out, capsys)
    assert "2 cells run, 2 reused from the cache" in text and "report unchanged" not in text and "skipped" not in text.splitlines()[-1]
    for name in ("records.csv", "predictions.parquet", "leaderboard.md", "leaderboard.html"):
        path = out / name
        assert path.stat().st_mtime_ns != PAST * 10**9 and path.read_bytes() != before[path], name
    # overlap kernel's slope on additive is S/(1-S): 0.4/0.6 before, 0.2/0.8 now
    records = pd.read_csv(out / "records.csv")
    slope = records[(records.model == "overlap") & (records.task == "add")].slope.iloc[0]
    assert abs(slope - 0.2 / 0.8) < 1e-9


def test_report_command_after_a_run_reuses_or_rewrites(tmp_path, capsys):
    suite, out = tmp_path / "cachey.yaml", tmp_path / "out"
    suite.write_text(SUITE)
    _run(suite, out, capsys)
    before = _age(_report_files(out))
    (out / "leaderboard.md").unlink()
    assert main(["report", "--suite", str(suite), "--out", str(out)]) == 0
    lines = capsys.readouterr().out.rstrip().splitlines()
    assert lines[-1] == "report partly rewritten: 4 writers skipped (csv, html, png, predictions; inputs identical)"
    assert (out / "leaderboard.md").read_bytes() != b"" and (out / "leaderboard.md").stat().st_mtime_ns != PAST * 10**9
    assert (out / "records.csv").read_bytes() == before[out / "records.csv"]


def test_a_damaged_manifest_rewrites_everything(tmp_path, capsys):
    suite, out = tmp_path / "cachey.yaml", tmp_path / "out"
    suite.write_text(SUITE)
    _run(suite, out, capsys)
    files = _report_files(out)
    _age(files)
    (out / MANIFEST_FILE).write_text("{not json")
    text = _run(suite, out, capsys)
    assert "skipped" not in text.rstrip().splitlines()[-1]
    assert _untouched([p for p in files if p.parent.name != "plots"]) == set()
    assert json.loads((out / MANIFEST_FILE).read_text()).keys() == {"md", "csv", "html", "png", "predictions"}


def test_a_new_version_of_a_library_the_report_writes_with_rewrites_it(tmp_path, capsys, monkeypatch):
    """numpy, pandas, matplotlib and pyarrow (the parquet writer) each enter the report's inputs: another version of any
    of them rewrites the report; the same versions leave it cached."""
    import importlib

    publish = importlib.import_module("compbench.report.publish")  # the module (the package exports a function of its name)

    suite, out = tmp_path / "cachey.yaml", tmp_path / "out"
    suite.write_text(SUITE)
    _run(suite, out, capsys)
    assert "report unchanged" in _run(suite, out, capsys)
    real = publish._lib_version
    for lib in ("numpy", "pandas", "matplotlib", "pyarrow"):
        monkeypatch.setattr(publish, "_lib_version", lambda name, lib=lib: "0.0-other" if name == lib else real(name))
        assert "report unchanged" not in _run(suite, out, capsys), lib
        monkeypatch.setattr(publish, "_lib_version", real)
        _run(suite, out, capsys)  # back to the installed versions: rewritten once more


def test_the_report_digest_reads_every_prediction_of_a_vector_output_exactly():
    # A vector output per cell (slot-decoder: 729 cells x 256 outputs) is hashed row by row as binary floats, not as
    # JSON: the digest must still see one changed output, a changed shape and a None, and only those.
    from compbench.report.publish import _array_bytes

    rows = [[0.1 * i + j for j in range(4)] for i in range(3)]
    same = [list(r) for r in rows]
    changed = [list(r) for r in rows]
    changed[2][3] = float(np.nextafter(changed[2][3], np.inf))  # one ulp
    reshaped = [rows[0] + rows[1][:2], rows[1][2:] + rows[2]]  # the same 12 numbers in rows of 6
    with_none = [list(r) for r in rows]
    with_none[1][1] = None
    flat = [x for r in rows for x in r]
    digests = [_array_bytes(v) for v in (rows, changed, reshaped, with_none, flat, None, [], [[]])]
    assert _array_bytes(same) == digests[0]
    assert len(set(digests)) == len(digests)
    assert _array_bytes(with_none) != _array_bytes([[x if x is not None else float("nan") for x in r] for r in with_none])
    # predictions and theory are hashed one after the other: where one ends is part of the bytes
    a, b = 0.5, 2.0
    assert _array_bytes([a, b]) + _array_bytes([b]) != _array_bytes([a]) + _array_bytes([b, b])
    assert _array_bytes([[10**400]]) != _array_bytes([[1e308]])  # too large for a float: JSON, not an error
