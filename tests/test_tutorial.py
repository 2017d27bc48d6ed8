"""docs/tutorials/evaluate-your-architecture.md, run as written: its file, its commands and its Python."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from doc_blocks import blocks as doc_blocks
from doc_blocks import run_blocks

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "tutorials" / "evaluate-your-architecture.md"


def blocks() -> list[tuple[str, str]]:
    """(kind or file name, body) of every marked block, in order."""
    return doc_blocks(DOC)


@pytest.fixture(scope="module")
def tutorial(once_across_workers) -> tuple[Path, list[tuple[str, object]]]:
    """Every block run in one fresh directory, in the page's order (once per session, whichever worker asks first);
    commands write their results under `res/`."""
    return once_across_workers("tutorial", lambda work: run_blocks(DOC, work))


@pytest.fixture(scope="module")
def work(tutorial) -> Path:
    return tutorial[0]


@pytest.fixture(scope="module")
def ran(tutorial) -> list[tuple[str, object]]:
    return tutorial[1]


def test_the_page_has_its_blocks():
    kinds = [k for k, _ in blocks()]
    assert kinds == ["gated_mlp.py", "command", "command", "python", "gated_adapter.py", "my-suite.yaml", "command", "command", "command"]


@pytest.mark.slow
def test_every_block_runs(ran):
    for kind, done in ran:
        assert done.returncode == 0, f"{kind}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_the_shown_output_is_what_the_command_prints(ran):
    shown = re.search(r"--model-tags rich\n```\n\n```\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S).group(1)
    printed = ran[1][1].stdout
    for line in shown.strip().splitlines():
        assert line in printed, f"the page shows {line!r}; the command printed:\n{printed}"


@pytest.mark.slow
def test_the_first_command_adds_the_file_model_with_its_theory(ran):
    out = ran[0][1].stdout
    assert "adding model 'GatedMLP' from gated_mlp.py:GatedMLP" in out
    # the model's row in the compact leaderboard, with a score for both tasks
    row = next(line for line in out.splitlines() if line.startswith("GatedMLP "))
    assert len(re.findall(r"\d\.\d{3}", row)) == 2


@pytest.mark.slow
def test_the_python_block_prints_the_results_it_describes(ran):
    out = ran[2][1].stdout
    assert "<compbench.Results kernel-limits: 4 cells (4 ok); expectations 1/1 pass>" in out
    assert "GatedMLP" in out and "add-extrap" in out and "te" in out



@pytest.mark.slow
def test_a_suite_names_the_file_model_and_its_module_adapter_and_ci_checks_them(ran, work):
    """The section "In a suite, a package and CI": both routes validate, record a baseline and pass its check."""
    import json

    (_, validated), (_, recorded), (_, checked) = ran[3:]
    assert "OK: suite 'my-suite', 1 tasks, 2 models (after sweeps), 4 cells" in validated.stdout
    assert "my-suite: 4 cells run" in recorded.stdout and "wrote baseline my-baseline.json: 2 cells" in recorded.stdout
    assert "my-suite: 0 cells run, 4 reused from the cache" in checked.stdout
    assert "check my-suite against my-baseline.json: 2 cells, " in checked.stdout and checked.stdout.count(": passed") == 1
    cells = json.loads((work / "my-baseline.json").read_text())["cells"]
    assert sorted(cells) == ["gated-adapter/add", "gated/add"]
    # The ModuleAdapter with the module as its factory is the file model: the same numbers, seed for seed.
    assert cells["gated/add"]["metrics"] == cells["gated-adapter/add"]["metrics"]
    assert cells["gated/add"]["metrics"]["heldout_r2"]["mean"] > 0.5
