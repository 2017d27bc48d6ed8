"""Encoding registry: name -> function producing model inputs for every cell of a task."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from compbench.encodings.onehot import onehot


class UnknownEncodingError(ValueError):
    """Raised for an encoding name that is not registered."""


@dataclass(frozen=True)
class Encoded:
    """Model inputs for every cell of a task: `x[i]` encodes `cells[i]` (one sample per cell)."""

    name: str
    x: np.ndarray
    cells: np.ndarray
    n_values: tuple[int, ...]


ENCODINGS: dict[str, Callable[[np.ndarray, tuple[int, ...]], np.ndarray]] = {
    "onehot": onehot,
}


def encode(name: str, cells: np.ndarray, n_values: tuple[int, ...]) -> Encoded:
    """Encode every cell with the named encoding."""
    if name not in ENCODINGS:
        close = difflib.get_close_matches(name, ENCODINGS, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownEncodingError(
            f"unknown encoding {name!r}{hint} known: {', '.join(sorted(ENCODINGS))}"
        )
    return Encoded(name, ENCODINGS[name](cells, n_values), np.asarray(cells), tuple(n_values))
