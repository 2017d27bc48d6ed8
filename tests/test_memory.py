"""keep_freed_memory: large blocks come from the heap and are reused, not mmapped afresh each time."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import textwrap

import pytest

from compbench.runner import memory

glibc = pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "gnu_get_libc_version"), reason="glibc's mallopt")

# In a fresh process (the setting is process-wide): whether a 64 MiB block, as a training step's
# activations, is served by its own mmap (glibc's mallinfo2 counts those in hblks).
_PROBE = textwrap.dedent(
    """
    import ctypes, json, sys
    from compbench.runner.memory import keep_freed_memory
    applied = keep_freed_memory() if sys.argv[1] == "keep" else None

    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in
                    ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    libc = ctypes.CDLL(None)
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    libc.mallinfo2.restype = Info
    mapped, again = [], []
    for _ in range(3):
        before = libc.mallinfo2().hblks
        block = libc.malloc(64 << 20)
        mapped.append(libc.mallinfo2().hblks - before)
        again.append(block)
        libc.free(block)
    print(json.dumps({"applied": applied, "mapped": mapped, "same_block": len(set(again)) == 1}))
    """
)


def _probe(mode: str, **env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True, check=True,
                         env={**os.environ, **env}, timeout=120)
    return json.loads(out.stdout)


@glibc
@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="mallinfo2 is glibc ≥ 2.33")
def test_large_blocks_come_from_the_heap_and_are_reused():
    default, kept = _probe("system"), _probe("keep")
    assert default["applied"] is None and default["mapped"] == [1, 1, 1]  # glibc's default: an mmap each
    assert kept["applied"] == memory.THRESHOLD and kept["mapped"] == [0, 0, 0]
    assert kept["same_block"]  # the freed block is handed out again


@glibc
@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "mallinfo2"), reason="mallinfo2 is glibc ≥ 2.33")
@pytest.mark.parametrize(
    "env", [{"COMPBENCH_MALLOC": "system"}, {"MALLOC_MMAP_THRESHOLD_": "262144"}, {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1"}]
)
def test_the_users_own_settings_win(env):
    out = _probe("keep", **env)
    assert out["applied"] is None
    if "MALLOC_MMAP_THRESHOLD_" not in env:
        assert out["mapped"] == [1, 1, 1]


class _FakeLibc:
    """A C library whose mallopt refuses mmap thresholds above `limit` (glibc ≤ 2.33: 32 MiB)."""

    def __init__(self, limit: int | None, glibc: bool = True) -> None:
        self.limit, self.calls = limit, []
        self.mallopt = self._mallopt
        if glibc:
            self.gnu_get_libc_version = lambda: b"2.31"

    def _mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return int(param != -3 or self.limit is None or value <= self.limit)


@pytest.mark.parametrize(
    ("libc", "expected", "calls"),
    [(_FakeLibc(None), 1 << 30, [(-3, 1 << 30), (-1, 1 << 30)]),
     (_FakeLibc(32 << 20), 32 << 20, [(-3, 1 << 30), (-3, 32 << 20), (-1, 1 << 30)]),
     (_FakeLibc(0), None, [(-3, 1 << 30), (-3, 32 << 20)]),
     (_FakeLibc(None, glibc=False), None, [])],
    ids=["glibc", "glibc-2.31", "refused", "not-glibc"],
)
def test_older_glibc_gets_its_largest_threshold(monkeypatch, libc, expected, calls):
    monkeypatch.setattr(memory, "_applied", None)
    monkeypatch.setattr(memory.ctypes, "CDLL", lambda _: libc)
    for name in ("COMPBENCH_MALLOC", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"):
        monkeypatch.delenv(name, raising=False)
    libc.mallopt = _Typed(libc.mallopt)
    assert memory.keep_freed_memory() == expected
    assert libc.calls == calls


class _Typed:
    """A callable that accepts the argtypes/restype attributes ctypes functions carry."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)
