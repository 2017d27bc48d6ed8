"""compbench: benchmark compositional generalization against the kernel theory."""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# Public API, imported lazily so `import compbench` (and `compbench list`) stays light.
_EXPORTS = {
    "CompbenchError": "compbench.errors",
    "evaluate": "compbench.api",
    "Results": "compbench.api",
    "load_suite": "compbench.suite",
    "parse_suite": "compbench.suite",
    "run_suite": "compbench.runner.run",
    "register_adapter": "compbench.adapters.registry",
    "get_adapter": "compbench.adapters.registry",
    "Adapter": "compbench.adapters.base",
    "AdapterParams": "compbench.adapters.base",
    "Batch": "compbench.adapters.base",
    "Fitted": "compbench.adapters.base",
    "make_task": "compbench.tasks",
    "TaskData": "compbench.tasks",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'compbench' has no attribute {name!r}")
