"""Bundles: one file that carries a suite's results, and the one way every command reads results.

A bundle is the store's own format, an SQLite file (the results directory's store copied: every run,
every record, superseded ones too, or with `current` the current records and the runs that reported
them), with two tables more: `bundle`, the manifest (what it is, its format version, the compbench
that wrote it, the suite, sha256 of each file and of the rows, what was left out), and `bundle_files`
(the suite file and summary.json). From format 2 the rows of records and runs are packed (bundle_pack:
lzma of their JSON lines, lossless) and unpacked into the private copy a command reads. Why SQLite and not a
zip: docs/reference/commands.md, `bundle`.

`open_results(path)` gives a command its results whether `path` is a results directory or a bundle;
a bundle is read from a private temporary copy, so nothing a command does can change it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any

from compbench import bundle_pack
from compbench.errors import CompbenchError
from compbench.files import build_atomic, read_contained
from compbench.outcome import SUMMARY_FILE
from compbench.store.records import READABLE_LAYOUTS, SQLITE_MAGIC, STORE_FILE, ResultStore
from compbench.suite import LoadedSuite

KIND = "compbench-bundle"
BUNDLE_FORMAT = 2  # the manifest's and files' layout; the store inside keeps its own layout (store.SCHEMA_VERSION)
# Format 1 held the records' rows unpacked (a bundle of 1.4-170 MB for a published suite); format 2 packs them
# (bundle_pack). A format-1 bundle is read as it is: its rows are where format 2 unpacks them to.
READABLE_FORMATS = (1, 2)
SUITE_ENTRY = "suite.yaml"
_TABLES = ("CREATE TABLE bundle (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
           "CREATE TABLE bundle_files (name TEXT PRIMARY KEY, data BLOB NOT NULL, sha256 TEXT NOT NULL)")
_MAKE = "make one with `compbench bundle --suite S --results DIR -o FILE`, or give a results directory"


class BundleError(CompbenchError, ValueError):
    """A file given as a bundle is not one, is damaged, or was written in a format this compbench cannot read."""


@dataclass(frozen=True)
class ResultsView:
    """Results to read: `directory` holds store/records.sqlite and summary.json (for a bundle, a temporary copy
    that is deleted afterwards); a bundle's manifest and suite file; `label` is the path as the user gave it."""

    label: str
    directory: Path
    manifest: dict[str, str] | None = None
    suite_file: Path | None = None

    @property
    def is_bundle(self) -> bool:
        """Whether the results come from a bundle (read-only) rather than a results directory."""
        return self.manifest is not None


def _content_sha256(db: sqlite3.Connection) -> str:
    """A hash of every stored row a bundle carries: its records (superseded ones too) and its runs."""
    h = hashlib.sha256()
    for row in db.execute("SELECT id, key, record FROM records ORDER BY id"):
        h.update(repr(row).encode())
    tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "runs" in tables:
        for row in db.execute("SELECT id, started, ended, suite, profile, last_row, info FROM runs ORDER BY id"):
            h.update(repr(row).encode())
    return h.hexdigest()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _keep_current(db: sqlite3.Connection) -> tuple[int, list[str]]:
    """Delete the superseded records and the runs that reported one of them; (records, run ids) left out.

    A run reads, for each cell it asked for, the newest row stored by the time it ended (ResultStore.run_records):
    a run whose row of some cell is superseded would read another row, or none, so it goes too, and `compare` and
    `history` see only runs whose records the bundle holds as they were."""
    if "superseded" not in bundle_pack.columns(db):  # layout 1 kept no superseded rows and no runs
        return 0, []
    current = {i for (i,) in db.execute("SELECT id FROM records WHERE superseded = 0")}
    rows: dict[str, list[int]] = {}
    for row_id, key in db.execute("SELECT id, key FROM records ORDER BY id"):
        rows.setdefault(str(key), []).append(row_id)
    gone: list[str] = []
    for run_id, last_row, info in db.execute("SELECT id, last_row, info FROM runs ORDER BY started, id").fetchall():
        try:
            cells = json.loads(info).get("cells", [])
        except (ValueError, AttributeError):
            cells = []
        last = last_row if last_row is not None else 2**62
        for cell in (c for c in cells if isinstance(c, list) and len(c) == 5):
            read = max((i for i in rows.get(str(cell[0]), ()) if i <= last), default=None)
            if read is not None and read not in current:
                gone.append(str(run_id))
                break
    db.execute("BEGIN")
    db.executemany("DELETE FROM runs WHERE id = ?", [(r,) for r in gone])
    left_out = db.execute("DELETE FROM records WHERE superseded != 0").rowcount
    db.execute("COMMIT")
    return left_out, gone


def write_bundle(results: Path, loaded: LoadedSuite, target: Path, current: bool = False) -> dict[str, str]:
    """Write `results`' store (with `current`, its current records and the runs that reported them only), the suite
    file of `loaded` and summary.json into the bundle `target`, its records packed; its manifest."""
    from compbench import __version__

    store_file = results / "store" / STORE_FILE
    if not store_file.is_file():
        raise BundleError(f"{results}: no compbench store ({store_file}); run the suite there first "
                          f"(`compbench run --suite {loaded.name} --results {results}`)")
    if target.exists() and not target.is_dir():
        try:
            _manifest_of(target, str(target))
        except BundleError:
            raise BundleError(f"{target}: exists and is not a compbench bundle; nothing was written: remove it or "
                              "choose another file name (-o FILE)") from None
    summary = read_contained(results, SUMMARY_FILE)
    owner = _json(summary).get("suite") if summary else None
    if owner not in (None, loaded.name):
        raise BundleError(f"{results}: holds suite {owner!r}'s results ({SUMMARY_FILE}), not suite {loaded.name!r}'s; "
                          f"nothing was written: give --suite {owner} or that suite's results directory")
    suite_bytes = Path(loaded.path).read_bytes()
    files = {SUITE_ENTRY: suite_bytes, **({SUMMARY_FILE: summary} if summary is not None else {})}
    manifest: dict[str, str] = {}
    # The store's last write, which a report states as its results' date (report.legend.run_date).
    stored = max(p.stat().st_mtime for p in (results / "store").glob(f"{STORE_FILE}*") if p.is_file())
    store = ResultStore(results / "store")

    def build(path: Path) -> None:
        store.copy_to(path)
        db = sqlite3.connect(path, isolation_level=None)
        try:
            layout = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()[0]
            left_out, runs_left_out = _keep_current(db) if current else (0, [])
            manifest.update({
                "kind": KIND, "bundle_format": str(BUNDLE_FORMAT), "compbench_version": __version__,
                "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "suite": loaded.name,
                "suite_file": str(loaded.path), "suite_sha256": _sha(suite_bytes),
                "summary_sha256": _sha(summary) if summary is not None else "", "store_layout": str(layout),
                "content_sha256": _content_sha256(db), "stored": repr(stored),
                "records": str(db.execute("SELECT COUNT(*) FROM records").fetchone()[0]),
                "records_kept": "current" if current else "all", "superseded_left_out": str(left_out),
                "runs_left_out": " ".join(runs_left_out),
                "packing": bundle_pack.PACKING,
            })
            manifest["packed_columns"] = json.dumps(bundle_pack.pack(db))
            db.execute("BEGIN")
            for statement in _TABLES:
                db.execute(statement)
            db.executemany("INSERT INTO bundle VALUES (?, ?)", sorted(manifest.items()))
            db.executemany("INSERT INTO bundle_files VALUES (?, ?, ?)", [(n, d, _sha(d)) for n, d in files.items()])
            db.execute("COMMIT")
            db.execute("VACUUM")  # the pages the unpacked rows held
        finally:
            db.close()

    try:
        build_atomic(target.parent, target.name, build)
    finally:
        store.close()
    return manifest


def _json(data: bytes | None) -> dict[str, Any]:
    try:
        doc = json.loads(data or b"{}")
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def _manifest_of(path: Path, label: str) -> dict[str, str]:
    """The manifest of the bundle at `path` (named `label` in messages), checked: kind, format, store layout, hashes."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise BundleError(f"{label}: cannot be read ({exc.strerror or exc})") from None
    if head != SQLITE_MAGIC:
        raise BundleError(f"{label}: not a compbench bundle (not an SQLite file); {_MAKE}")
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    except sqlite3.Error as exc:
        raise BundleError(f"{label}: cannot be opened ({exc})") from None
    try:
        return _checked(db, label)
    except sqlite3.DatabaseError as exc:
        raise BundleError(f"{label}: a damaged compbench bundle ({exc}); make it again with `compbench bundle`") from None
    finally:
        db.close()


def _checked(db: sqlite3.Connection, label: str) -> dict[str, str]:
    from compbench import __version__

    tables = {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "bundle" not in tables:
        if {"meta", "records"} <= tables:
            raise BundleError(f"{label}: a compbench store, not a bundle: give the results directory that holds its "
                              "store/ folder, or make a bundle of it with `compbench bundle`")
        raise BundleError(f"{label}: an SQLite database of another program, not a compbench bundle; {_MAKE}")
    manifest = {str(k): str(v) for k, v in db.execute("SELECT name, value FROM bundle")}
    made_by = f"compbench {manifest.get('compbench_version', '(unknown version)')}"
    fmt = manifest.get("bundle_format", "")
    if manifest.get("kind") != KIND or not fmt.isdigit():
        raise BundleError(f"{label}: its manifest is not a compbench bundle's (no kind {KIND!r} or format version); {_MAKE}")
    if int(fmt) not in READABLE_FORMATS:
        raise BundleError(f"{label}: bundle format {fmt}, written by {made_by}; this compbench ({__version__}) reads "
                          f"bundle format {', '.join(map(str, READABLE_FORMATS))}: "
                          + ("upgrade compbench (pip install -U compbench) to read it" if int(fmt) > max(READABLE_FORMATS)
                             else "make the bundle again with this compbench from its results directory"))
    layout = manifest.get("store_layout", "")
    if not layout.isdigit() or int(layout) not in READABLE_LAYOUTS:
        raise BundleError(f"{label}: its store has layout {layout or '(none)'}, written by {made_by}; this compbench "
                          f"({__version__}) reads store layouts {', '.join(map(str, READABLE_LAYOUTS))}: upgrade compbench "
                          "(pip install -U compbench) to read it")
    problems = [r[0] for r in db.execute("PRAGMA quick_check(3)")]
    if problems != ["ok"]:
        raise BundleError(f"{label}: a damaged compbench bundle ({'; '.join(problems)}); make it again with `compbench bundle`")
    for name, data, digest in db.execute("SELECT name, data, sha256 FROM bundle_files"):
        expected = manifest.get("suite_sha256" if name == SUITE_ENTRY else "summary_sha256" if name == SUMMARY_FILE else "")
        if _sha(bytes(data)) != digest or expected is not None and expected != digest:
            raise BundleError(f"{label}: a damaged compbench bundle (its {name} does not match its sha256); make it "
                              "again with `compbench bundle`")
    if int(fmt) >= 2 and (manifest.get("packing") != bundle_pack.PACKING or "bundle_rows" not in tables):
        raise BundleError(f"{label}: its manifest is not a compbench bundle's (rows packed as "
                          f"{manifest.get('packing', '(nothing)')!r}, not {bundle_pack.PACKING!r}); {_MAKE}")
    return manifest


def _unpacked(path: Path, manifest: dict[str, str], label: str) -> None:
    """Restore the packed records of the bundle copy at `path` (format 2 on) and check every row against the manifest."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        if int(manifest["bundle_format"]) >= 2:
            try:
                packed = json.loads(manifest.get("packed_columns", ""))
                if not isinstance(packed, dict) or not all(isinstance(v, list) for v in packed.values()):
                    raise ValueError("its manifest's packed_columns is not a table → columns mapping")
                bundle_pack.unpack(db, {str(t): [str(n) for n in names] for t, names in packed.items()})
            except (bundle_pack.PackError, ValueError) as exc:  # the copy, half unpacked, is deleted with its folder
                raise BundleError(f"{label}: a damaged compbench bundle ({exc}); make it again with `compbench bundle`") from None
        if _content_sha256(db) != manifest.get("content_sha256"):
            raise BundleError(f"{label}: a damaged or edited compbench bundle (its records or runs do not match the "
                              "manifest's content_sha256); make it again with `compbench bundle`")
    except sqlite3.Error as exc:  # a packed row SQLite cannot store (a wrong type, a repeated id) too
        raise BundleError(f"{label}: a damaged compbench bundle ({exc}); make it again with `compbench bundle`") from None
    finally:
        db.close()


def bundle_files(path: Path) -> dict[str, bytes]:
    """The files a bundle carries (suite.yaml, summary.json), by name."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {str(n): bytes(d) for n, d in db.execute("SELECT name, data FROM bundle_files")}
    finally:
        db.close()


@contextmanager
def open_results(path: Path) -> Iterator[ResultsView]:
    """The results at `path` to read: a results directory as it is, or a bundle unpacked into a temporary folder
    (deleted on exit); BundleError when a file there is not a bundle this compbench reads."""
    path = Path(path)
    if path.is_dir() or not path.exists():  # a directory, or nothing: the command's own messages say what is missing
        yield ResultsView(str(path), path)
        return
    with tempfile.TemporaryDirectory(prefix="compbench-bundle-") as tmp:
        folder = Path(tmp)
        copy = folder / "store" / STORE_FILE
        copy.parent.mkdir()
        try:
            shutil.copyfile(path, copy)  # first: what is checked is what is read, whatever happens to the file meanwhile
        except OSError as exc:
            raise BundleError(f"{path}: cannot be read ({exc.strerror or exc})") from None
        manifest = _manifest_of(copy, str(path))
        _unpacked(copy, manifest, str(path))
        try:  # the copy dates its results as the store did when it was bundled (report.legend.run_date)
            stamp = float(manifest.get("stored", ""))
            os.utime(copy, (stamp, stamp))
        except (ValueError, OverflowError, OSError):
            pass  # no date recorded: the report's date is its own
        files = bundle_files(copy)
        if SUMMARY_FILE in files:
            (folder / SUMMARY_FILE).write_bytes(files[SUMMARY_FILE])
        # The suite under its own file name: a report names the file it loaded.
        name = PurePath(manifest.get("suite_file", "")).name or SUITE_ENTRY
        suite = folder / "suite" / (name if name.endswith((".yaml", ".yml")) else SUITE_ENTRY)
        suite.parent.mkdir()
        suite.write_bytes(files.get(SUITE_ENTRY, b""))
        try:
            yield ResultsView(str(path), folder, manifest, suite)
        except Exception as exc:
            # A message that names the temporary copy (no results there, a damaged row) names the bundle instead.
            if exc.args and isinstance(exc.args[0], str) and str(folder) in exc.args[0]:
                text = exc.args[0]
                for inner in (folder / "store" / STORE_FILE, folder / "store", folder):
                    text = text.replace(str(inner), str(path))
                exc.args = (text, *exc.args[1:])
            raise
