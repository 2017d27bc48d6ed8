"""Adapter registry: built-ins, `register_adapter`, `compbench.adapters` entry points, name resolvers."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import BaseModel

from compbench.adapters.base import Adapter
from compbench.registry import PluginError, Registry, UnknownNameError, require_subclass

ENTRY_POINT_GROUP = "compbench.adapters"


class UnknownAdapterError(UnknownNameError):
    """Raised for an adapter name that is not registered."""


def _check_adapter(name: str, obj: object) -> type[Adapter]:
    """An adapter is an `Adapter` subclass with a pydantic `Params` and its own `fit_seeds`."""
    obj = require_subclass("adapter", name, obj, Adapter, "compbench.adapters.Adapter")
    if not (isinstance(obj.Params, type) and issubclass(obj.Params, BaseModel)):
        raise PluginError(f"adapter {name!r}: Params must be a pydantic model (subclass compbench.adapters.AdapterParams)")
    if obj.fit_seeds is Adapter.fit_seeds:
        raise PluginError(f"adapter {name!r} does not implement fit_seeds(train, evaluate, seeds)")
    unknown = set(obj.inputs) - {"vector", "image", "sequence"}
    if unknown:
        raise PluginError(f"adapter {name!r}: inputs may name 'vector', 'image' and 'sequence', got {sorted(unknown)}")
    obj.name = name
    return obj


ADAPTERS: Registry[type[Adapter]] = Registry("adapter", ENTRY_POINT_GROUP, _check_adapter, UnknownAdapterError)


def register_adapter(name: str) -> Callable[[type[Adapter]], type[Adapter]]:
    """Class decorator registering an adapter under `name`."""
    return ADAPTERS.register(name)


def adapter_names() -> list[str]:
    """All registered adapter names (built-in and plugins), sorted."""
    return ADAPTERS.names()


def get_adapter(name: str) -> type[Adapter]:
    """The adapter class registered as `name`; the error lists known names and the closest."""
    return ADAPTERS.get(name)
