"""Device selection: CUDA when asked or available, with no silent fallback."""

from __future__ import annotations


class DeviceUnavailableError(RuntimeError):
    """CUDA was requested but is not available."""


def resolve_device(requested: str = "auto") -> str:
    """'auto' → 'cuda' if available else 'cpu'; 'cuda' without CUDA is an error."""
    if requested not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {requested!r}")
    if requested == "cpu":
        return "cpu"
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
    import sys

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
