"""docs/how-to/adapters.md's network adapter, followed as written: a NetworkAdapter on vector inputs validates,
then trains with its empirical-NTK theory (issue #38: it used to pass `validate` and fail every cell),
named by its file in a suite and by an entry point of an installed package."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from doc_blocks import ROOT, blocks, env, run_blocks

pytest.importorskip("torch")

DOC = ROOT / "docs" / "how-to" / "adapters.md"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("adapter-docs")


@pytest.fixture(scope="module")
def ran(work) -> list[tuple[str, subprocess.CompletedProcess]]:
    return run_blocks(DOC, work)


def _records(out: Path) -> list:
    from compbench.store import ResultStore

    return sorted(ResultStore(out / "store"), key=lambda r: (r.task, r.seed))


def test_the_section_has_its_blocks():
    assert [k for k, _ in blocks(DOC)] == ["my_net.py", "my-suite.yaml", "command", "command"]


@pytest.mark.slow
def test_the_documented_network_adapter_validates_and_every_cell_trains(work, ran):
    (_, validated), (_, run) = ran
    assert validated.returncode == 0, validated.stderr
    assert "OK: suite 'my-suite', 2 tasks, 1 models (after sweeps), 4 cells" in validated.stdout
    assert run.returncode == 0, run.stdout + run.stderr
    assert "4 cells run, 0 reused from the cache" in run.stdout and "0 failed" in run.stdout
    recs = _records(work / "res" / "my-suite")
    assert [(r.task, r.seed, r.status.value) for r in recs] == [("add", 0, "ok"), ("add", 1, "ok"), ("te", 0, "ok"), ("te", 1, "ok")]
    for r in recs:
        assert r.adapter == "my_net.py:MyNet" and r.theory_kernel == "empirical_ntk_at_init"
        d = {"add": 9 + 9, "te": 4 + 4}[r.task]  # one-hot inputs → width 32 → 1
        assert r.info["n_params"] == d * 32 + 32 + 32 + 1
        assert np.isfinite(r.metrics["theory_r2"])
    assert min(r.metrics["heldout_r2"] for r in recs if r.task == "add") > 0.8  # it trained, not only ran


@pytest.mark.slow
def test_the_same_adapter_from_an_entry_point(work, ran, tmp_path):
    """The doc's other route: a package declares it in compbench.adapters and the suite names the entry point."""
    src = tmp_path / "pkg"
    src.mkdir()
    (src / "my_net.py").write_text(dict(blocks(DOC))["my_net.py"], encoding="utf-8")
    (src / "pyproject.toml").write_text(textwrap.dedent('''
        [build-system]
        requires = ["setuptools>=61"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "my-net"
        version = "0.1.0"

        [project.entry-points."compbench.adapters"]
        my-net = "my_net:MyNet"

        [tool.setuptools]
        py-modules = ["my_net"]
    '''), encoding="utf-8")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--disable-pip-version-check", "--quiet", "--target", str(site), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    suite = tmp_path / "plugin-suite.yaml"
    suite.write_text(dict(blocks(DOC))["my-suite.yaml"].replace("adapter: my_net.py:MyNet", "adapter: my-net"), encoding="utf-8")
    out = tmp_path / "res"
    for argv in (["validate", str(suite)], ["run", "--suite", str(suite), "--results", str(out), "-q"]):
        done = subprocess.run([sys.executable, "-m", "compbench", *argv], cwd=tmp_path, env=env(site),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
    plugin, file = _records(out), _records(work / "res" / "my-suite")
    assert [r.adapter for r in plugin] == ["my-net"] * 4
    for a, b in zip(plugin, file):  # the same class, so the same numbers
        np.testing.assert_array_equal(a.predictions, b.predictions)
        np.testing.assert_array_equal(a.theory_predictions, b.theory_predictions)
