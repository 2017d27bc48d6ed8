"""Append-only JSON-lines store: one record per finished cell, flushed as it finishes."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


class StoreSchemaError(RuntimeError):
    """The store holds records of another schema version."""


def cell_key(definition: dict[str, Any]) -> str:
    """A stable hash of everything that determines a cell's result."""
    blob = json.dumps({"schema": SCHEMA_VERSION, **definition}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


class ResultStore:
    """Records of one suite's runs in `<dir>/records.jsonl`; a torn last line is ignored."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / "records.jsonl"
        self._fh: Any = None
        self._synced = time.monotonic()

    def __iter__(self) -> Iterator[dict[str, Any]]:
        if not self.path.exists():
            return
        with self.path.open(encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.endswith("\n"):
                    return  # a write interrupted mid-line: that cell did not finish
                rec = json.loads(line)
                if rec.get("schema_version") != SCHEMA_VERSION:
                    raise StoreSchemaError(
                        f"{self.path}:{n}: record schema version {rec.get('schema_version')} "
                        f"!= {SCHEMA_VERSION} of this compbench; move the old store away or use --force"
                    )
                yield rec

    def latest(self) -> dict[str, dict[str, Any]]:
        """The newest record per cell key."""
        return {r["key"]: r for r in self}

    def append(self, records: list[dict[str, Any]]) -> None:
        """Append finished records; each line reaches the OS at once (survives a killed process)."""
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = self.path.open("a", encoding="utf-8")
        for rec in records:
            self._fh.write(json.dumps({"schema_version": SCHEMA_VERSION, **rec}, default=_jsonable) + "\n")
        self._fh.flush()
        # fsync (durability against an OS crash) at most once a second: per cell it costs ms.
        if time.monotonic() - self._synced > 1.0:
            os.fsync(self._fh.fileno())
            self._synced = time.monotonic()

    def close(self) -> None:
        """Flush everything to disk and close the file."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())
            self._fh.close()
            self._fh = None

    def clear(self) -> None:
        """Remove every stored record (used by --force)."""
        self.close()
        self.path.unlink(missing_ok=True)


def _jsonable(obj: Any) -> Any:
    if hasattr(obj, "tolist"):
        return obj.tolist()
    raise TypeError(f"not JSON serialisable: {type(obj)}")
