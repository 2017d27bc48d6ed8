"""Adapter registry: built-ins, `register_adapter`, and third-party entry points."""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable
from importlib.metadata import entry_points

from compbench.adapters.base import Adapter

ENTRY_POINT_GROUP = "compbench.adapters"

_REGISTRY: dict[str, type[Adapter]] = {}
_entry_points_loaded = False


class UnknownAdapterError(ValueError):
    """Raised for an adapter name that is not registered."""


def register_adapter(name: str) -> Callable[[type[Adapter]], type[Adapter]]:
    """Class decorator registering an adapter under `name`."""

    def decorate(cls: type[Adapter]) -> type[Adapter]:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"adapter name {name!r} is already registered by {_REGISTRY[name]}")
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return decorate


def _load_entry_points() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        # One broken plugin must not take every other adapter (and `compbench list`) down with it:
        # say what is wrong with it and go on.
        where = f"entry point {ep.name!r} = {ep.value!r} of group {ENTRY_POINT_GROUP!r}"
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 — any import error of third-party code
            warnings.warn(f"compbench: cannot load adapter plugin, {where}: {type(exc).__name__}: {exc}", stacklevel=2)
            continue
        if not (isinstance(obj, type) and issubclass(obj, Adapter)):
            warnings.warn(f"compbench: ignoring {where}: it is not a subclass of compbench.adapters.Adapter", stacklevel=2)
        elif ep.name in _REGISTRY and _REGISTRY[ep.name] is not obj:
            warnings.warn(f"compbench: ignoring {where}: the name is taken by {_REGISTRY[ep.name]}", stacklevel=2)
        else:
            register_adapter(ep.name)(obj)


def adapter_names() -> list[str]:
    """All registered adapter names (built-in and plugins), sorted."""
    _load_entry_points()
    return sorted(_REGISTRY)


def get_adapter(name: str) -> type[Adapter]:
    """The adapter class registered as `name`; the error lists known names and the closest."""
    _load_entry_points()
    if name not in _REGISTRY and name.startswith("timm:"):  # any timm model, created on demand
        from compbench.adapters.timm_models import timm_adapter

        return timm_adapter(name)
    if name not in _REGISTRY:
        close = difflib.get_close_matches(name, _REGISTRY, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise UnknownAdapterError(
            f"unknown adapter {name!r}{hint} known: {', '.join(sorted(_REGISTRY))}"
        )
    return _REGISTRY[name]
