"""keep_freed_memory: large blocks freed by one step are reused by the next, not faulted back in."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

glibc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")

_PROBE = textwrap.dedent(
    """
    import ctypes, json, resource, sys
    from compbench.runner.memory import keep_freed_memory
    applied = keep_freed_memory() if sys.argv[1] == "keep" else False
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    for _ in range(20):  # a 64 MiB block written and freed, as a training step's activations
        block = libc.malloc(64 << 20)
        libc.memset(block, 1, 64 << 20)
        libc.free(block)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    print(json.dumps({"applied": applied, "faults": faults}))
    """
)


def _probe(mode: str, env: dict[str, str] | None = None) -> dict:
    import os

    out = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True,
        env={**os.environ, **(env or {})},
    )
    return json.loads(out.stdout)


@glibc
def test_freed_blocks_are_reused_instead_of_faulted_in_again() -> None:
    system, kept = _probe("system"), _probe("keep")
    pages = (64 << 20) // 4096  # 16 384 pages per block
    assert kept["applied"] is True
    # glibc's default: every 64 MiB block is a fresh mmap, so each of the 20 faults in all its pages.
    assert system["faults"] >= 19 * pages
    # Kept: the first block's pages are faulted in once, the other 19 reuse them.
    assert kept["faults"] <= 2 * pages


@glibc
def test_the_environment_opts_out() -> None:
    out = _probe("keep", {"COMPBENCH_MALLOC": "system"})
    assert out["applied"] is False
    assert out["faults"] >= 19 * (64 << 20) // 4096
