"""A bundle's records packed: the rows of the store's `records` table as lzma-compressed JSON lines in `bundle_records`.

A record's JSON is mostly its per-sample predictions written as decimal text (17 significant digits a float64):
a published store is 1-170 MB of it. lzma of that text is lossless by construction (the very rows come back, so
every float64 and the content hash are what the store held) and, measured on the published stores, smaller than
lzma of the same numbers as shuffled binary float64 (1.8 MB against 2.1 MB for sraven's 9.6 MB of records).
Chunks keep memory bounded on both sides; a chunk states its unpacked size, which is checked while unpacking.
"""

from __future__ import annotations

import hashlib
import json
import lzma
import sqlite3
from typing import Any

from compbench.errors import CompbenchError

PACKING = "lzma-jsonl"
TABLE = "CREATE TABLE bundle_records (chunk INTEGER PRIMARY KEY, size INTEGER NOT NULL, data BLOB NOT NULL, sha256 TEXT NOT NULL)"
CHUNK_BYTES = 16 * 2**20  # rows per chunk up to this much JSON; lzma's default dictionary is 8 MiB
MAX_CHUNK_BYTES = 512 * 2**20  # what a reader unpacks of one chunk at most (a chunk holds one record larger than CHUNK_BYTES)


class PackError(CompbenchError, ValueError):
    """A packed chunk of records is damaged: its hash, its size or its rows are not what the bundle says."""


def columns(db: sqlite3.Connection) -> list[str]:
    """The `records` table's columns, in order (a layout-1 store has fewer)."""
    return [str(row[1]) for row in db.execute("PRAGMA table_info(records)")]


def pack(db: sqlite3.Connection) -> int:
    """Move every row of `records` into lzma-compressed chunks of `bundle_records`; the number of rows moved.

    Runs in autocommit mode; the caller VACUUMs afterwards to give the space back."""
    names = columns(db)
    db.execute(TABLE)
    chunk, lines, size, moved = 0, [], 0, 0

    def flush() -> None:
        nonlocal chunk, lines, size
        if lines:
            data = "\n".join(lines).encode()
            db.execute("INSERT INTO bundle_records VALUES (?, ?, ?, ?)",
                       (chunk, len(data), lzma.compress(data), hashlib.sha256(data).hexdigest()))
            chunk, lines, size = chunk + 1, [], 0

    db.execute("BEGIN")
    for row in db.execute(f"SELECT {', '.join(names)} FROM records ORDER BY id"):
        line = json.dumps(list(row), separators=(",", ":"))
        if lines and size + len(line) > CHUNK_BYTES:
            flush()
        lines.append(line)
        size += len(line) + 1
        moved += 1
    flush()
    db.execute("DELETE FROM records")
    db.execute("COMMIT")
    return moved


def _unpacked(data: bytes, size: int, digest: str, chunk: int) -> bytes:
    if not 0 <= size <= MAX_CHUNK_BYTES:
        raise PackError(f"its packed records' chunk {chunk} states {size} bytes unpacked (at most {MAX_CHUNK_BYTES})")
    unpacker = lzma.LZMADecompressor()
    try:
        text = unpacker.decompress(data, max_length=size + 1)  # never more than the chunk says it holds
    except lzma.LZMAError as exc:
        raise PackError(f"its packed records' chunk {chunk} is not lzma data ({exc})") from None
    if len(text) != size or not unpacker.eof or hashlib.sha256(text).hexdigest() != digest:
        raise PackError(f"its packed records' chunk {chunk} does not match its size and sha256")
    return text


def unpack(db: sqlite3.Connection, names: list[str]) -> int:
    """Put the rows of `bundle_records` back into `records` (columns `names`) and drop the packed table; rows restored."""
    if names != columns(db):
        raise PackError(f"its packed records have the columns {names}, its records table {columns(db)}")
    restored = 0
    insert = f"INSERT INTO records ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
    db.execute("BEGIN")
    for chunk, size, data, digest in db.execute("SELECT chunk, size, data, sha256 FROM bundle_records ORDER BY chunk").fetchall():
        rows: list[Any] = []
        for line in _unpacked(bytes(data), int(size), str(digest), chunk).split(b"\n"):
            row = json.loads(line)
            if not isinstance(row, list) or len(row) != len(names):
                raise PackError(f"its packed records' chunk {chunk} holds a row that is not one of {len(names)} columns")
            rows.append(row)
        db.executemany(insert, rows)
        restored += len(rows)
    db.execute("DROP TABLE bundle_records")
    db.execute("COMMIT")
    return restored
