"""Task family registry and `make_task`."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from compbench.tasks.base import TaskData, validate_split


class TaskParams(BaseModel):
    """Base of every family's parameter model (unknown keys are errors)."""

    model_config = ConfigDict(extra="forbid")


class UnknownFamilyError(ValueError):
    """Raised for a task family name that is not registered."""


@dataclass(frozen=True)
class FamilySpec:
    """A task family: its parameter model and the builder from validated params."""

    name: str
    params_model: type[TaskParams]
    build: Callable[[Any], TaskData]
    doc: str


FAMILIES: dict[str, FamilySpec] = {}


def register_family(name: str, params_model: type[TaskParams]) -> Callable[[Callable[[Any], TaskData]], Callable[[Any], TaskData]]:
    """Decorator registering a builder `build(params) -> TaskData` as task family `name`."""

    def decorate(build: Callable[[Any], TaskData]) -> Callable[[Any], TaskData]:
        FAMILIES[name] = FamilySpec(name, params_model, build, (build.__doc__ or "").strip())
        return build

    return decorate


def _spec(family: str) -> FamilySpec:
    if family not in FAMILIES:
        close = difflib.get_close_matches(family, FAMILIES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ";"
        raise UnknownFamilyError(f"unknown task family {family!r}{hint} known: {', '.join(sorted(FAMILIES))}")
    return FAMILIES[family]


def family_params_model(family: str) -> type[TaskParams]:
    """The pydantic model validating a family's params."""
    return _spec(family).params_model


def make_task(family: str, **params: Any) -> TaskData:
    """Build and validate a task of the named family (see THEORY.md §3)."""
    spec = _spec(family)
    validated = spec.params_model.model_validate(params)
    task = spec.build(validated)
    validate_split(task)
    return task
