"""File names of a site's pages, from names compbench did not choose (model ids, suite names)."""

from __future__ import annotations

import hashlib
import re

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_MOST = 80  # far below every file system's limit on a name, with room for the hash and the extension
# Names the site itself uses next to the suites' folders, and names Windows will not create.
RESERVED = frozenset({"index", "models", "con", "prn", "aux", "nul", *(f"com{i}" for i in range(10)),
                      *(f"lpt{i}" for i in range(10))})


def safe_name(name: str) -> str:
    """A file name for `name`: itself when it is plain ASCII letters, digits, `.`, `_`, `-` (not leading `.`, not
    reserved); else its plain part with a hash of the whole, so that two names never share a file."""
    plain = _UNSAFE.sub("_", name).strip("._-")[:_MOST]
    if plain and plain == name and plain.lower() not in RESERVED:
        return plain
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{plain}-{digest}" if plain else f"n-{digest}"
