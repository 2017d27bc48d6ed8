"""The result store: SQLite in WAL mode, one row per finished cell, committed as each job finishes.

A killed process loses at most the job in flight (a transaction is all or nothing); several
processes can write the same store at once (WAL + busy timeout); a store written by another
schema version is refused with a clear message, never misread.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
STORE_FILE = "records.sqlite"


OWNER = f"{socket.gethostname()}:{os.getpid()}"
CLAIM_TTL = 3600.0  # a claim from another host is trusted this long (its process cannot be probed)


def _alive(owner: str, created: float) -> bool:
    host, _, pid = owner.rpartition(":")
    if host != socket.gethostname():
        return time.time() - created < CLAIM_TTL
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError):
        return False
    except PermissionError:
        return True
    return True


class StoreSchemaError(RuntimeError):
    """The store holds records of another schema version."""


def cell_key(definition: dict[str, Any]) -> str:
    """A stable hash of everything that determines a cell's result."""
    blob = json.dumps({"schema": SCHEMA_VERSION, **definition}, sort_keys=True, default=str)
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

    def _connect(self, create: bool) -> sqlite3.Connection | None:
        if self._db is not None:
            return self._db
        if not create and not self.path.exists():
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT)")
        db.execute(
            "CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL,"
            " suite TEXT, status TEXT, created REAL, record TEXT NOT NULL)"
        )
        db.execute("CREATE INDEX IF NOT EXISTS records_key ON records (key)")
        db.execute("CREATE TABLE IF NOT EXISTS claims (job TEXT PRIMARY KEY, owner TEXT, created REAL)")
        db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        (version,) = db.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone()
        if int(version) != SCHEMA_VERSION:
            db.close()
            raise StoreSchemaError(
                f"{self.path}: store schema version {version} != {SCHEMA_VERSION} of this compbench; "
                "move the old results directory away (or use --force to start it afresh)"
            )
        self._db = db
        return db

    def __iter__(self):  # type: ignore[no-untyped-def]
        db = self._connect(create=False)
        if db is None:
            return
        for (text,) in db.execute("SELECT record FROM records ORDER BY id"):
            yield json.loads(text)

    def latest(self, keys: list[str] | None = None) -> dict[str, dict[str, Any]]:
        """The newest record per cell key (only `keys`, when given)."""
        out = {r["key"]: r for r in self}
        return out if keys is None else {k: out[k] for k in keys if k in out}

    def lookup(self, keys: list[str]) -> dict[str, dict[str, Any]]:
        """The newest stored record for each of `keys` that has one (sees other processes' writes)."""
        db = self._connect(create=False)
        if db is None or not keys:
            return {}
        marks = ",".join("?" * len(keys))
        rows = db.execute(f"SELECT record FROM records WHERE key IN ({marks}) ORDER BY id", keys)
        return {r["key"]: r for r in (json.loads(text) for (text,) in rows)}

    def claim(self, job: str) -> bool:
        """Claim a job for this process; False while another live process holds it."""
        db = self._connect(create=True)
        assert db is not None
        db.execute("BEGIN IMMEDIATE")
        try:
            row = db.execute("SELECT owner, created FROM claims WHERE job = ?", (job,)).fetchone()
            if row is not None and row[0] != OWNER and _alive(row[0], row[1]):
                db.execute("ROLLBACK")
                return False
            db.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?)", (job, OWNER, time.time()))
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")
        return True

    def release(self, job: str) -> None:
        """Drop this process's claim on a job."""
        db = self._connect(create=True)
        assert db is not None
        db.execute("DELETE FROM claims WHERE job = ? AND owner = ?", (job, OWNER))

    def append(self, records: list[dict[str, Any]]) -> None:
        """Store one finished job's records in a single transaction."""
        db = self._connect(create=True)
        assert db is not None
        rows = [
            (r["key"], r.get("suite"), r.get("status"), time.time(),
             json.dumps({"schema_version": SCHEMA_VERSION, **r}, default=_jsonable))
            for r in records
        ]
        db.execute("BEGIN IMMEDIATE")  # one transaction: all of the job's records or none
        try:
            db.executemany("INSERT INTO records (key, suite, status, created, record) VALUES (?, ?, ?, ?, ?)", rows)
        except BaseException:
            db.execute("ROLLBACK")
            raise
        db.execute("COMMIT")

    def close(self) -> None:
        """Close the database connection."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def clear(self) -> None:
        """Remove every stored record (used by --force)."""
        self.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(self.path) + suffix).unlink(missing_ok=True)
