"""The `vit` adapter: timm's VisionTransformer sized for small images.

The reference ViT (REFERENCE.md §5.1, lucidrains' implementation): 8×8 patches on 32×32 images,
class token, learned position embedding, pre-norm blocks, dim 256, depth 4, 6 heads of dim 64,
MLP 256, dropout 0.1. Here timm's `VisionTransformer` (class token, learned position embedding,
pre-norm blocks) with `num_classes` = the task's outputs (1 for a scalar task): the default patch is 4 (8×8 digits side by side → 2 × 4 =
8 patches), and the default is 4 heads of dim 64 since timm needs `dim` divisible by `heads` (the
reference's 6 × 64 = 384-dimensional attention inside a 256-dimensional model has no timm
equivalent). Dropout defaults to 0 so that the trained function is the one whose NTK is computed
(eval mode). Reference training: Adam lr 1e-4, 200 epochs, batch 128 — this adapter's defaults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field, model_validator

from compbench.adapters.deep import NetworkAdapter, NetworkParams
from compbench.adapters.registry import register_adapter

if TYPE_CHECKING:
    import torch


class ViTParams(NetworkParams):
    """Hyperparameters of the small ViT."""

    patch_size: int = Field(default=4, ge=1, description="square patches; must divide the image height and width")
    dim: int = Field(default=256, ge=1, description="embedding dimension")
    depth: int = Field(default=4, ge=1, description="transformer blocks")
    heads: int = Field(default=4, ge=1, description="attention heads (dim must be divisible by heads)")
    mlp_dim: int = Field(default=256, ge=1, description="hidden width of each block's MLP")
    dropout: float = Field(default=0.0, ge=0, lt=1, description="dropout after attention/MLP projections and on embeddings")
    pool: str = Field(default="token", pattern="^(token|avg)$", description="readout from the class token or the mean token")
    lr: float = Field(default=1e-4, gt=0)
    epochs: int = Field(default=200, ge=1)

    @model_validator(mode="after")
    def _heads_divide_dim(self) -> ViTParams:
        if self.dim % self.heads:
            raise ValueError(f"dim ({self.dim}) must be divisible by heads ({self.heads})")
        return self


def mlp_ratio(dim: int, mlp_dim: int) -> float:
    """The ratio for which timm's `int(dim * mlp_ratio)` is exactly `mlp_dim`."""
    ratio = mlp_dim / dim
    if int(dim * ratio) != mlp_dim:  # e.g. 7 * (61 / 7) = 60.99999999999999 → 60 hidden units
        ratio = (mlp_dim + 0.5) / dim
    return ratio


@register_adapter("vit")
class ViTAdapter(NetworkAdapter):
    """A small timm VisionTransformer with a head of the task's outputs, minibatch-trained."""

    Params = ViTParams
    params: ViTParams

    def build(self, in_shape: tuple[int, int, int], n_out: int = 1) -> torch.nn.Module:
        """The ViT for (channels, H, W) inputs with `n_out` outputs."""
        from timm.models.vision_transformer import VisionTransformer

        p = self.params
        c, h, w = in_shape
        if h % p.patch_size or w % p.patch_size:
            raise ValueError(f"vit: patch_size {p.patch_size} must divide the image size {h}×{w}")
        return VisionTransformer(
            img_size=(h, w),
            patch_size=p.patch_size,
            in_chans=c,
            num_classes=n_out,
            global_pool=p.pool,
            embed_dim=p.dim,
            depth=p.depth,
            num_heads=p.heads,
            mlp_ratio=mlp_ratio(p.dim, p.mlp_dim),
            class_token=True,
            drop_rate=p.dropout,
            pos_drop_rate=p.dropout,
            proj_drop_rate=p.dropout,
        )
