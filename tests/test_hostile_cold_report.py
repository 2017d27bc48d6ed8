"""The cold report's cost grows with the suite, not with its square (issue #34 item 2).

kernel-limits has 5,013 models (two 50 × 50 kernel sweeps); a report that asks a per-model question once per model
(each time reading every model) spent 65 s of each drawing process listing its plots before drawing one.
"""

from __future__ import annotations

import importlib

from compbench.cli import main
from tiny_suites import kernel_suite

SWEEP = 40
# The kernel scenario, a 40-member kernel sweep on `add`, and a reference tagged `ceiling` (the scores plot shows it).
SUITE = kernel_suite("many", seeds=1).replace("expectations:\n", "") + "\n".join([
    "  - {id: sw, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]},",
    f"     sweep: {{weights.1: {{linspace: [0.0, 0.4, {SWEEP}]}}}}, tasks: [add]}}",
    "  - {id: top, adapter: kernel, params: {kernel: relu_ntk}, tags: [ceiling]}",
]) + "\n"


def test_listing_the_plots_reads_the_models_tags_a_fixed_number_of_times(tmp_path, monkeypatch):
    load = importlib.import_module("compbench.suite.load")
    publish = importlib.import_module("compbench.report.publish")
    reads = []
    tags = load.LoadedSuite.tags.fget
    monkeypatch.setattr(load.LoadedSuite, "tags", property(lambda self: reads.append(1) or tags(self)))
    monkeypatch.setattr(publish, "_can_fork", lambda: False)  # drawn here, where the reads are counted
    path = tmp_path / "many.yaml"
    path.write_text(SUITE, encoding="utf-8")
    assert main(["run", "--suite", str(path), "--results", str(tmp_path / "R"), "--device", "cpu", "-q"]) == 0
    # Every model's tags were read once per model while listing the plots: 43 models, 44 reads and more.
    assert 0 < len(reads) <= 8, len(reads)
    manifest = (tmp_path / "R" / "plots" / "manifest.json").read_text(encoding="utf-8")
    assert '"scores"' in manifest and (tmp_path / "R" / "plots" / "scores.png").stat().st_size > 0
