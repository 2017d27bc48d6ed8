"""The documentation: the site builds with no broken link, the README stays a short front page, and the
reference pages name every flag and every report column that the code has."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

# Pages a newcomer is sent to from the README and the site's home; a move must update the links (and this list).
KEY_PAGES = [
    "index.html",
    "tutorials/evaluate-your-architecture/index.html",
    "tutorials/ci/index.html",
    "how-to/network-adapter/index.html",
    "how-to/extending/index.html",
    "reference/commands/index.html",
    "reference/output-files/index.html",
    "reference/guarantees/index.html",
    "reference/api/index.html",
    "explanation/theory/index.html",
    "explanation/suites/index.html",
    "performance/index.html",
]


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings") is None,
                    reason="mkdocs is not installed (pip install -e '.[docs]')")
def test_the_site_builds_strictly_with_its_key_pages(tmp_path):
    """`mkdocs build --strict`: a broken link or anchor (mkdocs.yml's `validation`) fails it, as in .ci/run."""
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1",
           "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for page in KEY_PAGES:
        assert (site / page).is_file(), page
    api = (site / "reference/api/index.html").read_text(encoding="utf-8")
    for name in ("compbench.api.evaluate", "compbench.outcome", "compbench.testing", "compbench.adapters.base.Adapter",
                 "compbench.claims.base.Claim", "compbench.tasks.base.TaskData", "compbench.report.writers.Reporter"):
        assert f'id="{name}"' in api, f"the API reference lost {name}"


def test_readme_is_a_short_front_page_with_the_ci_test_command():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode("utf-8")) <= 15_000  # issue #38: the front page, not the manual
    test = text.split("\n## Test\n", 1)[1]
    assert ("pip install -e '.[test]' && pytest -n auto -m \"not slow\" && pytest -n auto --dist worksteal -m slow\n"
            in test and 'pytest -m "not slow"' in test)
    for name in ("THEORY.md", "LITERATURE.md", "REFERENCE.md", "DESIGN.md"):  # not in the repository
        assert name not in text, name


def test_readme_links_resolve():
    """Relative links of the README (rendered by GitHub and the package index, outside the site's link check)."""
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    assert targets
    for target in targets:
        if "://" not in target:
            assert (ROOT / target).exists(), target


def _flags(parser: argparse.ArgumentParser) -> set[str]:
    out = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                out |= _flags(sub)
        else:
            out |= {o for o in action.option_strings if o.startswith("--") and o != "--help"}
    return out


def test_commands_reference_names_every_flag():
    from compbench.cli import build_parser

    page = (DOCS / "reference" / "commands.md").read_text(encoding="utf-8")
    missing = sorted(f for f in _flags(build_parser()) if f"`{f}" not in page and f"{f} " not in page and f"[{f}" not in page)
    assert not missing, f"docs/reference/commands.md does not name {missing}"


def test_output_files_reference_names_every_column():
    """Each column the CSV writers produce (and each summary.json key) is described in docs/reference/output-files.md."""
    from compbench.claims import Verdict
    from compbench.records.cell import _FLAT_FIELDS
    publish = importlib.import_module("compbench.report.publish")  # the module: compbench.report re-exports the function
    from compbench.report.statistics import CellStats, TheoryStats
    from compbench.report.predictions import PREDICTION_COLUMNS
    from compbench.records.metric_facts import METRICS, PER_FACTOR

    page = (DOCS / "reference" / "output-files.md").read_text(encoding="utf-8")
    # summary.json's keys: the suite's name and what publish keeps of the run's summary
    SUMMARY_KEYS = ["suite", *publish.SUMMARY_KEYS]
    assert len(SUMMARY_KEYS) > 5
    columns = {f.name for cls in (CellStats, TheoryStats, Verdict) for f in fields(cls)}
    columns |= {*_FLAT_FIELDS, *METRICS, *PREDICTION_COLUMNS, *SUMMARY_KEYS, "error", "error_stage", "verdict", "output",
                "y", "prediction", "theory"}
    columns |= {f"{base}.<factor>" for base in PER_FACTOR}
    missing = sorted(c for c in columns if f"`{c}`" not in page)
    assert not missing, f"docs/reference/output-files.md does not describe {missing}"
