"""The base of every parameter model a suite fills in (task families, adapters, claims, encodings).

Unknown keys are errors, and a boolean is never taken for a number. pydantic's lax mode reads
`true` as 1 for an int or float field; YAML reads true/false/yes/no/on/off as booleans, so
`depth: true` or `anchors: [[true], [false]]` is almost always a typo that would silently run as 1
and 0. The rule is checked once here for every field of every subclass: a field whose type takes a
number and neither a boolean nor anything at all (`Any`) refuses a boolean anywhere in its value.
"""

from __future__ import annotations

import typing
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationInfo, field_validator

_NUMBER_FIELDS: dict[tuple[type, str], bool] = {}


def _leaves(annotation: Any) -> tuple[bool, bool]:
    """(takes a number, takes a boolean or anything) for a type annotation, through unions and containers."""
    if annotation is bool or annotation is Any or annotation is object:
        return False, True
    if isinstance(annotation, type):
        if issubclass(annotation, BaseModel):
            return False, True  # a nested model checks its own fields
        if issubclass(annotation, (int, float)):
            return True, False
    origin = typing.get_origin(annotation)
    if origin is Literal:
        values = typing.get_args(annotation)
        return (any(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values),
                any(isinstance(v, bool) for v in values))
    number = loose = False
    for arg in typing.get_args(annotation):
        if arg is Ellipsis or not (isinstance(arg, type) or typing.get_origin(arg) is not None or arg is Any):
            continue  # Annotated metadata, tuple[int, ...]'s ellipsis
        n, b = _leaves(arg)
        number, loose = number or n, loose or b
    return number, loose


def _refuses_bool(cls: type[BaseModel], name: str) -> bool:
    key = (cls, name)
    if key not in _NUMBER_FIELDS:
        info = cls.model_fields.get(name)
        number, loose = _leaves(info.annotation) if info is not None else (False, True)
        _NUMBER_FIELDS[key] = number and not loose
    return _NUMBER_FIELDS[key]


def first_bool(value: Any) -> bool | None:
    """The first boolean anywhere in a value (lists, tuples, mapping values), or None."""
    if isinstance(value, bool):
        return value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for item in items:
        found = first_bool(item)
        if found is not None:
            return found
    return None


class StrictParams(BaseModel):
    """Parameters: unknown keys are errors, and a boolean is not a number."""

    model_config = ConfigDict(extra="forbid")

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_for_number(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name is None or not _refuses_bool(cls, info.field_name):
            return value
        found = first_bool(value)
        if found is not None:
            where = "" if isinstance(value, bool) else " inside the value"
            raise ValueError(f"expected a number, got the boolean {str(found).lower()}{where} "
                             "(YAML reads true/false/yes/no/on/off as booleans)")
        return value
