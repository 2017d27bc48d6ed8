"""A documentation page's marked blocks, run as written: `<!-- file: NAME -->` blocks are written to a
folder, `<!-- command -->` blocks run there as `python -m compbench ...`, `<!-- python -->` blocks as scripts."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"<!-- (file: (?P<name>\S+)|command|python) -->\n```\w+\n(?P<body>.*?)```", re.S)
# The commands that write a results directory: each suite's goes under the folder's res/, never results/.
WRITES_RESULTS = {"run", "report", "check", "baseline"}


def blocks(doc: Path) -> list[tuple[str, str]]:
    """(kind or file name, body) of every marked block of `doc`, in order."""
    return [(m.group("name") or m.group(1), m.group("body")) for m in BLOCK.finditer(doc.read_text(encoding="utf-8"))]


def env(*paths: Path) -> dict[str, str]:
    """This checkout (and `paths`) first on PYTHONPATH, so subprocesses import its compbench."""
    extra = [str(p) for p in paths] + [str(ROOT), os.environ.get("PYTHONPATH", "")]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(extra).rstrip(os.pathsep)}


def run_blocks(doc: Path, work: Path) -> list[tuple[str, subprocess.CompletedProcess]]:
    """Every block of `doc` run in `work`, in the page's order: (kind, finished process) per command and script."""
    out = []
    for kind, body in blocks(doc):
        if kind == "command":
            argv = shlex.split(body.strip())
            assert argv[0] == "compbench"
            if argv[1] in WRITES_RESULTS:
                suite = Path(argv[argv.index("--suite") + 1])
                argv += ["--results", str(work / "res" / suite.stem)]
            done = subprocess.run([sys.executable, "-m", "compbench", *argv[1:]],
                                  cwd=work, env=env(), capture_output=True, text=True, timeout=600)
        elif kind == "python":
            done = subprocess.run([sys.executable, "-c", body], cwd=work, env=env(), capture_output=True, text=True, timeout=600)
        else:
            (work / kind).write_text(body, encoding="utf-8")
            continue
        out.append((kind, done))
    return out
