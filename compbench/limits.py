"""Size limits on what a suite may ask for, checked before anything is allocated.

The defaults fit this project's machines (2 cores, 24 GiB) with room to spare: the bundled suites
use at most 72 cells per task, 6 seeds and a 2,500-member sweep. A user who means more raises a
limit with the CLI (`--max-cells`, `--max-seeds`, `--max-models`, `--max-task-gib`) or `set_limits`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from compbench.errors import CompbenchError

MAX_SEED = 2**32 - 1  # numpy's legacy seeding takes seeds below 2**32; every seed must work with every backend

# A suite file's size and shape, checked before and while it is parsed (compbench/suite/source.py).
# Not raisable: the largest bundled suite is 22 kB with 935 YAML nodes nested 7 deep, and PyYAML is
# pure Python (a 1.8 MB file took 17 s to parse; at these limits the worst file parses in about 5 s).
SUITE_FILE_BYTES = 1_000_000
YAML_NODES = 100_000  # keys, values and list items as written (an alias counts once)
YAML_ALIASES = 1000
YAML_EXPANDED_NODES = 200_000  # nodes the document would have with every alias expanded
YAML_NESTING = 64  # lists and mappings inside each other

# Evaluation samples up to which a lazy model's seed-variance theory is computed: it needs their
# (n × n) NNGP and covariance (8,192: 0.5 GiB each). Beyond, the records carry no predicted spread.
SEED_VARIANCE_SAMPLES = 8192


@dataclass(frozen=True)
class Limits:
    """The sizes a suite may ask for."""

    cells_per_task: int = 1_000_000  # conjunctions in one task's grid
    seeds: int = 1000  # seeds per model
    models: int = 100_000  # models after sweep expansion, in the whole suite
    samples_per_task: int = 2_000_000  # encoded samples of one task (cells × samples per cell)
    task_bytes: int = 8 * 2**30  # images a task renders: an image encoding's inputs, slot_render's targets


_current = Limits()


def limits() -> Limits:
    """The limits in force."""
    return _current


def set_limits(**changes: int) -> Limits:
    """Raise (or lower) limits for this process; returns the previous ones."""
    global _current
    previous = _current
    _current = replace(_current, **changes)
    return previous


class TooLargeError(CompbenchError, ValueError):
    """A suite asks for more than a limit allows."""

    def __init__(self, what: str, asked: int, limit: int, option: str) -> None:
        self.asked, self.limit = asked, limit
        shown = f"{asked:,}" if asked < 10**15 else f"{asked:.3e}"  # 40 components of 9 values: 1.478e+38, not 39 digits
        super().__init__(f"{what}: {shown} asked for, the limit is {limit:,} (raise it with {option} if you mean it)")


def check_task_bytes(what: str, images: int, shape: tuple[int, ...], itemsize: int = 4) -> None:
    """TooLargeError if `images` float arrays of `shape` (float32 unless `itemsize` says otherwise) exceed the
    task-bytes limit: sized from the parameters before anything is rendered (a cell limit alone let 126 GB of
    256 × 256 sprites through)."""
    nbytes = int(images) * math.prod(int(n) for n in shape) * itemsize
    if nbytes > limits().task_bytes:
        dims = " × ".join(str(int(n)) for n in shape)
        raise TooLargeError(f"{what} ({int(images):,} float{8 * itemsize} images of {dims}, about {nbytes / 2**30:,.1f} GiB) "
                            "in bytes", nbytes, limits().task_bytes, "--max-task-gib")
