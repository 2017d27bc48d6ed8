"""The published results that fit in a small file are also published as bundles (results/<suite>/<suite>.cbz): each
opens as every command opens a bundle (manifest, sha256s, integrity), is of the results published beside it (its
summary.json byte for byte), and carries its provenance: each record's compbench version, result-code hash and
device, and the runs table where its store recorded runs (a store written before compbench recorded runs has none;
its records are dated by the manifest's `stored`)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from compbench.bundle import open_results
from compbench.store.records import ResultStore

RESULTS = Path(__file__).resolve().parents[1] / "results"
BUNDLES = sorted(RESULTS.glob("**/*.cbz"))
MAX_BYTES = 5_000_000  # larger results are published as folders only (docs/reference/commands.md, bundle)


def test_the_small_published_results_have_bundles():
    assert {b.relative_to(RESULTS).as_posix() for b in BUNDLES} >= {
        "in-context-modular/in-context-modular.cbz", "kernel-limits-images/kernel-limits-images.cbz"}
    assert all(b.stat().st_size <= MAX_BYTES for b in BUNDLES)


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.stem for b in BUNDLES])
def test_a_published_bundle_opens_with_its_results_and_provenance(bundle):
    published = bundle.parent / "summary.json"
    suite = json.loads(published.read_text())["suite"]
    with open_results(bundle) as view:
        m = view.manifest
        assert m["kind"] == "compbench-bundle" and m["suite"] == suite
        assert (view.directory / "summary.json").read_bytes() == published.read_bytes()
        store = ResultStore(view.directory / "store")
        try:
            records, runs = list(store), store.runs()
        finally:
            store.close()
    # The manifest counts every stored row; a republished store keeps the superseded ones beside the current.
    with sqlite3.connect(f"file:{bundle}?mode=ro", uri=True) as db:
        assert db.execute("SELECT COUNT(*) FROM records").fetchone()[0] == int(m["records"]) >= len(records) > 0
    assert all(r.suite == suite and r.version and r.code and r.device for r in records)
    if int(m["store_layout"]) >= 2:  # a store that records runs: who ran them, at which commit, on what
        assert runs and all(run.info.get("compbench", {}).get("commit") and run.info.get("machine") for run in runs)
    else:
        assert runs == [] and float(m["stored"]) > 0
