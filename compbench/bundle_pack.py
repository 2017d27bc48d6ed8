"""A bundle's rows packed: the rows of the store's `records` and `runs` tables as lzma-compressed JSON lines in
`bundle_rows`.

A record's JSON is mostly its per-sample predictions written as decimal text (17 significant digits a float64):
a published store is 1-170 MB of it. lzma of that text is lossless by construction (the very rows come back, so
every float64 and the content hash are what the store held) and, measured on the published stores, smaller than
lzma of the same numbers as shuffled binary float64 (1.8 MB against 2.1 MB for sraven's 9.6 MB of records). A run
lists every cell it asked for (kernel-limits: 1.5 MB a run), so the runs are packed too.
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
PACKED = ("records", "runs")  # the store's tables a bundle packs, where it has them (layout 1 has no runs)
TABLE = ("CREATE TABLE bundle_rows (tbl TEXT NOT NULL, chunk INTEGER NOT NULL, size INTEGER NOT NULL, data BLOB NOT NULL,"
         " sha256 TEXT NOT NULL, PRIMARY KEY (tbl, chunk))")
CHUNK_BYTES = 16 * 2**20  # rows per chunk up to this much JSON; lzma's default dictionary is 8 MiB
MAX_CHUNK_BYTES = 512 * 2**20  # what a reader unpacks of one chunk at most (a chunk holds one record larger than CHUNK_BYTES)


class PackError(CompbenchError, ValueError):
    """A packed chunk of records is damaged: its hash, its size or its rows are not what the bundle says."""


def columns(db: sqlite3.Connection, table: str = "records") -> list[str]:
    """A table's columns, in order ([] where there is no such table; a layout-1 store's records have fewer)."""
    return [str(row[1]) for row in db.execute(f"PRAGMA table_info({table})")]


def pack(db: sqlite3.Connection) -> dict[str, list[str]]:
    """Move every row of the PACKED tables into lzma-compressed chunks of `bundle_rows`; each packed table's columns.

    Runs in autocommit mode; the caller VACUUMs afterwards to give the space back."""
    db.execute(TABLE)
    db.execute("BEGIN")
    packed = {table: names for table in PACKED if (names := columns(db, table))}
    for table, names in packed.items():
        _pack(db, table, names)
    db.execute("COMMIT")
    return packed


def _pack(db: sqlite3.Connection, table: str, names: list[str]) -> None:
    chunk, lines, size = 0, [], 0

    def flush() -> None:
        nonlocal chunk, lines, size
        if lines:
            data = "\n".join(lines).encode()
            db.execute("INSERT INTO bundle_rows VALUES (?, ?, ?, ?, ?)",
                       (table, chunk, len(data), lzma.compress(data), hashlib.sha256(data).hexdigest()))
            chunk, lines, size = chunk + 1, [], 0

    for row in db.execute(f"SELECT {', '.join(names)} FROM {table} ORDER BY rowid"):
        line = json.dumps(list(row), separators=(",", ":"))
        if lines and size + len(line) > CHUNK_BYTES:
            flush()
        lines.append(line)
        size += len(line) + 1
    flush()
    db.execute(f"DELETE FROM {table}")


def _unpacked(data: bytes, size: int, digest: str, where: str) -> bytes:
    if not 0 <= size <= MAX_CHUNK_BYTES:
        raise PackError(f"its packed {where} states {size} bytes unpacked (at most {MAX_CHUNK_BYTES})")
    unpacker = lzma.LZMADecompressor()
    try:
        text = unpacker.decompress(data, max_length=size + 1)  # never more than the chunk says it holds
    except lzma.LZMAError as exc:
        raise PackError(f"its packed {where} is not lzma data ({exc})") from None
    if len(text) != size or not unpacker.eof or hashlib.sha256(text).hexdigest() != digest:
        raise PackError(f"its packed {where} does not match its size and sha256")
    return text


def unpack(db: sqlite3.Connection, packed: dict[str, list[str]]) -> None:
    """Put the rows of `bundle_rows` back into their tables (`packed`: each table's columns) and drop `bundle_rows`."""
    found = {str(t) for (t,) in db.execute("SELECT DISTINCT tbl FROM bundle_rows")}
    if not found <= set(packed) or not set(packed) <= set(PACKED):
        raise PackError(f"its packed rows are of the tables {sorted(found)}, its manifest names {sorted(packed)}")
    db.execute("BEGIN")
    for table, names in packed.items():
        if names != columns(db, table):
            raise PackError(f"its packed {table} have the columns {names}, its {table} table {columns(db, table)}")
        insert = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        for chunk, size, data, digest in db.execute("SELECT chunk, size, data, sha256 FROM bundle_rows WHERE tbl = ? "
                                                    "ORDER BY chunk", (table,)).fetchall():
            rows: list[Any] = []
            for line in _unpacked(bytes(data), int(size), str(digest), f"{table}' chunk {chunk}").split(b"\n"):
                row = json.loads(line)
                if not isinstance(row, list) or len(row) != len(names):
                    raise PackError(f"its packed {table}' chunk {chunk} holds a row that is not one of {len(names)} columns")
                rows.append(row)
            db.executemany(insert, rows)
    db.execute("DROP TABLE bundle_rows")
    db.execute("COMMIT")
