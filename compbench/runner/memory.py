"""How this process's C allocator treats large blocks: kept for reuse instead of handed back each time.

glibc serves a block above its mmap threshold (128 KiB, rising to at most 32 MiB as it adapts) with
a fresh `mmap`, and `munmap`s it on free. Training and the empirical NTK allocate and free
activations, gradients and Jacobians of tens to hundreds of MiB every step, so every step
page-faulted the same memory back in, zeroed by the kernel: on kernel-limits-images, 13.5 M minor
page faults and 23 s of system time in a 102 s run (0.45 M and 2-3 s with the blocks kept).

`keep_freed_memory` raises the mmap threshold to 1 GiB (glibc ≤ 2.33 accepts at most 32 MiB: then
that) and the trim threshold to 1 GiB, so freed blocks stay in the heap for the next step. The
process keeps its peak heap instead of shrinking after it (more, if blocks of varying sizes
fragment it). Nothing is changed under another C library, with `COMPBENCH_MALLOC=system`, or where
the user has set glibc's own malloc settings (`MALLOC_MMAP_THRESHOLD_`, `MALLOC_TRIM_THRESHOLD_`,
`GLIBC_TUNABLES` naming glibc.malloc).
"""

from __future__ import annotations

import ctypes
import os

__all__ = ["keep_freed_memory", "THRESHOLD"]

THRESHOLD = 1 << 30  # bytes: blocks below this come from (and return to) the heap
_OLD_GLIBC_MAX = 4 * 1024 * 1024 * ctypes.sizeof(ctypes.c_long)  # HEAP_MAX_SIZE / 2 before glibc 2.34
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_applied: int | None = None  # the mmap threshold set, once set


def _user_settings() -> str | None:
    """The environment variable by which the user already tunes glibc's malloc, if any."""
    for name in ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        if name in os.environ:
            return name
    if "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", ""):
        return "GLIBC_TUNABLES"
    return None


def keep_freed_memory() -> int | None:
    """Raise glibc's mmap and trim thresholds once per process; the mmap threshold set, or None where nothing was changed."""
    global _applied
    if _applied is not None:
        return _applied
    if os.environ.get("COMPBENCH_MALLOC", "").strip().lower() == "system" or _user_settings():
        return None
    try:
        libc = ctypes.CDLL(None)  # this process's C library, already loaded
        mallopt = libc.mallopt
        libc.gnu_get_libc_version  # noqa: B018 — glibc's own symbol: mallopt's meaning below is glibc's
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    for threshold in (THRESHOLD, _OLD_GLIBC_MAX):
        if mallopt(_M_MMAP_THRESHOLD, threshold):
            mallopt(_M_TRIM_THRESHOLD, THRESHOLD)
            _applied = threshold
            return threshold
    return None
