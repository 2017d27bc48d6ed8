"""A third-party adapter package (tests/fixtures/compbench_plugin_example), installed with pip and
found through the `compbench.adapters` entry-point group by `compbench list` and `compbench run`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.metadata import EntryPoint
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from compbench.adapters import registry
from compbench.store import ResultStore
from compbench.tasks import make_task

FIXTURE = Path(__file__).parent / "fixtures" / "compbench_plugin_example"
RIDGE, BIAS = 0.01, 0.5
SUITE = f"""\
name: plugin-demo
tasks:
  - {{id: add, family: additive, params: {{anchors: [[4], [4]]}}}}
  - {{id: sym, family: symmetry, params: {{variant: partial_exposure}}}}
models:
  - id: ridge
    adapter: tiny-ridge
    params: {{ridge: {RIDGE}, bias: {BIAS}}}
expectations:
  - {{id: exact, claim: matches_kernel, models: [ridge], tasks: ["*"], tolerance: 1.0e-6, max_abs_diff: 1.0e-6}}
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The plugin installed into a directory of its own (built from a copy: no build files in the repo)."""
    tmp = tmp_path_factory.mktemp("plugin")
    src = tmp / "src"
    shutil.copytree(FIXTURE, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    target = tmp / "site"
    cmd = [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
           "--disable-pip-version-check", "--quiet", "--target", str(target), str(src)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return target


def compbench(site: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    return subprocess.run([sys.executable, "-m", "compbench.cli", *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=300)


def by_hand(family: str, **params) -> tuple[np.ndarray, object]:
    """Kernel ridge regression with x·x' + bias on one-hot inputs, written out with numpy."""
    task = make_task(family, **params)
    x = np.concatenate([np.eye(n)[task.cells[:, c]] for c, n in enumerate(task.n_values)], axis=1)
    K = x @ x.T + BIAS
    tr = task.train_mask
    alpha = np.linalg.solve(K[np.ix_(tr, tr)] + RIDGE * np.eye(tr.sum()), task.y[tr])
    return K[:, tr] @ alpha, task


def test_plugin_is_listed_and_runs_a_suite(site, tmp_path):
    listed = compbench(site, "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    adapters = next(line for line in listed.stdout.splitlines() if line.startswith("adapters:"))
    assert "tiny-ridge" in adapters.split(": ", 1)[1].split(", ")

    (tmp_path / "demo.yaml").write_text(SUITE)
    out = tmp_path / "out"
    run = compbench(site, "run", "--suite", "demo.yaml", "--out", str(out), "--device", "cpu", "--quiet", "--format", "md,csv", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "2 cells run" in run.stdout and "expectations 2/2 pass" in run.stdout

    records = pd.read_csv(out / "records.csv").set_index("task")
    assert set(records.adapter) == {"tiny-ridge"} and set(records.status) == {"ok"}
    assert set(records.theory_kernel) == {"linear(bias=0.5)"} and list(records.seed) == [0, 0]  # deterministic: one seed
    stored = {r["task"]: r for r in ResultStore(out / "store").latest().values()}

    preds, task = by_hand("additive", anchors=[[4], [4]])
    held = ~task.train_mask
    assert np.allclose(stored["add"]["predictions"], preds, rtol=0, atol=1e-9)
    assert np.allclose(stored["add"]["theory_predictions"], preds, rtol=0, atol=1e-9)
    add = records.loc["add"]
    assert add.n_train == 17 and add.n_test == 64
    assert add.heldout_mse == pytest.approx(np.mean((preds[held] - task.y[held]) ** 2), rel=1e-6)
    assert add.slope == pytest.approx(np.polyfit(task.y[held], preds[held], 1)[0], rel=1e-6)
    assert add.theory_max_abs_diff <= 1e-9

    preds, task = by_hand("symmetry", variant="partial_exposure")
    held = ~task.train_mask
    assert np.allclose(stored["sym"]["predictions"], preds, rtol=0, atol=1e-9)
    sym = records.loc["sym"]
    assert sym.heldout_margin == pytest.approx(float(np.mean(preds[held] * task.y[held])), rel=1e-6)
    assert sym.heldout_acc == 1.0

    board = (out / "leaderboard.md").read_text()
    assert "| ridge " in board


def test_docs_show_the_fixture_verbatim():
    """docs/adapters.md's complete example is the tested plugin, not a drifting copy."""
    doc = (Path(__file__).parents[1] / "docs" / "adapters.md").read_text()
    code = (FIXTURE / "compbench_plugin_example" / "__init__.py").read_text()
    body = code.split('"""\n\n', 1)[1]  # without the module docstring
    assert f"```python\n{body}```" in doc
    assert f"```toml\n{(FIXTURE / 'pyproject.toml').read_text()}```" in doc


def test_broken_or_clashing_plugins_warn_and_the_rest_load(monkeypatch):
    """One broken plugin must not hide the others (or break `compbench list`)."""
    eps = [
        EntryPoint("missing-module", "no_such_module_xyz:Adapter", registry.ENTRY_POINT_GROUP),
        EntryPoint("not-an-adapter", "os:getcwd", registry.ENTRY_POINT_GROUP),
        EntryPoint("kernel", "compbench.adapters.mlp:MLPAdapter", registry.ENTRY_POINT_GROUP),
        EntryPoint("good", "compbench.adapters.kernel:KernelAdapter", registry.ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(registry, "entry_points", lambda group: [ep for ep in eps if ep.group == group])
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    kernel_cls = registry._REGISTRY["kernel"]
    name_before = kernel_cls.name
    # registering "good" renames the class it points at; undo that after the test
    monkeypatch.setattr(kernel_cls, "name", name_before)
    with pytest.warns(UserWarning) as caught:
        names = registry.adapter_names()
    messages = [str(w.message) for w in caught]
    assert any("'missing-module'" in m and "ModuleNotFoundError" in m for m in messages)
    assert any("'not-an-adapter'" in m and "not a subclass" in m for m in messages)
    assert any("'kernel'" in m and "taken by" in m for m in messages)
    assert "good" in names and "missing-module" not in names and "not-an-adapter" not in names
    assert registry.get_adapter("kernel") is kernel_cls
