"""A write to the store waits for another process's write, also where SQLite would answer "database is locked" at once.

SQLite's busy handler (the store's 60 s timeout) is not called for a connection that holds a read lock when it asks for
the write lock. Two runs sharing a store met that twice: switching a new store to WAL (a read of its header, then a
write, in one statement) while the other run switched it or wrote, which failed one of two concurrent runs in a CI
rehearsal (test_runs_survive's concurrent test); and a write begun while a read statement held its snapshot, once
another process had written after it (SQLITE_BUSY_SNAPSHOT). Each test builds that interleaving with two connections
(SQLite locks between connections of one process as between processes).
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path

from compbench.records import CellRecord
from compbench.store import ResultStore

HOLD = 1.0  # seconds the other connection keeps its write open


def _record(key: str) -> CellRecord:
    return CellRecord(key=key, task="t", model="m", seed=0, status="ok", metrics={"heldout_r2": 1.0})


def _rollback_mode_store(tmp_path: Path) -> Path:
    """A store in rollback-journal mode, as a bundle's copy of one is (ResultStore.copy_to), holding the cell `a`."""
    source = ResultStore(tmp_path / "source")
    source.append([_record("a")])
    target = tmp_path / "store"
    target.mkdir()
    assert source.copy_to(target / "records.sqlite")
    source.close()
    return target


@contextmanager
def _writing_elsewhere(directory: Path, store: ResultStore) -> Iterator[None]:
    """Another connection holding the store's write lock for HOLD seconds, then committing its row; `store` is closed,
    and the other connection's commit awaited, when the block ends."""
    other = sqlite3.connect(directory / "records.sqlite", isolation_level=None, check_same_thread=False, timeout=60)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO meta VALUES ('other', 'written')")
    timer = threading.Timer(HOLD, other.execute, ["COMMIT"])
    timer.start()
    try:
        yield
    finally:
        store.close()
        timer.join()
        other.close()


def _state(directory: Path) -> tuple[str, str | None, list[str]]:
    """The file's journal mode, the other connection's row, and the current cells."""
    with closing(sqlite3.connect(directory / "records.sqlite")) as db:
        mode = db.execute("PRAGMA journal_mode").fetchone()[0]
        other = db.execute("SELECT value FROM meta WHERE name = 'other'").fetchone()
        keys = sorted(k for (k,) in db.execute("SELECT key FROM records WHERE superseded = 0"))
    return mode, other and other[0], keys


def test_opening_a_store_to_write_waits_for_another_writer_before_switching_it_to_wal(tmp_path):
    # The race of two runs creating one store: the other has created it and is writing (its own switch to WAL); this
    # one finds it in rollback mode and switches it. That switch failed at once: "the store stayed locked".
    directory = _rollback_mode_store(tmp_path)
    store = ResultStore(directory)
    with _writing_elsewhere(directory, store):
        store.open(write=True)
        store.append([_record("b")])
    assert _state(directory) == ("wal", "written", ["a", "b"])


def test_a_store_first_read_then_written_is_written_in_wal_mode(tmp_path):
    # A run reads its cells before it writes, and the connection it read with was written in rollback mode, where each
    # commit waits for every reader; its first write now puts the file in WAL mode, waiting for the other writer.
    directory = _rollback_mode_store(tmp_path)
    store = ResultStore(directory)
    assert list(store.latest()) == ["a"]
    with _writing_elsewhere(directory, store):
        store.append([_record("b")])
    assert _state(directory) == ("wal", "written", ["a", "b"])


def test_a_write_while_reading_the_records_after_another_process_wrote_waits_not_fails(tmp_path):
    # Iterating the store's records, a caller stores one: the read's statement held its snapshot, another process had
    # committed since, and the write failed at once (SQLITE_BUSY_SNAPSHOT) instead of committing.
    directory = tmp_path / "store"
    store = ResultStore(directory)
    store.append([_record("a"), _record("b")])
    reading = iter(store)
    assert next(reading).key == "a"
    elsewhere = ResultStore(directory)
    elsewhere.append([_record("c")])
    elsewhere.close()
    try:
        store.append([_record("d")])
        assert [r.key for r in reading] == ["b"]  # the rest of what the read saw
    finally:
        store.close()
    assert _state(directory)[2] == ["a", "b", "c", "d"]
