"""Who holds a job claim in the store, and whether that process still runs (a claim of a dead or reused pid is stale)."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

CLAIM_TTL = 3600.0  # a claim whose process cannot be probed (another host, no start time) is trusted this long


def process_start_time(pid: int) -> str | None:
    """The start time of a local process (Linux: /proc/<pid>/stat field 22), None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing one.
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[19] if len(fields) > 19 else None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    except (OverflowError, ValueError):
        return False
    return True


_owner_cache: dict[int, str] = {}


def process_owner() -> str:
    """This process as a claim owner: 'host:pid:start time' (computed per pid, so forks differ)."""
    pid = os.getpid()
    if pid not in _owner_cache:
        _owner_cache[pid] = f"{socket.gethostname()}:{pid}:{process_start_time(pid) or ''}"
    return _owner_cache[pid]


def claim_is_live(owner: str, created: float, now: float | None = None) -> bool:
    """Whether a job claim still belongs to a running process.

    On this host a claim is stale when its pid is dead or now belongs to a process started at
    another time (a reused pid); a claim from another host, or without a start time to compare,
    is trusted for CLAIM_TTL seconds.
    """
    now = time.time() if now is None else now
    parts = owner.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit():
        host, pid_text, start = parts
    else:  # an owner written before claims carried a start time: 'host:pid'
        host, _, pid_text = owner.rpartition(":")
        start = ""
    if host != socket.gethostname():
        return now - created < CLAIM_TTL
    if not pid_text.isdigit() or not _pid_alive(int(pid_text)):
        return False
    current = process_start_time(int(pid_text))
    if start and current:
        return start == current
    return now - created < CLAIM_TTL
