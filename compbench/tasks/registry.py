"""Task family registry (`compbench.tasks` entry points) and `make_task`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from compbench.params import StrictParams
from compbench.registry import PluginError, Registry, UnknownNameError
from compbench.tasks.base import TaskData, validate_split

ENTRY_POINT_GROUP = "compbench.tasks"


class TaskParams(StrictParams):
    """Base of every family's parameter model (unknown keys are errors; a boolean is not a number)."""


class UnknownFamilyError(UnknownNameError):
    """Raised for a task family name that is not registered."""


@dataclass(frozen=True)
class FamilySpec:
    """A task family: its parameter model and the builder from validated params."""

    name: str
    params_model: type[BaseModel]
    build: Callable[[Any], TaskData]
    doc: str


def _as_family(name: str, obj: object) -> FamilySpec:
    """A family is a FamilySpec, or a builder `build(params) -> TaskData` with a pydantic `Params` attribute."""
    if isinstance(obj, FamilySpec):
        return FamilySpec(name, obj.params_model, obj.build, obj.doc)
    params = getattr(obj, "Params", None)
    if not callable(obj) or not (isinstance(params, type) and issubclass(params, BaseModel)):
        raise PluginError(
            f"task family {name!r} is {obj!r}: expected a function build(params) -> TaskData decorated with "
            "@compbench.tasks.task_family(ParamsModel) (a `Params` pydantic model attribute)"
        )
    return FamilySpec(name, params, obj, (obj.__doc__ or "").strip())  # type: ignore[arg-type]


FAMILIES: Registry[FamilySpec] = Registry("task family", ENTRY_POINT_GROUP, _as_family, UnknownFamilyError)


def task_family(params_model: type[BaseModel]) -> Callable[[Callable[[Any], TaskData]], Callable[[Any], TaskData]]:
    """Decorator marking `build(params) -> TaskData` as a task family with this params model (for entry points)."""

    def decorate(build: Callable[[Any], TaskData]) -> Callable[[Any], TaskData]:
        build.Params = params_model  # type: ignore[attr-defined]
        return build

    return decorate


def register_family(name: str, params_model: type[BaseModel]) -> Callable[[Callable[[Any], TaskData]], Callable[[Any], TaskData]]:
    """Decorator registering a builder `build(params) -> TaskData` as task family `name`."""

    def decorate(build: Callable[[Any], TaskData]) -> Callable[[Any], TaskData]:
        FAMILIES.add(name, task_family(params_model)(build))
        return build

    return decorate


def _spec(family: str) -> FamilySpec:
    return FAMILIES.get(family)


def family_params_model(family: str) -> type[BaseModel]:
    """The pydantic model validating a family's params."""
    return _spec(family).params_model


def make_task(family: str, **params: Any) -> TaskData:
    """Build and validate a task of the named family (see THEORY.md §3)."""
    spec = _spec(family)
    validated = spec.params_model.model_validate(params)
    task = spec.build(validated)
    if not isinstance(task, TaskData):
        raise PluginError(f"task family {family!r} ({FAMILIES.entry(family).source}) returned {type(task).__name__}, not TaskData")
    validate_split(task)
    return task
