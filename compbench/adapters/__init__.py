"""Model adapters: a registry plus the built-in kernel machine and MLP."""

from compbench.adapters import kernel as _kernel  # noqa: F401  (registers "kernel")
from compbench.adapters import projection as _projection  # noqa: F401  (registers "additive_projection")
from compbench.adapters import mlp as _mlp  # noqa: F401  (registers "mlp")
from compbench.adapters import gln as _gln  # noqa: F401  (registers "gln")
from compbench.adapters import convnet as _convnet  # noqa: F401  (registers "convnet")
from compbench.adapters import resnet as _resnet  # noqa: F401  (registers "resnet")
from compbench.adapters import vit as _vit  # noqa: F401  (registers "vit")
from compbench.adapters import hypernet as _hypernet  # noqa: F401  (registers "hypernet")
from compbench.adapters import slot_decoder as _slot_decoder  # noqa: F401  (registers "slot_decoder")
from compbench.adapters import frozen_probe as _frozen_probe  # noqa: F401  (registers "frozen_probe")
from compbench.adapters import sequence as _sequence  # noqa: F401  (registers "transformer" and "bottleneck")
from compbench.adapters import timm_models as _timm  # noqa: F401  (resolves "timm:<name>" on demand)
from compbench.adapters import module as _module  # noqa: F401  (any nn.Module factory: trains the user's models)
from compbench.adapters import user as _user  # noqa: F401  (file.py:Name / module:Name / objects → adapters)
from compbench.adapters.base import Adapter, AdapterParams, Batch, Fitted, InvalidModelError
from compbench.adapters.registry import (
    ADAPTERS,
    UnknownAdapterError,
    adapter_names,
    get_adapter,
    register_adapter,
)
from compbench.theory.options import TheoryOptions

__all__ = [
    "ADAPTERS",
    "Adapter",
    "AdapterParams",
    "Batch",
    "Fitted",
    "InvalidModelError",
    "TheoryOptions",
    "UnknownAdapterError",
    "adapter_names",
    "get_adapter",
    "register_adapter",
]
