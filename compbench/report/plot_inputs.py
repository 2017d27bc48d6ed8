"""What one plot is drawn from, as a digest: a plot whose inputs and files are unchanged is not drawn again
(`report.plots`), so a run that changed one task's cells redraws that task's plots, not the suite's."""

from __future__ import annotations

import hashlib
from dataclasses import fields, is_dataclass
from functools import partial
from typing import Any

import numpy as np

from compbench.errors import CompbenchError
from compbench.records import CellRecord

_SCALARS = (str, int, float, bool, np.integer, np.floating, np.bool_)


class _Unhashed(CompbenchError):
    """An argument of a kind `plot_inputs` does not hash: the plot is drawn (caught here, never shown; under the
    root as every compbench exception is)."""


def plot_inputs(draw: Any, memo: dict[int, bytes] | None = None, drawing: str = "") -> str | None:
    """A sha256 of a plot's drawing function and every argument it is given, or None (always drawn) when `draw` is not a
    `functools.partial` or holds an argument of a kind not hashed here. `memo`: record digests by id, shared by the
    plots of one report (a task's records are arguments of each of its plots); `drawing`: a digest of the drawing code
    and library, hashed first."""
    if not isinstance(draw, partial):
        return None
    h = hashlib.sha256(f"{drawing}:{draw.func.__module__}.{draw.func.__qualname__}".encode())
    try:
        _feed(h, (draw.args, draw.keywords), {} if memo is None else memo)
    except _Unhashed:
        return None
    return h.hexdigest()


def _feed(h: Any, obj: Any, memo: dict[int, bytes]) -> None:
    if obj is None or isinstance(obj, _SCALARS):
        h.update(f"{type(obj).__name__}:{obj!r};".encode())
    elif isinstance(obj, np.ndarray):
        if obj.dtype == object:
            _feed(h, obj.tolist(), memo)
        else:
            h.update(f"array:{obj.dtype.str}:{obj.shape};".encode())
            h.update(np.ascontiguousarray(obj).tobytes())
    elif isinstance(obj, (list, tuple)):
        h.update(f"{type(obj).__name__}:{len(obj)};".encode())
        for item in obj:
            _feed(h, item, memo)
    elif isinstance(obj, (set, frozenset)):
        _feed(h, sorted(obj, key=repr), memo)
    elif isinstance(obj, dict):
        h.update(f"dict:{len(obj)};".encode())
        for key in sorted(obj, key=repr):
            _feed(h, key, memo)
            _feed(h, obj[key], memo)
    elif isinstance(obj, CellRecord):
        if id(obj) not in memo:
            memo[id(obj)] = _record_digest(obj)
        h.update(memo[id(obj)])
    elif is_dataclass(obj) and not isinstance(obj, type):  # a task's data: its fields (a callable field: not hashed)
        h.update(type(obj).__qualname__.encode())
        for f in fields(obj):
            h.update(f.name.encode())
            _feed(h, getattr(obj, f.name), memo)
    else:
        raise _Unhashed(type(obj).__qualname__)


def _record_digest(r: CellRecord) -> bytes:
    """What a plot draws of a record: its names and status; its outputs by key and its scores by scoring version, or,
    for a record not computed by a run (no key), the outputs and scores themselves."""
    h = hashlib.sha256()
    _feed(h, [r.key, r.model, r.group, r.task, r.seed, r.status.value, r.sweep, r.message, r.scoring], {})
    if not r.key:
        _feed(h, [r.predictions, r.theory_predictions, r.nearest_train, r.metrics, r.per_output, r.kind], {})
    return h.digest()
