"""Cache keys follow a plugin's whole package: editing a helper module it imports recomputes its cells."""

from __future__ import annotations

import pytest

import subprocess
from pathlib import Path

import numpy as np

from compbench.store import ResultStore
from tiny_suites import cli_process, suite_text

ADAPTER = '''
import numpy as np
from compbench.adapters import Adapter, AdapterParams, Fitted
from edplug.helper import offset


class Constant(Adapter):
    """Predicts the training mean plus the helper's offset."""

    Params = AdapterParams
    deterministic = True

    def fit_seeds(self, train, evaluate, seeds):
        return [Fitted(np.full(len(evaluate), float(np.mean(train.y)) + offset())) for _ in seeds]
'''

SUITE = suite_text("tiny", name="edits", seeds=None, models=["{id: const, adapter: constant}"], expectations=None)


def make_plugin(root: Path, offset: float) -> None:
    """A plugin package with a helper module, registered through a hand-written dist-info (no pip needed)."""
    pkg = root / "edplug"
    pkg.mkdir(exist_ok=True)
    (pkg / "__init__.py").write_text(ADAPTER)
    (pkg / "helper.py").write_text(f"def offset():\n    return {offset!r}\n")
    info = root / "edplug-0.1.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: edplug\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[compbench.adapters]\nconstant = edplug:Constant\n")


def run(root: Path, out: Path) -> subprocess.CompletedProcess:
    return cli_process("run", "--suite", str(root / "s.yaml"), "--out", str(out), "--quiet", "--format", "csv", path=(root,),
                       timeout=300)


@pytest.mark.slow
def test_editing_a_plugin_helper_module_recomputes_its_cells(tmp_path):
    make_plugin(tmp_path, 0.0)
    (tmp_path / "s.yaml").write_text(SUITE)
    out = tmp_path / "out"
    first = run(tmp_path, out)
    assert first.returncode in (0, 1), first.stderr
    assert "2 cells run, 0 reused" in first.stdout
    again = run(tmp_path, out)
    assert "0 cells run, 2 reused" in again.stdout, again.stdout + again.stderr

    before = {rec.task: rec for rec in ResultStore(out / "store")}
    (tmp_path / "edplug" / "helper.py").write_text("def offset():\n    return 1.0\n")  # the helper only
    edited = run(tmp_path, out)
    assert "2 cells run, 0 reused" in edited.stdout, edited.stdout + edited.stderr
    after = {rec.task: rec for rec in ResultStore(out / "store")}
    assert sorted(after) == sorted(before)
    for task, new in after.items():
        old = before[task]
        # The same cell (its key is what it is), recomputed because the code that computes it changed.
        assert new.key == old.key and new.code != old.code, task
        assert np.allclose(np.asarray(new.predictions) - np.asarray(old.predictions), 1.0), task
