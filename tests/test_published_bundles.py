"""The published results are also published as bundles (results/<suite>/<suite>.cbz): every published suite has one,
at most 5 MB unless named below with its measured size. Each opens as every command opens a
bundle (manifest, sha256s, integrity, its packed rows), is of the results published beside it (its summary.json byte
for byte; its report is the published report), and carries its provenance: each record's compbench version,
result-code hash and device, and the runs table of the runs that reported its records."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from compbench.bundle import open_results
from compbench.cli import main
from compbench.store.records import ResultStore

RESULTS = Path(__file__).resolve().parents[1] / "results"
SUITES = sorted(p.parent.name for p in RESULTS.glob("*/summary.json"))
BUNDLES = sorted(RESULTS.glob("*/*.cbz"))
MAX_BYTES = 5_000_000
# The bundles allowed above MAX_BYTES, each with its size as measured (bundle --current, format 2) and 1% for SQLite's
# pages (the same records bundled again took 16,199,680 and 16,203,776 bytes): slot-decoder's 16 current cells hold
# 73 MB of predicted images as text (docs/reference/commands.md, bundle).
LARGER = {"slot-decoder": 16_364_000}


def test_every_published_suite_has_a_bundle_of_at_most_5_mb_or_its_stated_size():
    bundled = {b.parent.name for b in BUNDLES}
    assert all(b.stem == b.parent.name for b in BUNDLES)
    assert bundled == set(SUITES)
    assert all(b.stat().st_size <= LARGER.get(b.stem, MAX_BYTES) for b in BUNDLES)


@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.stem for b in BUNDLES])
def test_a_published_bundle_opens_with_its_results_and_provenance(bundle):
    published = bundle.parent / "summary.json"
    suite = json.loads(published.read_text())["suite"]
    with open_results(bundle) as view:
        m = view.manifest
        assert m["kind"] == "compbench-bundle" and m["suite"] == suite and m["bundle_format"] == "2"
        assert (view.directory / "summary.json").read_bytes() == published.read_bytes()
        store = ResultStore(view.directory / "store")
        try:
            records, runs = list(store), store.runs()
        finally:
            store.close()
    assert int(m["records"]) >= len(records) > 0
    if m["records_kept"] == "current":
        assert int(m["records"]) == len(records)
    assert all(r.suite == suite and r.version and r.code and r.device for r in records)
    # who ran each run, at which commit, on what machine
    assert runs and all(run.info.get("compbench", {}).get("commit") and run.info.get("machine") for run in runs)


# What a report states about its writing rather than its results: the minute of the store's last write (a copy of
# a store is dated by its copy) and the commit of the compbench that wrote the report.
_WRITTEN = (re.compile(rb"\d{4}-\d\d-\d\d \d\d:\d\d UTC"), re.compile(rb"(git commit[ |]+|<dt>git commit</dt><dd>)[0-9a-f?]+(-dirty)?"))


def _undated(data: bytes) -> bytes:
    for pattern in _WRITTEN:
        data = pattern.sub(lambda m: (m.group(1) if m.groups() else b"") + b"WRITTEN", data)
    return data


# This copy's own caches beside the report (its inputs digest by stored rows, its files' statuses): not report files.
_CACHES = {".report/inputs.json", ".report/status.json"}


def _published(folder: Path) -> dict[str, bytes]:
    """The report files of a published folder: not its bundle, store or profile folders (each with a summary.json)."""
    out = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder)
        if p.is_file() and p.suffix != ".cbz" and rel.parts[0] != "store" and rel.name not in ("predictions.csv", "predictions.parquet") \
                and rel.as_posix() not in _CACHES \
                and not (len(rel.parts) > 1 and (folder / rel.parts[0] / "summary.json").exists()):
            out[rel.as_posix()] = p.read_bytes()
    return out


def _skip_when_stale(bundle: Path) -> None:
    """Skip, before the report is built, when a published record's result code is not this code's (kernel-limits'
    report took a minute of CI to say so)."""
    from compbench.runner.cells import code_version

    with open_results(bundle) as view:
        store = ResultStore(view.directory / "store")
        try:
            codes = {(r.adapter, r.family, r.encoding, r.code) for r in store}
        finally:
            store.close()
    # An adapter none of whose records has this code is stale. A bundle may also hold records of cells the suite no
    # longer has (current for their keys, computed by older code); the report reads none of them, and the report's
    # own stale count (below) catches a suite only partly recomputed.
    current = {a for a, f, e, c in codes if c == code_version(a, f, e)}
    stale = sorted({a for a, f, e, c in codes} - current)
    if stale:
        pytest.skip(f"{bundle.stem}: cells of {', '.join(stale)} are stale for this code; republish the suite "
                    "(compbench run --suite S --results results/S) and make its bundle again")


@pytest.mark.slow
@pytest.mark.parametrize("bundle", BUNDLES, ids=[b.stem for b in BUNDLES])
def test_the_report_from_a_published_bundle_is_the_published_report(bundle, tmp_path, capsys):
    _skip_when_stale(bundle)
    code = main(["report", "--results", str(bundle), "--report-dir", str(tmp_path / "R"), "-q"])
    said = capsys.readouterr()
    stale = re.search(r"(\d+) stale", said.out + said.err)
    if stale:  # the result code changed since it was published: so did its report, from the folder as from the bundle
        pytest.skip(f"{bundle.stem}: {stale.group(1)} published cells are stale for this code; republish the suite "
                    "(compbench run --suite S --results results/S) and make its bundle again")
    assert code == 0
    mine, theirs = _published(tmp_path / "R"), _published(bundle.parent)
    assert sorted(mine) == sorted(theirs) and "leaderboard.md" in mine
    differ = [n for n in mine if n != ".report/manifest.json" and _undated(mine[n]) != _undated(theirs[n])]
    assert differ == []
