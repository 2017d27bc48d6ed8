"""docs/tutorials/evaluate-your-architecture.md, run as written: its file, its commands and its Python."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "tutorials" / "evaluate-your-architecture.md"
BLOCK = re.compile(r"<!-- (file: (?P<name>\S+)|command|python) -->\n```\w+\n(?P<body>.*?)```", re.S)


def blocks() -> list[tuple[str, str]]:
    """(kind or file name, body) of every marked block, in order."""
    return [(m.group("name") or m.group(1), m.group("body")) for m in BLOCK.finditer(DOC.read_text(encoding="utf-8"))]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}


@pytest.fixture(scope="module")
def ran(tmp_path_factory) -> list[tuple[str, subprocess.CompletedProcess]]:
    """Every block run in one fresh directory, in the page's order; commands write their results to `res/`."""
    work = tmp_path_factory.mktemp("tutorial")
    out = []
    for kind, body in blocks():
        if kind == "command":
            argv = shlex.split(body.strip())
            assert argv[0] == "compbench"
            done = subprocess.run([sys.executable, "-m", "compbench", *argv[1:], "--results", str(work / "res")],
                                  cwd=work, env=_env(), capture_output=True, text=True, timeout=600)
        elif kind == "python":
            done = subprocess.run([sys.executable, "-c", body], cwd=work, env=_env(), capture_output=True, text=True, timeout=600)
        else:
            (work / kind).write_text(body, encoding="utf-8")
            continue
        out.append((kind, done))
    return out


def test_the_page_has_its_blocks():
    kinds = [k for k, _ in blocks()]
    assert kinds == ["gated_mlp.py", "command", "command", "python"]


def test_every_block_runs(ran):
    for kind, done in ran:
        assert done.returncode == 0, f"{kind}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        assert "Traceback" not in done.stderr


def test_the_shown_output_is_what_the_command_prints(ran):
    shown = re.search(r"--model-tags rich\n```\n\n```\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S).group(1)
    printed = ran[1][1].stdout
    for line in shown.strip().splitlines():
        assert line in printed, f"the page shows {line!r}; the command printed:\n{printed}"


def test_the_first_command_adds_the_file_model_with_its_theory(ran):
    out = ran[0][1].stdout
    assert "adding model 'GatedMLP' from gated_mlp.py:GatedMLP" in out
    # the model's row in the compact leaderboard, with a score for both tasks
    row = next(line for line in out.splitlines() if line.startswith("GatedMLP "))
    assert len(re.findall(r"\d\.\d{3}", row)) == 2


def test_the_python_block_prints_the_results_it_describes(ran):
    out = ran[2][1].stdout
    assert "<compbench.Results kernel-limits: 4 cells (4 ok); expectations 1/1 pass>" in out
    assert "GatedMLP" in out and "add-extrap" in out and "te" in out
