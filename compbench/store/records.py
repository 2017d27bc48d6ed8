"""The result store: SQLite in WAL mode, one row per finished cell, committed as each job finishes or, staged, with the
records that finished beside it.

A killed process loses at most the jobs in flight, and with staged records (`stage`) those finished in the last
COMMIT_WINDOW seconds (a transaction is all or nothing); several
processes can write the same store at once (WAL + busy timeout); a file that is not a compbench
store of this schema version (garbage, corrupt, another program's database, another schema) is
refused with a message naming it and is never written to; a store deleted or replaced while a run
writes to it stops that run instead of letting it commit into a file nobody will read.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import sqlite3
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compbench.errors import CompbenchError
from compbench.files import OutputError, refuse_links
from compbench.records import CellRecord, as_records
from compbench.store.claim_owner import CLAIM_TTL, claim_is_live, process_owner, process_start_time  # noqa: F401 (re-exported)
from compbench.store.sqlite_file import SQLITE_MAGIC  # noqa: F401 (re-exported)
from compbench.store.sqlite_file import (ADVICE as _ADVICE, BUSY_TIMEOUT, describe as _describe, immediate as _immediate,
                                         snapshot, to_wal)
from compbench.store.rows import DAMAGE as _DAMAGE, ROW as _ROW, read as _read, relabelled as _relabelled

SCHEMA_VERSION = 2  # the SQLite layout; each record's JSON carries its own version (records.RECORD_SCHEMA)
# Layout 2 keeps superseded rows (marked) and adds the `runs` table; a layout-1 store is read as it
# is and migrated, keeping every row, when first written to.
READABLE_LAYOUTS = (1, 2)
# The cache key's own version: not the layout's, so a layout change leaves every stored cell reusable.
KEY_SCHEMA = 1
STORE_FILE = "records.sqlite"

_TABLES = {
    "meta": "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)",
    "records": "CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL,"
               " suite TEXT, status TEXT, created REAL, record TEXT NOT NULL, run TEXT,"
               " superseded INTEGER NOT NULL DEFAULT 0)",
    "claims": "CREATE TABLE IF NOT EXISTS claims (job TEXT PRIMARY KEY, owner TEXT, created REAL)",
    "runs": "CREATE TABLE IF NOT EXISTS runs (id TEXT PRIMARY KEY, started REAL, ended REAL, suite TEXT, profile TEXT,"
            " last_row INTEGER, info TEXT NOT NULL)",
}
# What layout 1 lacks: the run that stored a row, and whether a newer row of its key replaced it.
_V2_COLUMNS = (("run", "TEXT"), ("superseded", "INTEGER NOT NULL DEFAULT 0"))
_COLUMNS = {"meta": {"name", "value"}, "records": {"id", "key", "suite", "status", "created", "record"},
            "claims": {"job", "owner", "created"},
            "runs": {"id", "started", "ended", "suite", "profile", "last_row", "info"}}
# The tables _open checks whole before a command writes: small, and written by every command (a run's start, a claim).
_CHECKED_WHOLE = ("meta", "claims")
# The current row of each cell, in row order: latest() reads these rows only, not the superseded ones every recomputed
# cell leaves behind (a full scan read them all, so each recompute made every later warm run slower).
_CURRENT_INDEX = "CREATE INDEX IF NOT EXISTS records_current ON records (id) WHERE superseded = 0"
# How long a staged record may wait for the records that finish after it (`stage`, `commit_staged`): a run stores the
# results that arrive within it in one transaction, not one each (15 057 transactions of a cold kernel-limits run were
# 6.4 s of its parent's time), and a SIGKILL of the run loses at most this much finished work more than the jobs in
# flight. Every other write, a read of the records and closing the store commit what is staged first.
COMMIT_WINDOW = 0.1
# Below SQLite's limit on bound variables (999 before SQLite 3.32).
_CHUNK = 900


@dataclass(frozen=True)
class StoredRun:
    """One recorded run: its id, when it started and ended, its suite and profile, and its facts (provenance,
    cells asked for, counts, verdicts) as `info`."""

    id: str
    started: float
    ended: float | None
    suite: str | None
    profile: str | None
    last_row: int | None  # the newest record row when it ended: what it reported is as of then
    info: dict[str, Any]


class StoreError(CompbenchError, RuntimeError):
    """The store cannot be used: not a compbench store, corrupt, read-only, deleted, or another schema."""


class StoreSchemaError(StoreError):
    """The store holds records of another schema version."""


class StoreGoneError(StoreError):
    """The store file was deleted or replaced while this process was writing to it."""


# The store files (device, inode, size, mtime) this process read before writing (ResultStore._verify): the
# same unchanged file, written again through another ResultStore, is not read again.
_verified_files: set[tuple[int, ...]] = set()


def cell_key(definition: dict[str, Any]) -> str:
    """A stable hash of everything that determines a cell's result."""
    blob = json.dumps({"schema": KEY_SCHEMA, **definition}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj)}")


class ResultStore:
    """Records of one results directory in `<dir>/records.sqlite`."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / STORE_FILE
        self._db: sqlite3.Connection | None = None
        self._identity: tuple[int, int] | None = None
        self._damaged: dict[str, str] = {}  # key → why its newest stored row cannot be read
        self._warned: set[str] = set()
        self._layout = SCHEMA_VERSION  # the open file's layout (READABLE_LAYOUTS), set by _open
        self._indexed = False  # whether the open file has the index of current rows (_CURRENT_INDEX)
        self._wal = False  # whether this connection put the file in WAL mode (to_wal), which its first write does
        self._verified = False  # whether _verify read what this process relies on before its first write
        # The file state at which this store last read every current row whole (`__iter__`): that read is the check
        # _verify makes, so a run that reads its cache before its first write reads the rows once, not twice.
        self._read_whole: tuple[int, ...] | None = None
        self.run_id: str | None = None  # the run whose records `append` stores (begin_run), None outside one
        self._staged: list[tuple[Any, ...]] = []  # rows `stage` keeps for the next write transaction, oldest first
        self._staged_at = 0.0  # time.monotonic() when the oldest of them was staged

    @contextmanager
    def _errors(self) -> Iterator[None]:
        """Every SQLite or file-system error becomes a StoreError naming the file."""
        try:
            yield
        except StoreError:
            raise
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(_describe(self.path, exc)) from exc

    def _refuse(self, what: str) -> StoreError:
        return StoreError(f"{self.path}: {what}; {_ADVICE.format(path=self.path)}")

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        self._refuse_links()
        if not create and not self.path.exists():
            return None
        with self._errors():
            if self.path.is_dir():
                raise self._refuse("is a directory, not a compbench store file")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            existed = self.path.exists() and self.path.stat().st_size > 0
            db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT, isolation_level=None)
            try:
                db.execute("PRAGMA cell_size_check = ON")  # every page checked as it is read: _open checks no more
                if not self._open(db, create, existed):
                    db.close()
                    return None
            except BaseException:
                db.close()
                raise
            st = os.stat(self.path)
        self._db, self._identity = db, (st.st_dev, st.st_ino)
        return db

    def _refuse_links(self) -> None:
        """files.py's rule for the store: its folder and files (the journal's too) are never symbolic links.

        SQLite opens the file by its path and follows links: a linked `store/` or records.sqlite
        would put the store, and every write to it, outside the results directory.
        """
        folder = self.path.parent
        for name in (STORE_FILE, f"{STORE_FILE}-wal", f"{STORE_FILE}-shm", f"{STORE_FILE}-journal"):
            try:
                refuse_links(folder.parent, f"{folder.name}/{name}")
            except OutputError as exc:
                raise StoreError(str(exc)) from None

    def _open(self, db: sqlite3.Connection, create: bool, existed: bool) -> bool:
        """Check the file is a compbench store before writing anything to it; create the tables if new."""
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        tables -= {t for t in tables if t.startswith("sqlite_")}
        if tables:
            if not {"meta", "records"} <= tables:
                raise self._refuse(f"an SQLite database of another program (tables: {', '.join(sorted(tables))}), "
                                   "not a compbench store")
            for table in tables & set(_COLUMNS):
                columns = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                if missing := _COLUMNS[table] - columns:
                    raise self._refuse(f"another schema: its table {table!r} lacks the column(s) "
                                       f"{', '.join(sorted(missing))} of a compbench store")
            row = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
            if row is None or not str(row[0]).isdigit():
                raise self._refuse("another schema: no schema version in its meta table")
            if int(row[0]) not in READABLE_LAYOUTS:
                raise StoreSchemaError(
                    f"{self.path}: store schema version {row[0]} != {SCHEMA_VERSION} of this compbench; "
                    f"{_ADVICE.format(path=self.path)}"
                )
            if existed:
                # Catch damage (a truncated copy, a bad disk) before anything is written to it. A quick_check of the
                # whole file read every byte of it, every superseded row and every earlier run's row (the file twice,
                # in fact) at each open, so each run made the next one slower: the small tables every command writes
                # are checked whole, and elsewhere SQLite checks each page as it reads or changes it (cell_size_check,
                # set in _connect); a truncated file is refused by SQLite itself when the schema is read.
                problems = [r[0] for t in _CHECKED_WHOLE if t in tables for r in db.execute(f"PRAGMA quick_check({t})")]
                if problems and set(problems) != {"ok"}:
                    raise self._refuse(f"the compbench store is corrupt ({'; '.join(p for p in problems if p != 'ok')})")
            self._layout = int(row[0])
        elif not create:
            return False  # an empty file: nothing stored yet, and a reader does not create tables
        if create and (not {"meta", "records", "claims"} <= tables):
            with _immediate(db):
                for statement in _TABLES.values():
                    db.execute(statement)
                db.execute("CREATE INDEX IF NOT EXISTS records_key ON records (key)")
                db.execute(_CURRENT_INDEX)
                db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            if not tables:
                self._layout = SCHEMA_VERSION
        self._indexed = "records_current" in {n for (n,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        if create and self._layout < SCHEMA_VERSION:
            self._migrate(db)
        if create:
            self._index(db)
        if create:
            to_wal(db)
            self._wal = True
        db.execute("PRAGMA synchronous=NORMAL")
        return True

    def _migrate(self, db: sqlite3.Connection) -> None:
        """Layout 1 → 2 in one transaction, keeping every row: the run and superseded columns, the runs table."""
        with _immediate(db):
            (version,) = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
            if int(version) < SCHEMA_VERSION:  # another process may have migrated it since this one looked
                columns = {row[1] for row in db.execute("PRAGMA table_info(records)")}
                for name, declaration in _V2_COLUMNS:
                    if name not in columns:
                        db.execute(f"ALTER TABLE records ADD COLUMN {name} {declaration}")
                db.execute(_TABLES["runs"])
                # Layout 1 deleted a key's older rows as it stored a newer one: at most one row per key is current.
                db.execute("UPDATE records SET superseded = 1 WHERE id NOT IN (SELECT MAX(id) FROM records GROUP BY key)")
                db.execute("UPDATE meta SET value = ? WHERE name = 'schema_version'", (str(SCHEMA_VERSION),))
        self._layout = SCHEMA_VERSION

    def _verify(self, db: sqlite3.Connection) -> None:
        """Before this process first writes to the file, read the pages every command reads or writes: the current rows
        (whole, through their index) and the last page of each table a write extends, so that damage there refuses the
        store before anything is written (cell_size_check makes SQLite check each page it reads). Not the superseded
        rows nor earlier runs' rows: a check of those read the whole file each time, and each run made it larger."""
        if self._read_whole is None or self._read_whole != self._file_state():
            db.execute(f"SELECT SUM(LENGTH(record)) FROM records WHERE {self._current}").fetchone()
        for table in ("records", "runs", "claims") if self._layout >= 2 else ("records", "claims"):
            db.execute(f"SELECT MAX(rowid) FROM {table}").fetchone()
        self._verified = True
        if state := self._file_state():
            _verified_files.add(state)

    def _file_state(self) -> tuple[int, ...]:
        """The store file as _verify saw it: another file, or this one changed since (by a copy, an editor, a
        checkpoint), is read again."""
        try:
            st = os.stat(self.path)
        except OSError:
            return ()  # gone: the write's _check_same_file says so
        return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    def _index(self, db: sqlite3.Connection) -> None:
        """Add the index of current rows to a store written before it (one scan of the records, once)."""
        if not self._indexed and self._layout >= 2:
            with _immediate(db):
                db.execute(_CURRENT_INDEX)
            self._indexed = True

    @property
    def _current(self) -> str:
        """The SQL condition of the rows every reader uses: the current one of each key (layout 1 kept no others)."""
        return "superseded = 0" if self._layout >= 2 else "1"

    def _check_same_file(self) -> None:
        """Raise StoreGoneError if the path no longer names the file this connection writes to."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            raise StoreGoneError(
                f"{self.path} was deleted while this run was writing to it (by hand, or by an older compbench's "
                "--force); the records this run stored are gone with it; run the same command again"
            ) from None
        if (st.st_dev, st.st_ino) != self._identity:
            raise StoreGoneError(
                f"{self.path} was replaced by another file while this run was writing to it; "
                "nothing more is written; run the same command again to store this run's cells in the new file"
            )

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction on the store this process opened (never on a deleted or replaced file)."""
        db = self._connect(create=True)
        assert db is not None
        with self._errors():
            if db.in_transaction:
                # An interrupt (Ctrl-C, SIGTERM) that landed between BEGIN and COMMIT/ROLLBACK of an
                # earlier write left its transaction open: end it, or this BEGIN fails and, at close,
                # the claims this process holds would not be released.
                db.execute("ROLLBACK")
            if not self._verified and self._file_state() not in _verified_files:
                try:
                    self._verify(db)
                except BaseException:
                    self._close()  # refused as at open: no connection, so no -wal or -shm file, is left behind
                    raise
            self._verified = True
            if not self._wal:  # opened by a reader first, maybe in rollback mode (a copy_to copy): WAL before writing
                to_wal(db)
                self._wal = True
            if self._layout < SCHEMA_VERSION:  # opened by a reader first: migrate before the first write
                self._migrate(db)
            self._index(db)
            staged = list(self._staged)
            with _immediate(db):
                try:
                    self._check_same_file()
                except StoreGoneError:
                    self._staged = []  # nowhere anyone reads: the error says they are lost, once
                    raise
                self._insert(db, staged)  # first: a write after them (an append, a claim released) sees them stored
                yield db
            # Committed: only now are they off the list (a transaction rolled back, by Ctrl-C too, leaves them staged
            # for the next write, which end_run and release_all, run as every run stops, always are).
            self._staged = self._staged[len(staged):]

    def open(self, write: bool = False) -> None:
        """Open the store now (creating it when `write`), so a file that cannot be used fails early.

        With `write`, a first small write proves the file and its directory are writable.
        """
        if write:
            with self._write() as db:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('last_writer', ?)", (process_owner(),))
        else:
            self._connect(create=False)

    def verify(self) -> None:
        """Raise StoreGoneError if the store file was deleted or replaced since this process opened it (open or closed)."""
        # The identity outlives close(): a run verifies after its runner closed the store, and checking only an open
        # connection made that end-of-run check a no-op.
        if self._identity is not None:
            self._check_same_file()

    def __iter__(self) -> Iterator[CellRecord]:
        return self._current_rows(None)

    def _current_rows(self, wanted: frozenset[str] | None) -> Iterator[CellRecord]:
        """The current rows' records, in row order; with `wanted`, only those of these keys are decoded and yielded."""
        self.commit_staged()  # a read sees every record this process stored
        with self._errors():
            db = self._connect(create=False)
            if db is None:
                return
            state = self._file_state()
            try:
                # Read whole before the first yield: a write begun while this statement held its snapshot, once another
                # process wrote after it, failed at once (SQLITE_BUSY_SNAPSHOT, "database is locked"), never waiting.
                rows = [r for r in db.execute(f"SELECT {_ROW} FROM records WHERE {self._current} ORDER BY id")
                        if wanted is None or r[0] in wanted]
            except sqlite3.DatabaseError:
                self._close()  # a damaged file, refused as _verify refuses it: no -wal or -shm file is left behind
                raise
            if state == self._file_state():  # every current row read, in a file no checkpoint changed meanwhile
                self._read_whole = state
            yield from self._rows(rows)

    def _rows(self, rows: Any) -> Iterator[CellRecord]:
        """The records of rows selected as _ROW; a damaged one is skipped and remembered by its key."""
        for key, text, token, light in rows:
            try:
                record = _read(text, light, token)
            except _DAMAGE as exc:
                self._damaged[str(key)] = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                continue
            self._damaged.pop(record.key, None)  # a newer good row of the cell supersedes a damaged one
            yield record

    def _report_damaged(self, found: dict[str, CellRecord]) -> None:
        """One line per damaged row with no readable record of its cell: it counts as missing."""
        for key, why in self._damaged.items():
            if key not in found and key not in self._warned:
                self._warned.add(key)
                print(f"compbench: warning: {self.path}: the stored record of cell {key} is damaged ({why}); it "
                      f"counts as missing and `compbench run` computes it again", file=sys.stderr)

    def latest(self, keys: Iterable[str] | None = None) -> dict[str, CellRecord]:
        """The newest readable record per cell key (only `keys`, when given: the JSON of no other row is decoded, so a
        run reads its own cells' records, not every record of a store shared with other suites or holding cells its
        suite no longer has); damaged rows are named and skipped."""
        wanted = None if keys is None else frozenset(keys)
        out = {r.key: r for r in self._current_rows(wanted)}
        self._report_damaged(out)
        return out

    def lookup(self, keys: list[str], since: float | None = None) -> dict[str, CellRecord]:
        """The newest stored record for each of `keys` that has one, stored at or after `since` if given.

        Reads the file again each time, so it sees other processes' writes (and this one's staged records, committed
        first).
        """
        self.commit_staged()
        with self._errors():
            db = self._connect(create=False)
            if db is None or not keys:
                return {}
            marks = ",".join("?" * len(keys))
            sql = f"SELECT {_ROW} FROM records WHERE {self._current} AND key IN ({marks})"
            args: list[Any] = list(keys)
            if since is not None:
                sql += " AND created >= ?"
                args.append(since)
            found = {r.key: r for r in self._rows(db.execute(sql + " ORDER BY id", args))}
            self._report_damaged(found)
            return found

    def claim(self, job: str) -> bool:
        """Claim a job for this process; False while another live process holds it."""
        return job in self.claim_many([job])

    def claim_many(self, jobs: list[str]) -> set[str]:
        """Claim every job no other live process holds, in one transaction; returns those claimed."""
        me = process_owner()
        now = time.time()
        got: set[str] = set()
        with self._write() as db:
            for job in dict.fromkeys(jobs):
                row = db.execute("SELECT owner, created FROM claims WHERE job = ?", (job,)).fetchone()
                if row is not None and row[0] != me and claim_is_live(row[0], row[1], now):
                    continue
                got.add(job)
            db.executemany("INSERT OR REPLACE INTO claims VALUES (?, ?, ?)", [(job, me, now) for job in got])
        return got

    def release(self, job: str) -> None:
        """Drop this process's claim on a job."""
        self.release_many([job])

    def release_many(self, jobs: list[str]) -> None:
        """Drop this process's claims on these jobs, in one transaction."""
        me = process_owner()
        with self._write() as db:
            db.executemany("DELETE FROM claims WHERE job = ? AND owner = ?", [(job, me) for job in jobs])

    def release_all(self) -> None:
        """Drop every claim this process holds (a run that stops leaves none behind); what is staged is committed with it."""
        if self._db is not None:
            with self._write() as db:
                db.execute("DELETE FROM claims WHERE owner = ?", (process_owner(),))

    def claims(self) -> list[tuple[str, str, float]]:
        """Every claim in the store: (job, owner, created)."""
        with self._errors():
            db = self._connect(create=False)
            return [] if db is None else [tuple(r) for r in db.execute("SELECT job, owner, created FROM claims")]

    def append(self, records: list[CellRecord]) -> None:
        """Store records in a single transaction, with any staged before them; older records of the same keys are kept,
        superseded."""
        self.stage(records)
        self.commit_staged()

    def stage(self, records: list[CellRecord]) -> None:
        """Keep one finished job's records for the next write transaction (all of them or none, as with `append`):
        `commit_staged` commits them, as does every other write, a read of the records and `close`."""
        rows = [
            (r.key, r.suite, r.status.value, time.time(), json.dumps(r.to_dict(), default=_jsonable), self.run_id)
            for r in as_records(records)
        ]
        if rows and not self._staged:
            self._staged_at = time.monotonic()
        self._staged.extend(rows)

    def commit_staged(self, window: float = 0.0) -> float | None:
        """Commit the staged records in one transaction once the oldest has waited `window` seconds; the seconds left
        until it has (None: nothing is staged), for a caller that waits meanwhile to wait no longer."""
        if not self._staged:
            return None
        left = self._staged_at + window - time.monotonic()
        if left > 0:
            return left
        with self._write():
            pass  # _write commits what is staged
        return None

    def _insert(self, db: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
        """Insert rows as the current ones of their keys: the rows stored before of those keys, and a row followed by
        another of its key in `rows`, are marked superseded."""
        if not rows:
            return
        keys = sorted({r[0] for r in rows})
        for i in range(0, len(keys), _CHUNK):
            chunk = keys[i:i + _CHUNK]
            db.execute(f"UPDATE records SET superseded = 1 WHERE superseded = 0 AND key IN ({','.join('?' * len(chunk))})",
                       chunk)
        last = {r[0]: n for n, r in enumerate(rows)}
        db.executemany("INSERT INTO records (key, suite, status, created, record, run, superseded) VALUES (?, ?, ?, ?, ?, ?, ?)",
                       [(*r, int(last[r[0]] != n)) for n, r in enumerate(rows)])

    # -- runs: one row per `run` / `evaluate`, its provenance, and the cells it reported -----------------

    def begin_run(self, suite: str, profile: str | None, info: dict[str, Any]) -> str:
        """Record a run's start (its provenance in `info`); its id, which `append` then stores with each record."""
        run_id = f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"
        with self._write() as db:
            db.execute("INSERT INTO runs (id, started, suite, profile, info) VALUES (?, ?, ?, ?, ?)",
                       (run_id, time.time(), suite, profile, json.dumps(info, default=str)))
        self.run_id = run_id
        return run_id

    def end_run(self, run_id: str, info: dict[str, Any]) -> None:
        """Record a run's end: `info` is merged into what its start recorded; the newest row it saw is remembered."""
        with self._write() as db:
            row = db.execute("SELECT info FROM runs WHERE id = ?", (run_id,)).fetchone()
            if row is None:
                return
            merged = {**json.loads(row[0]), **info}
            (last,) = db.execute("SELECT MAX(id) FROM records").fetchone()
            # the first call ends it; later ones (its verdicts, judged after it) only add facts
            db.execute("UPDATE runs SET ended = COALESCE(ended, ?), last_row = COALESCE(last_row, ?), info = ? WHERE id = ?",
                       (time.time(), last, json.dumps(merged, default=str), run_id))

    def runs(self) -> list[StoredRun]:
        """Every run the store recorded, oldest first ([] for a store written before runs were recorded)."""
        with self._errors():
            db = self._connect(create=False)
            if db is None or self._layout < 2:
                return []
            out = []
            for run_id, started, ended, suite, profile, last_row, info in db.execute(
                    "SELECT id, started, ended, suite, profile, last_row, info FROM runs ORDER BY started, id"):
                try:
                    facts = json.loads(info)
                except ValueError:
                    facts = {}
                out.append(StoredRun(run_id, started, ended, suite, profile, last_row,
                                     facts if isinstance(facts, dict) else {}))
            return out

    def run_records(self, run: StoredRun) -> list[CellRecord]:
        """The records a run reported: for each cell it asked for, the newest row stored by the time it ended
        (superseded since or not), under the names that run gave it."""
        cells = [c for c in run.info.get("cells", []) if isinstance(c, list) and len(c) == 5]
        last = run.last_row if run.last_row is not None else 2**62
        found: dict[str, CellRecord] = {}
        with self._errors():
            db = self._connect(create=False)
            if db is None:
                return []
            keys = sorted({str(c[0]) for c in cells})
            for i in range(0, len(keys), 900):  # below SQLite's limit on bound variables
                chunk = keys[i:i + 900]
                sql = f"SELECT {_ROW} FROM records WHERE id <= ? AND key IN ({','.join('?' * len(chunk))}) ORDER BY id"
                found.update({r.key: r for r in self._rows(db.execute(sql, [last, *chunk]))})
        return [_relabelled(found[key], model=model, task=task, group=group, suite=run.suite)
                for key, model, task, _seed, group in cells if key in found]

    def copy_to(self, target: Path) -> bool:
        """A consistent snapshot of the store (every row, superseded ones and runs included) as the new SQLite file
        `target`, without claims or a write-ahead log; False when there is no store to copy.

        SQLite's backup API: a run writing to the store meanwhile is neither blocked nor half copied.
        """
        with self._errors():
            db = self._connect(create=False)
            if db is None:
                return False
            snapshot(db, target)
        return True

    def close(self) -> None:
        """Commit what is staged, then close the database connection (also when that commit fails: its error is raised)."""
        try:
            if self._staged and self._db is not None and self._verified:  # not verified: refused before any write
                self.commit_staged()
        finally:
            self._close()

    def _close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
            self._wal = False
            # Checked before this process first wrote, then written by it (closing checkpoints the log into the file,
            # so its size and time change): the next ResultStore of this process on this file (the run's verdicts,
            # after the runner closed its own) need not read it again; a change by anyone else since is read again.
            if self._verified and self._identity is not None and (state := self._file_state())[:2] == self._identity:
                _verified_files.add(state)
