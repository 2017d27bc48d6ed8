"""The store's SQLite file: what is wrong with one, in words, the transaction every write goes through, its journal
mode, and a copy of it."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SQLITE_MAGIC = b"SQLite format 3\x00"
# How long a write waits for another process's write (SQLite's busy handler), and how long `to_wal` keeps retrying.
BUSY_TIMEOUT = 60.0
ADVICE = "nothing in it was changed; move it aside (mv {path} {path}.bad) or use another results directory (--results DIR)"


def describe(path: Path, exc: BaseException) -> str:
    """What is wrong with the store file, in words, and what to do about it."""
    name = getattr(exc, "sqlite_errorname", "")
    advice = ADVICE.format(path=path)
    if path.is_dir():
        return f"{path}: is a directory, not a compbench store file; {advice}"
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_MAGIC))
    except OSError:
        head = SQLITE_MAGIC
    if head and len(head) == len(SQLITE_MAGIC) and head != SQLITE_MAGIC or name == "SQLITE_NOTADB":
        return f"{path}: not a compbench store: not an SQLite database (a corrupt file or another kind of file); {advice}"
    if name.startswith("SQLITE_CORRUPT") or "malformed" in str(exc):
        return f"{path}: the compbench store is corrupt (damaged or truncated: {exc}); {advice}"
    if name.startswith("SQLITE_READONLY") or isinstance(exc, PermissionError) or "readonly" in str(exc):
        return (f"{path}: the store is read-only (the file or its directory cannot be written: {exc}); "
                "make it writable, or use another results directory (--results DIR)")
    if name.startswith("SQLITE_CANTOPEN") or isinstance(exc, OSError):
        return (f"{path}: the store cannot be opened for writing ({exc}): a read-only directory, missing "
                "permissions, or a -wal/-shm file that is not a file; use another results directory (--results DIR)")
    if name.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return f"{path}: the store stayed locked by another process ({exc}); try again when it has finished"
    if name == "SQLITE_FULL":
        return f"{path}: the disk is full ({exc}); free space and run the same command again"
    return f"{path}: SQLite error {name or type(exc).__name__}: {exc}; {advice}"



@contextmanager
def immediate(db: sqlite3.Connection) -> Iterator[None]:
    """One BEGIN IMMEDIATE transaction: committed when the block ends, rolled back on any exception (Ctrl-C too).

    A Ctrl-C can land between two bytecodes anywhere, also just after BEGIN returned or in the handler before its
    ROLLBACK ran: the transaction, and the store's write lock, then stayed open, and the next writer in this
    process (another connection: SQLite's busy wait, 60 s, in C, where Ctrl-C is not seen) hung. So BEGIN is inside
    the guarded block, the rollback is of whatever transaction is open, and a transaction an interrupt left open
    before is rolled back before a new one begins.
    """
    try:
        if db.in_transaction:
            db.execute("ROLLBACK")
        db.execute("BEGIN IMMEDIATE")
        yield
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def to_wal(db: sqlite3.Connection, timeout: float = BUSY_TIMEOUT) -> None:
    """Put the file in WAL mode (a no-op when it is), waiting up to `timeout` seconds for another process's write.

    The switch reads the file's header and then writes it in one statement, and SQLite calls no busy handler for a
    connection that holds a read lock when it asks for the write lock: while another process writes (two runs creating
    one store, the other's switch included), the switch failed at once with SQLITE_BUSY, "database is locked", whatever
    the busy timeout. Each failed try ends its statement and its read lock, so retrying lets the other writer finish.
    """
    deadline = time.monotonic() + timeout
    pause = 0.001
    while True:
        try:
            if db.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not getattr(exc, "sqlite_errorname", "").startswith("SQLITE_BUSY") or time.monotonic() >= deadline:
                raise
        time.sleep(pause)
        pause = min(2 * pause, 0.05)


def snapshot(db: sqlite3.Connection, target: Path) -> None:
    """A consistent copy of `db` as the new SQLite file `target`, in rollback mode and without claims (SQLite's backup
    API: a run writing to the store meanwhile is neither blocked nor half copied)."""
    out = sqlite3.connect(target, isolation_level=None)
    try:
        db.backup(out)
        out.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        if "claims" in {n for (n,) in out.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}:
            out.execute("DELETE FROM claims")  # the jobs of processes on this machine, meaningless elsewhere
    finally:
        out.close()
