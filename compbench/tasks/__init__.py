"""Task families: grids of conjunctions, targets and train/held-out splits (pure numpy)."""

from compbench.tasks import (  # noqa: F401  (each module registers its family)
    additive,
    associative_inference,
    context_dependence,
    episodes,
    modular_teacher,
    quadrants,
    redundant_input,
    slot_render,
    sprites,
    sraven,
    symmetry,
    table,
    transitive_equivalence,
    transitive_ordering,
)
from compbench.tasks.base import TASK_KINDS, CellSamples, SplitError, TaskData, TaskParamError, grid, validate_split
from compbench.tasks.registry import (
    FAMILIES,
    FamilySpec,
    TaskParams,
    UnknownFamilyError,
    family_params_model,
    make_task,
    register_family,
    task_family,
)

__all__ = [
    "TASK_KINDS",
    "CellSamples",
    "FAMILIES",
    "FamilySpec",
    "TaskParams",
    "register_family",
    "task_family",
    "SplitError",
    "TaskData",
    "TaskParamError",
    "UnknownFamilyError",
    "family_params_model",
    "grid",
    "make_task",
    "validate_split",
]
