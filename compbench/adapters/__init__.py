"""Model adapters: a registry plus the built-in kernel machine and MLP."""

from compbench.adapters import kernel as _kernel  # noqa: F401  (registers "kernel")
from compbench.adapters import mlp as _mlp  # noqa: F401  (registers "mlp")
from compbench.adapters.base import Adapter, AdapterParams, Batch, Fitted, InvalidModelError
from compbench.adapters.registry import (
    UnknownAdapterError,
    adapter_names,
    get_adapter,
    register_adapter,
)

__all__ = [
    "Adapter",
    "AdapterParams",
    "Batch",
    "Fitted",
    "InvalidModelError",
    "UnknownAdapterError",
    "adapter_names",
    "get_adapter",
    "register_adapter",
]
