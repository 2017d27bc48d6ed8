"""How this process's C allocator treats large blocks: kept for reuse instead of handed back each time.

glibc serves a block above its mmap threshold (128 KiB, rising to at most 32 MiB as it adapts) with
a fresh `mmap`, and `munmap`s it on free. Training and the empirical NTK allocate and free
activations, gradients and Jacobians of tens to hundreds of MiB every step, so every step
page-faulted the same memory back in, zeroed by the kernel: on kernel-limits-images, 13.5 M minor
page faults and 23 s of system time in a 102 s run (1.9 s and 0.5 M with the blocks kept, 90 s).

`keep_freed_memory` raises the mmap threshold to 1 GiB and the trim threshold with it, so freed
blocks stay in the heap for the next step. The cost is that the process keeps its peak heap
instead of shrinking after it, which is what the next cell needs anyway. Opt out with
`COMPBENCH_MALLOC=system`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

__all__ = ["keep_freed_memory", "THRESHOLD"]

THRESHOLD = 1 << 30  # bytes: blocks below this come from (and return to) the heap
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's malloc.h
_applied = False


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim thresholds to `THRESHOLD` once per process; False where that does not apply.

    Not glibc (macOS, musl), or `COMPBENCH_MALLOC=system`: nothing is changed.
    """
    global _applied
    if _applied:
        return True
    if os.environ.get("COMPBENCH_MALLOC", "").strip().lower() == "system":
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
        if not hasattr(libc, "gnu_get_libc_version"):
            return False
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _applied = bool(mallopt(_M_MMAP_THRESHOLD, THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, THRESHOLD))
    return _applied
