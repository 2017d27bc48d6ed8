"""Device selection: CUDA when asked or available, with no silent fallback."""

from __future__ import annotations

import sys

from compbench.errors import CompbenchError


class DeviceUnavailableError(CompbenchError, RuntimeError):
    """CUDA was requested but is not available."""


def torch_build() -> dict[str, str | None]:
    """The installed torch's build flags (`cuda`, `hip`) read from torch/version.py, without importing torch.

    Importing torch costs about 1.5 s; a cached run that trains nothing must not pay it just to
    learn that the device is the CPU.
    """
    import ast
    import importlib.util
    from pathlib import Path

    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("torch is not installed (compbench needs it): pip install torch")
    source = (Path(next(iter(spec.submodule_search_locations))) / "version.py").read_text()
    out: dict[str, str | None] = {}
    for node in ast.parse(source).body:
        target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else getattr(node, "target", None)
        value = getattr(node, "value", None)
        if isinstance(target, ast.Name) and target.id in ("cuda", "hip") and value is not None:
            out[target.id] = ast.literal_eval(value)
    if set(out) != {"cuda", "hip"}:
        raise RuntimeError(f"cannot read torch's build flags from {spec.origin} (no cuda/hip in version.py): "
                           "use --device cpu or --device cuda")
    return out


def cuda_driver_loadable() -> bool:
    """Whether the NVIDIA driver library (libcuda.so.1) loads on this Linux host.

    Without it CUDA cannot be available: torch.cuda.is_available() asks the CUDA runtime, which
    loads this library and reports no device when it is missing.
    """
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


def cuda_impossible() -> bool:
    """True when CUDA certainly cannot be used here, decided without importing torch.

    A torch built for neither CUDA nor ROCm, or a CUDA build on a Linux host without the NVIDIA
    driver library. False means "ask torch" (it may still say no).
    """
    build = torch_build()
    if build["cuda"] is None and build["hip"] is None:
        return True
    return build["hip"] is None and sys.platform.startswith("linux") and not cuda_driver_loadable()


DEVICES = ("auto", "cpu", "cuda")  # what --device and evaluate(device=) take


def resolve_device(requested: str = "auto") -> str:
    """'auto' → 'cuda' if available else 'cpu'; 'cuda' without CUDA is an error."""
    if requested not in DEVICES:
        raise ValueError(f"device must be auto, cpu or cuda, got {requested!r}")
    if requested == "cpu":
        return "cpu"
    if requested == "auto" and "torch" not in sys.modules and cuda_impossible():
        return "cpu"  # the answer torch would give, without its import (a cached run may need no torch at all)
    import torch

    if torch.cuda.is_available():
        return "cuda"
    if requested == "cuda":
        raise DeviceUnavailableError(
            "--device cuda was requested but torch.cuda.is_available() is False "
            f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'none'}); use --device cpu or --device auto"
        )
    return "cpu"


def determinism_settings() -> dict[str, object]:
    """What governs bit-reproducibility of this process's results (recorded with each cell)."""
    out: dict[str, object] = {"seeded": "per-seed torch.Generator and numpy default_rng"}
    torch = sys.modules.get("torch")
    if torch is not None:
        out.update(
            torch_version=torch.__version__,
            deterministic_algorithms=bool(torch.are_deterministic_algorithms_enabled()),
            cudnn_deterministic=bool(torch.backends.cudnn.deterministic),
            threads=int(torch.get_num_threads()),
        )
    return out
