"""The argparse `type=` checks of the numeric flags."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable

from compbench.limits import MAX_SEED


# Numeric flags are checked by argparse, by the same kind of rule as the suite's fields: a bad value
# is a usage error naming the flag (exit 2), never a value silently replaced.
def int_in(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse `type=`: a whole number (ASCII digits) from `low` to `high`."""
    def parse(text: str) -> int:
        if not re.fullmatch(r"[+-]?[0-9]+", text.strip()):
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}")
        value = int(text)
        if value < low or (high is not None and value > high):
            shown = f"{value:,}" if len(text) < 40 else f"a {len(text)}-digit number"
            raise argparse.ArgumentTypeError(f"must be {'at least' if high is None else 'from'} {low:,}"
                                             + (f" to {high:,}" if high is not None else "") + f", got {shown}")
        return value

    parse.__name__ = "whole number"  # argparse names the type in its own messages
    return parse


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def positive_float(text: str) -> float:
    """An argparse `type=`: a finite number > 0."""
    value = _number(text)
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a finite number > 0, got {text!r}")
    return value


def unit_interval(text: str) -> float:
    """An argparse `type=`: a number strictly between 0 and 1 (a false-discovery level)."""
    value = _number(text)
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number between 0 and 1 (e.g. 0.05), got {text!r}")
    return value


positive_int = int_in(1)
seed_int = int_in(0, MAX_SEED)  # a seed every backend takes (as a suite's seeds: compbench.limits.MAX_SEED)
