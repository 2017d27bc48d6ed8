"""`timm:<name>`: any timm model as an adapter, with num_classes = the task's outputs and no pretrained weights.

`adapter: timm:resnet10t` in a suite builds `timm.create_model("resnet10t", pretrained=False,
num_classes=<the task's outputs: 1 for a scalar task>, in_chans=<channels of the encoding>,
**model_kwargs)`; nothing is ever downloaded.
The adapter class is created on demand by the adapter registry's `timm:` resolver (names are
checked with `timm.is_model`). Small inputs: most timm CNNs downsample by 32; `resize: [H, W]` upsamples
the images inside the network (bilinear) when a model needs larger inputs, and ViT-style models
need `model_kwargs: {img_size: [H, W]}` (with a patch size dividing it) for non-default sizes.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from compbench.adapters.deep import NetworkAdapter, NetworkParams
from compbench.adapters.registry import ADAPTERS, UnknownAdapterError

if TYPE_CHECKING:
    import torch

PREFIX = "timm:"
_FORBIDDEN_KWARGS = {"pretrained", "pretrained_cfg", "pretrained_cfg_overlay", "checkpoint_path", "num_classes", "in_chans"}


class TimmParams(NetworkParams):
    """Training settings plus what is passed to `timm.create_model`."""

    model_kwargs: dict[str, Any] = Field(default_factory=dict, description="extra keyword arguments of timm.create_model")
    resize: list[int] | None = Field(default=None, min_length=2, max_length=2, description="upsample inputs to [H, W] first")

    @field_validator("model_kwargs")
    @classmethod
    def _no_weights(cls, v: dict[str, Any]) -> dict[str, Any]:
        bad = sorted(set(v) & _FORBIDDEN_KWARGS)
        if bad:
            raise ValueError(f"model_kwargs may not set {', '.join(bad)}: compbench sets num_classes (the task's outputs), in_chans, and never loads weights")
        return v


class TimmAdapter(NetworkAdapter):
    """Base of the on-demand `timm:<name>` adapters; `model_name` is set per subclass."""

    Params = TimmParams
    params: TimmParams
    model_name = ""

    def build(self, in_shape: tuple[int, int, int], n_out: int = 1) -> torch.nn.Module:
        """timm.create_model(model_name, pretrained=False, num_classes=n_out, in_chans=channels)."""
        import timm
        import torch

        p = self.params
        kwargs = dict(p.model_kwargs)
        if "img_size" in kwargs and isinstance(kwargs["img_size"], list):
            kwargs["img_size"] = tuple(kwargs["img_size"])
        net = timm.create_model(self.model_name, pretrained=False, num_classes=n_out, in_chans=in_shape[0], **kwargs)
        if p.resize is None:
            return net
        size = tuple(p.resize)

        class Resized(torch.nn.Module):
            def __init__(self, inner: torch.nn.Module) -> None:
                super().__init__()
                self.inner = inner

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return self.inner(torch.nn.functional.interpolate(x, size=size, mode="bilinear", align_corners=False))

        return Resized(net)


def timm_adapter(name: str) -> type[TimmAdapter]:
    """The adapter class for `timm:<model>` (created and registered on first use)."""
    model = name[len(PREFIX):]
    try:
        import timm
    except ImportError:
        raise UnknownAdapterError(f"adapter {name!r} needs timm: pip install timm") from None
    if not model or not timm.is_model(model):
        close = difflib.get_close_matches(model, timm.list_models(), n=3)
        hint = f" Did you mean {', '.join(PREFIX + c for c in close)}?" if close else ""
        raise UnknownAdapterError(
            f"unknown timm model {model!r} (adapter {name!r}).{hint} List model names with: "
            "python -c \"import timm; print(timm.list_models('resnet*'))\" (any pattern)"
        )
    cls = type(f"Timm_{model.replace('.', '_').replace('-', '_')}", (TimmAdapter,), {"model_name": model, "__module__": __name__})
    cls.__doc__ = f"timm model {model!r} (num_classes = the task's outputs, pretrained=False), minibatch-trained."
    return cls


ADAPTERS.add_resolver(PREFIX, timm_adapter)
