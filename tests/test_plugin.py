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
from tiny_suites import cli_process

FIXTURE = Path(__file__).parent / "fixtures" / "compbench_plugin_example"
RIDGE, BIAS = 0.01, 0.5


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
    return cli_process(*args, path=(site,), cwd=cwd, timeout=300)


def by_hand(family: str, **params) -> tuple[np.ndarray, object]:
    """Kernel ridge regression with x·x' + bias on one-hot inputs, written out with numpy."""
    task = make_task(family, **params)
    x = np.concatenate([np.eye(n)[task.cells[:, c]] for c, n in enumerate(task.n_values)], axis=1)
    K = x @ x.T + BIAS
    tr = task.train_mask
    alpha = np.linalg.solve(K[np.ix_(tr, tr)] + RIDGE * np.eye(tr.sum()), task.y[tr])
    return K[:, tr] @ alpha, task


# Every kind the plugin ships, in one suite: its task family (with its encoding), its claim.
SUITE_ALL_KINDS = f"""\
name: plugin-demo
tasks:
  - {{id: add, family: additive, params: {{anchors: [[4], [4]]}}}}
  - {{id: sym, family: symmetry, params: {{variant: partial_exposure}}}}
  - {{id: checker, family: checkerboard, params: {{values: 4}}, encoding: {{name: thermometer, scale: 2.0}}}}
models:
  - id: ridge
    adapter: tiny-ridge
    params: {{ridge: {RIDGE}, bias: {BIAS}}}
expectations:
  - {{id: exact, source: {{paper: compbench, threshold: a test fixture}}, claim: matches_kernel, models: [ridge], tasks: ["*"], tolerance: 1.0e-6, max_abs_diff: 1.0e-6}}
  - {{id: clear, source: {{paper: compbench, threshold: a test fixture}}, claim: above_chance, models: [ridge], tasks: [sym], margin: 0.4}}
"""


def listed_names(stdout: str, heading: str) -> list[str]:
    """The names `compbench list` prints under one heading."""
    lines = stdout.splitlines()
    start = lines.index(heading)
    names = []
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        names.append(line.split()[0])
    return names


@pytest.mark.slow
def test_plugin_is_listed_and_runs_a_suite(site, tmp_path):
    listed = compbench(site, "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "tiny-ridge" in listed_names(listed.stdout, "adapters:")
    assert "checkerboard" in listed_names(listed.stdout, "task families:")
    assert "thermometer" in listed_names(listed.stdout, "encodings:")
    assert "above_chance" in listed_names(listed.stdout, "claims:")
    assert "verdicts-txt" in listed_names(listed.stdout, "report formats:")
    assert "[compbench-plugin-example]" in listed.stdout  # which package each plugin came from

    (tmp_path / "demo.yaml").write_text(SUITE_ALL_KINDS)
    out = tmp_path / "out"
    run = compbench(site, "run", "--suite", "demo.yaml", "--out", str(out), "--device", "cpu", "--quiet",
                    "--format", "md,csv,predictions,verdicts-txt", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "3 cells run" in run.stdout and "expectations 4/4 pass" in run.stdout

    records = pd.read_csv(out / "records.csv").set_index("task")
    assert set(records.adapter) == {"tiny-ridge"} and set(records.status) == {"ok"}
    assert set(records.theory_kernel) == {"linear(bias=0.5)"} and list(records.seed) == [0, 0, 0]  # deterministic: one seed
    stored = {r["task"]: r for r in ResultStore(out / "store").latest().values()}

    # The plugin's encoding fed the plugin's task to the plugin's adapter: ridge on thermometer codes, by hand.
    task = make_task_plugin(site)
    therm = 2.0 * np.concatenate([(np.arange(4)[None, :] <= task[0][:, [c]]).astype(float) for c in range(2)], axis=1)
    cells, y, tr = task
    K = therm @ therm.T + BIAS
    alpha = np.linalg.solve(K[np.ix_(tr, tr)] + RIDGE * np.eye(tr.sum()), y[tr])
    assert np.allclose(stored["checker"]["predictions"], K[:, tr] @ alpha, rtol=0, atol=1e-9)
    verdicts = (out / "verdicts.txt").read_text().splitlines()
    assert "PASS clear above_chance ridge sym 1" in verdicts
    assert sum(line.startswith("PASS exact matches_kernel ridge") for line in verdicts) == 3

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
    predictions = pd.read_parquet(out / "predictions.parquet")
    checker = predictions[predictions.task == "checker"]
    assert list(checker.columns[:6]) == ["task", "model", "seed", "split", "row", "column"] or {"row", "column"} <= set(checker.columns)
    assert len(checker) == 16 and (checker.split == "held_out").sum() == 4


def make_task_plugin(site: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The plugin's checkerboard task (4 values), built in a subprocess that sees the installed plugin."""
    code = ("import json; from compbench.tasks import make_task; t = make_task('checkerboard', values=4); "
            "print(json.dumps([t.cells.tolist(), t.y.tolist(), t.train_mask.tolist()]))")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    import json

    cells, y, tr = json.loads(done.stdout)
    return np.array(cells), np.array(y), np.array(tr)


@pytest.mark.slow
def test_plugin_claim_is_validated_and_suite_runs_under_pytest(site, tmp_path):
    """A plugin's claim says which task kinds it applies to; the plugin's kinds also run as pytest items."""
    bad = SUITE_ALL_KINDS.replace("tasks: [sym], margin: 0.4", "tasks: [add], margin: 0.4")
    (tmp_path / "bad.yaml").write_text(bad)
    done = compbench(site, "validate", "bad.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "claim 'above_chance' applies to classification tasks; task 'add' is regression" in done.stderr
    assert "bad.yaml:12: expectations[1].tasks[0]" in done.stderr

    (tmp_path / "demo.yaml").write_text(SUITE_ALL_KINDS)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
    pytest_run = subprocess.run(
        [sys.executable, "-m", "pytest", "demo.yaml", "-p", "no:cacheprovider", "-q", "--compbench-results", str(tmp_path / "res")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
    )
    assert pytest_run.returncode == 0, pytest_run.stdout + pytest_run.stderr
    assert "4 passed" in pytest_run.stdout  # 2 cells, 1 cross-cell claim, the suite outcome


def _body(module: str) -> str:
    code = (FIXTURE / "compbench_plugin_example" / module).read_text()
    return code.split('"""\n\n', 1)[1]  # without the module docstring


def test_docs_show_the_fixture_verbatim():
    """docs/how-to/adapters.md's and docs/how-to/extending.md's complete examples are the tested plugin, not drifting copies."""
    docs = Path(__file__).parents[1] / "docs" / "how-to"
    adapters, extending = (docs / "adapters.md").read_text(), (docs / "extending.md").read_text()
    toml = f"```toml\n{(FIXTURE / 'pyproject.toml').read_text()}```"
    assert f"```python\n{_body('__init__.py')}```" in adapters and toml in adapters
    assert toml in extending
    for module in ("tasks.py", "encodings.py", "claims.py", "reporters.py"):
        assert f"```python\n{_body(module)}```" in extending, module


def test_broken_or_clashing_plugins_warn_and_the_rest_load(monkeypatch):
    """One broken plugin must not hide the others (or break `compbench list`)."""
    import compbench.registry as core

    eps = [
        EntryPoint("missing-module", "no_such_module_xyz:Adapter", registry.ENTRY_POINT_GROUP),
        EntryPoint("not-an-adapter", "os:getcwd", registry.ENTRY_POINT_GROUP),
        EntryPoint("kernel", "compbench.adapters.mlp:MLPAdapter", registry.ENTRY_POINT_GROUP),
        EntryPoint("good", "compbench.adapters.kernel:KernelAdapter", registry.ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(core, "entry_points", lambda group: [ep for ep in eps if ep.group == group])
    fresh = core.Registry("adapter", registry.ENTRY_POINT_GROUP, registry._check_adapter)
    for entry in registry.ADAPTERS.entries():
        fresh.add(entry.name, entry.raw, source=entry.source)
    kernel_cls = registry.ADAPTERS.get("kernel")
    monkeypatch.setattr(kernel_cls, "name", kernel_cls.name)  # registering "good" renames the class; undo after
    with pytest.warns(UserWarning) as caught:
        names = fresh.names()
    messages = [str(w.message) for w in caught]
    assert any("'missing-module'" in m and "ModuleNotFoundError" in m for m in messages)
    assert any("'not-an-adapter'" in m and "not a subclass" in m for m in messages)
    assert any("'kernel'" in m and "registered twice" in m and "MLPAdapter" in m and "KernelAdapter" in m for m in messages)
    assert "good" in names and "missing-module" not in names and "not-an-adapter" not in names
    assert fresh.get("kernel") is kernel_cls
    assert set(fresh.broken) == {"missing-module", "not-an-adapter", "kernel"}


def test_extending_docs_show_every_kind_from_the_tested_plugin():
    """docs/how-to/extending.md's examples of each kind (the README's before), entry-point group by group, are the
    plugin that test_plugin_is_listed_and_runs_a_suite installs and runs."""
    readme = (Path(__file__).parents[1] / "docs" / "how-to" / "extending.md").read_text()
    for module in ("tasks.py", "encodings.py", "claims.py", "reporters.py"):
        assert f"```python\n{_body(module)}```" in readme, module
    toml = (FIXTURE / "pyproject.toml").read_text()
    for group in ("tasks", "encodings", "claims", "reporters"):
        block = toml.split(f'[project.entry-points."compbench.{group}"]\n', 1)[1].split("\n\n", 1)[0]
        assert f'[project.entry-points."compbench.{group}"]\n{block}\n' in readme, group
