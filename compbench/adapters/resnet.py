"""The `resnet` adapter: torchvision's ResNet-18 layout adapted to small images.

torchvision's `BasicBlock`s and `ResNet._make_layer` (2, 2, 2, 2 blocks by default = ResNet-18),
with the stem of the reference's CIFAR ResNet (REFERENCE.md §5.1): a 3×3 stride-1 convolution and
no max-pool, so 8×8 digits keep their resolution; global average pooling; a Linear readout to the
task's outputs (one value for a scalar task). `channels` are the stage widths (the reference configs use 16, 32, 64, 128; torchvision's
ResNet-18 has 64, 128, 256, 512), `blocks` the blocks per stage (its length is the number of
stages; stages after the first halve the resolution). Reference training: Adam lr 1e-3, 100 epochs,
batch 128 — this adapter's defaults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from compbench.adapters.deep import NetworkAdapter, NetworkParams
from compbench.adapters.registry import register_adapter

if TYPE_CHECKING:
    import torch


class ResNetParams(NetworkParams):
    """Hyperparameters of the small-image ResNet."""

    channels: list[int] = Field(default=[16, 32, 64, 128], min_length=1, description="width of each stage")
    blocks: list[int] = Field(default=[2, 2, 2, 2], min_length=1, description="BasicBlocks per stage (ResNet-18: 2,2,2,2)")
    width: float = Field(default=1.0, gt=0, description="multiplier of every stage width")
    norm: Literal["batch", "none"] = "batch"

    @model_validator(mode="after")
    def _same_length(self) -> ResNetParams:
        if len(self.channels) != len(self.blocks):
            raise ValueError(f"channels ({len(self.channels)} stages) and blocks ({len(self.blocks)} stages) must have the same length")
        if any(b < 1 for b in self.blocks) or any(c < 1 for c in self.channels):
            raise ValueError("every stage needs ≥ 1 block and ≥ 1 channel")
        return self


def small_resnet(in_chans: int, channels: list[int], blocks: list[int], norm: str = "batch", n_out: int = 1) -> torch.nn.Module:
    """A torchvision ResNet (BasicBlock) with a 3×3 stem, no max-pool, and a readout to `n_out` values."""
    import torch.nn as nn
    from torchvision.models.resnet import BasicBlock, ResNet

    def norm_layer(c: int) -> nn.Module:
        return nn.BatchNorm2d(c) if norm == "batch" else nn.Identity()

    class SmallResNet(ResNet):
        def __init__(self) -> None:
            nn.Module.__init__(self)
            self._norm_layer = norm_layer
            self.inplanes, self.dilation, self.groups, self.base_width = channels[0], 1, 1, 64
            self.conv1 = nn.Conv2d(in_chans, channels[0], kernel_size=3, stride=1, padding=1, bias=False)
            self.bn1 = norm_layer(channels[0])
            self.relu = nn.ReLU(inplace=True)
            self.maxpool = nn.Identity()
            self.stages = nn.Sequential(
                *[self._make_layer(BasicBlock, c, b, stride=1 if i == 0 else 2) for i, (c, b) in enumerate(zip(channels, blocks))]
            )
            self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(channels[-1], n_out)
            for m in self.modules():  # torchvision's initialisation
                if isinstance(m, nn.Conv2d):
                    nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
                elif isinstance(m, nn.BatchNorm2d):
                    nn.init.constant_(m.weight, 1)
                    nn.init.constant_(m.bias, 0)

        def forward(self, x):  # noqa: ANN001, ANN201
            x = self.relu(self.bn1(self.conv1(x)))
            x = self.avgpool(self.stages(x)).flatten(1)
            return self.fc(x)

    return SmallResNet()


@register_adapter("resnet")
class ResNetAdapter(NetworkAdapter):
    """ResNet-18 layout (torchvision BasicBlocks) for small images, minibatch-trained."""

    Params = ResNetParams
    params: ResNetParams

    def build(self, in_shape: tuple[int, int, int], n_out: int = 1) -> torch.nn.Module:
        """The ResNet for (channels, H, W) inputs with `n_out` outputs."""
        p = self.params
        channels = [max(1, int(round(c * p.width))) for c in p.channels]
        return small_resnet(in_shape[0], channels, p.blocks, p.norm, n_out)
