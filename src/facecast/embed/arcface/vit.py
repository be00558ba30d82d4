"""insightface arcface_torch Vision Transformer for faces (archs ``vit_t``, ``vit_s``, ``vit_b``).

The face ViT of arcface_torch: 112x112 input cut into 9x9 patches by a stride-9 conv
(12x12 = 144 tokens; the last 4 pixel rows and columns are not seen), a learned position
embedding and no class token; pre-norm blocks (LayerNorm, multi-head attention with
``qkv`` without bias, LayerNorm, MLP with ReLU6 and ratio 4); a final LayerNorm; the 144
tokens flattened into the ``feature`` head: Linear (no bias) to ``embed_dim``,
BatchNorm1d, Linear (no bias) to ``num_features``, BatchNorm1d (both eps 2e-5).

==========  =========  =====  =====
arch        embed_dim  depth  heads
==========  =========  =====  =====
``vit_t``   256        12     8
``vit_s``   512        12     8
``vit_b``   512        24     8
==========  =========  =====  =====

Module names are the official ones (``patch_embed.proj``, ``pos_embed``, ``mask_token``,
``blocks.{i}.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}``, ``norm``,
``feature.{0,1,2,3}``), so an official ``backbone.pth`` loads with ``strict=True``.

Token masking (``mask_ratio``: drop a random share of tokens before the blocks and put
``mask_token`` in their place after the final norm) happens only in training mode; the
evaluation forward sees every token. Stochastic depth and activation checkpointing
(``drop_path_rate``, ``using_checkpoint``) are training-only as well and are not
implemented: the model is built for inference. Under autocast the projections and the MLP
run in reduced precision while the attention weights and the softmax, the final norm and
the ``feature`` head run in fp32, as in arcface_torch's forward.

One difference on purpose: arcface_torch FORCES autocast on around ``qkv``, ``proj`` and
the MLP block (``torch.cuda.amp.autocast(True)`` inside ``Attention.forward`` and
``Block.forward``), so on CUDA its "fp32" forward runs those layers in fp16 whatever the
caller asks. facecast follows the caller (``embed.amp``): with ``amp: none`` on a GPU it
computes them in fp32, so its features differ slightly from the reference's GPU features
(``amp: fp16`` reproduces the reference's precision); on CPU both run fp32 and agree.

The number of attention heads is not stored in a state dict. The zoo archs have 8; a ViT
whose dims match none of them loads only with ``heads`` named
(:func:`facecast.embed.arcface.weights.load_backbone`), never with a guess.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

#: arch -> (embed_dim, depth, num_heads); all: 112 px, patch 9, mlp ratio 4, LayerNorm
VIT_CONFIGS = {
    "vit_t": (256, 12, 8),
    "vit_s": (512, 12, 8),
    "vit_b": (512, 24, 8),
}
#: arch -> share of tokens masked in training (arcface_torch's get_model)
VIT_MASK_RATIO = {"vit_t": 0.1, "vit_s": 0.1, "vit_b": 0.1}


class PatchEmbed(nn.Module):
    """Non-overlapping ``patch`` x ``patch`` patches -> tokens ``(N, num_patches, dim)``."""

    def __init__(self, img_size: int = 112, patch: int = 9, dim: int = 512) -> None:
        super().__init__()
        self.img_size = img_size
        self.num_patches = (img_size // patch) ** 2
        self.proj = nn.Conv2d(3, dim, kernel_size=patch, stride=patch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-2:] != (self.img_size, self.img_size):
            raise ValueError(f"face ViT expects {self.img_size}x{self.img_size} input, got "
                             f"{tuple(x.shape[-2:])}")
        return self.proj(x).flatten(2).transpose(1, 2)


class Attention(nn.Module):
    """Multi-head self-attention; the attention itself is computed in fp32."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, dim * 3, bias=False)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, t, d = x.shape
        qkv = self.qkv(x).reshape(n, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        with torch.autocast(device_type=x.device.type, enabled=False):
            q, k, v = qkv.float().unbind(0)
            out = F.scaled_dot_product_attention(q, k, v)  # softmax(q k^T / sqrt(d_h)) v
        return self.proj(out.transpose(1, 2).reshape(n, t, d))


class Mlp(nn.Module):
    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.act = nn.ReLU6()
        self.fc2 = nn.Linear(hidden, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block: x + attn(norm1(x)), then + mlp(norm2(x))."""

    def __init__(self, dim: int, heads: int, mlp_ratio: float = 4.0) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim, int(dim * mlp_ratio))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class FaceViT(nn.Module):
    """arcface_torch's VisionTransformer (LayerNorm variant) -> ``num_features``-D embedding."""

    #: parts that stay float32 in a half-weights model: what arcface_torch's forward runs
    #: outside autocast (the final ``norm`` on ``x.float()``, then the ``feature`` head) and
    #: ``pos_embed``, so the residual stream stays fp32 as in arcface_torch (its patch
    #: embedding and residual adds run outside autocast); the attention itself is computed
    #: in fp32 by the forward, the block LayerNorms by autocast
    fp32_modules = ("norm", "feature", "pos_embed", "mask_token")

    def __init__(self, embed_dim: int = 512, depth: int = 12, heads: int = 8,
                 num_features: int = 512, img_size: int = 112, patch: int = 9,
                 mlp_ratio: float = 4.0, mask_ratio: float = 0.1) -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.mask_ratio = mask_ratio
        self.patch_embed = PatchEmbed(img_size, patch, embed_dim)
        self.num_patches = self.patch_embed.num_patches
        self.pos_embed = nn.Parameter(torch.zeros(1, self.num_patches, embed_dim))
        self.blocks = nn.ModuleList([Block(embed_dim, heads, mlp_ratio) for _ in range(depth)])
        self.norm = nn.LayerNorm(embed_dim)
        self.feature = nn.Sequential(
            nn.Linear(embed_dim * self.num_patches, embed_dim, bias=False),
            nn.BatchNorm1d(embed_dim, eps=2e-5),
            nn.Linear(embed_dim, num_features, bias=False),
            nn.BatchNorm1d(num_features, eps=2e-5),
        )
        self.mask_token = nn.Parameter(torch.zeros(1, 1, embed_dim))
        if self.pos_embed.device.type != "meta":  # arch inference builds on meta: no init
            self._init_weights()

    def _init_weights(self) -> None:
        nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.mask_token, std=0.02)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.trunc_normal_(m.weight, std=0.02)
                if m.bias is not None:
                    nn.init.zeros_(m.bias)

    @property
    def num_features(self) -> int:
        return int(self.feature[3].num_features)

    def _keep_random_tokens(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Training only: keep a random ``1 - mask_ratio`` of the tokens of each sample;
        also return each token's position in the shuffled order (to restore it)."""
        n, t, d = x.shape
        keep = int(t * (1 - self.mask_ratio))
        order = torch.argsort(torch.rand(n, t, device=x.device), dim=1)
        restore = torch.argsort(order, dim=1)
        kept = torch.gather(x, 1, order[:, :keep, None].expand(-1, -1, d))
        return kept, restore

    def forward_features(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[0]
        x = self.patch_embed(x) + self.pos_embed
        masking = self.training and self.mask_ratio > 0
        if masking:
            x, restore = self._keep_random_tokens(x)
        for block in self.blocks:
            x = block(x)
        with torch.autocast(device_type=x.device.type, enabled=False):
            x = self.norm(x.float())
            if masking:
                fill = self.mask_token.float().expand(n, self.num_patches - x.shape[1], -1)
                x = torch.cat([x, fill], dim=1)
                x = torch.gather(x, 1, restore[:, :, None].expand(-1, -1, self.embed_dim))
        return x.reshape(n, self.num_patches * self.embed_dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.forward_features(x)
        with torch.autocast(device_type=x.device.type, enabled=False):
            return self.feature(x.float())


def build_vit(arch: str = "vit_t", num_features: int = 512) -> FaceViT:
    """A randomly initialised face ViT ``arch`` (vit_t, vit_s, vit_b)."""
    if arch not in VIT_CONFIGS:
        raise ValueError(f"unknown vit arch {arch!r}; choose from {sorted(VIT_CONFIGS)}")
    dim, depth, heads = VIT_CONFIGS[arch]
    return FaceViT(dim, depth, heads, num_features=num_features, mask_ratio=VIT_MASK_RATIO[arch])
