"""The frozen-feature probe: a fixed random network's features + a min-norm linear readout is its own kernel theory."""

from __future__ import annotations

import numpy as np

from compbench.adapters.frozen_probe import FrozenProbeAdapter, FrozenProbeParams
from compbench.encodings import encode
from compbench.runner.run import run_suite
from compbench.suite import parse_suite
from compbench.tasks import make_task
from compbench.testing import check_adapter
from compbench.theory.regression import kernel_regression

SMALL = {"scales": 3, "orientations": 2, "orientation_range": 1.5707963267948966, "positions_x": 3, "positions_y": 3,
         "targets": ["scale", "x", "y"]}


def test_conformance():
    report = check_adapter(FrozenProbeAdapter, {"channels": [4], "width": 32})
    assert report.ok, str(report)


def test_theory_equals_the_probe_to_1e_8():
    task = make_task("sprites", **SMALL, split={"rule": "corner", "values": {"scale": 2, "x": 2}})
    enc = encode("sprites", task, size=16)
    adapter = FrozenProbeAdapter(FrozenProbeParams(channels=[4, 8], width=256))
    (a, b) = adapter.fit_seeds(enc.train, enc.evaluate, [0, 1])
    k_tr, k_ev = a.kernels
    theory = kernel_regression(k_tr, k_ev, enc.train.regression_targets(), ridge=adapter.params.ridge)
    assert np.max(np.abs(theory - a.predictions)) < 1e-8
    assert a.predictions.shape == (len(task.cells), task.n_outputs)
    assert not np.allclose(a.predictions, b.predictions)  # another seed, other features


def test_through_the_runner(tmp_path):
    text = (
        "name: probe\nseeds: 1\ntasks:\n"
        "  - {id: c, family: sprites, params: {scales: 3, orientations: 2, positions_x: 3, positions_y: 3, "
        "split: {rule: corner, values: {scale: 2, x: 2}}}, encoding: {name: sprites, size: 16}}\n"
        "models:\n  - {id: probe, adapter: frozen_probe, params: {channels: [4], width: 128}}\n"
    )
    (rec,) = run_suite(parse_suite(text, "probe.yaml"), tmp_path, device="cpu", progress=False).records
    assert rec["status"] == "ok", rec.get("error")
    assert rec["metrics"]["theory_max_abs_diff"] < 1e-8 and "factor_slope.scale" in rec["metrics"]
