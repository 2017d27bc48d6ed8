"""Whether a report file is still, byte for byte, what was written: by its sha256, or by the status it had when that
sha256 last matched (STATUS_CACHE in report.publish), so a warm run does not hash its own report again."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from compbench.files import sha256_contained, stat_contained

# A file whose status changed less than this long ago is hashed, not known by its status: a change made in the same
# tick of the file system's clock (coarse: up to 2 s on some file systems) leaves its times as they were.
SETTLED_NS = 2 * 10**9


def _signature(out_dir: Path, relative: str) -> list[int] | None:
    """The file's size, modification and change times and inode, once it has settled (SETTLED_NS); None before, or if
    it is not a regular file of out_dir. Any write, `touch` or copy over it changes its change time, which no one
    can set back."""
    st = stat_contained(out_dir, relative)
    if st is None or time.time_ns() - st.st_ctime_ns < SETTLED_NS:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def unchanged(out_dir: Path, entry: dict[str, Any], statuses: dict[str, Any]) -> bool:
    """Whether every file of a manifest entry is still, byte for byte, what was written (its recorded sha256).

    A file whose status is the one `statuses` (STATUS_CACHE) recorded when it last had that sha256 is not read again (a
    warm kernel-limits run hashed 85 MB of its own report); any other is hashed, and its status recorded when it matches.
    """
    files, beside, digests = entry.get("files"), entry.get("beside", []), entry.get("sha256")
    if not (isinstance(files, list) and isinstance(beside, list) and isinstance(digests, dict)):
        return False
    for f in (*files, *beside):
        if not (isinstance(f, str) and isinstance(digests.get(f), str)):
            return False
        sig = _signature(out_dir, f)  # before the hash: a change while it is read changes the status recorded
        if sig is not None and statuses.get(f) == [*sig, digests[f]]:
            continue
        if sha256_contained(out_dir, f) != digests[f]:
            return False
        if sig is not None:
            statuses[f] = [*sig, digests[f]]
    return True
