"""`compbench compare A B`: two runs' cells paired by suite, model, task and seed, and what changed between them."""

from compbench.compare.pairing import CellDiff, Comparison, VerdictFlip, compare_sides
from compbench.compare.render import github_summary, to_json, to_markdown
from compbench.compare.sides import CompareError, Side, load_side

__all__ = ["CellDiff", "CompareError", "Comparison", "Side", "VerdictFlip", "compare_sides", "github_summary", "load_side",
           "to_json", "to_markdown"]
