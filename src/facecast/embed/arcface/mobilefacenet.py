"""insightface arcface_torch MobileFaceNet (archs ``mbf`` and ``mbf_large``).

MobileFaceNet (Chen et al., CCBR 2018) as arcface_torch builds it: a stride-2 3x3 stem
of ``64*scale`` channels, then stages of inverted-residual blocks (1x1 expand to a fixed
width of 128/256/512, 3x3 depthwise, 1x1 linear projection), a 1x1 ``conv_sep`` to 512
channels and the GDC head (7x7 depthwise conv + BN, Linear without bias, BatchNorm1d).

- ``mbf``: blocks (1, 4, 6, 2), scale 2 (the first "stage" of one block is a plain 3x3
  conv in 64 groups);
- ``mbf_large``: blocks (2, 8, 12, 4), scale 4.

Every parametrised module sits in a ``layers`` Sequential, so the state-dict keys are the
official ones (``layers.0.layers.0.weight``, ``layers.3.layers.1.layers.2.layers.1.bias``,
``conv_sep.layers.2.weight``, ``features.layers.2.weight`` ...) and an official
``backbone.pth`` loads with ``strict=True``. Under autocast the body runs in reduced
precision and ``conv_sep`` + head in fp32, as arcface_torch's ``fp16`` flag does.
"""

from __future__ import annotations

import torch
from torch import nn

#: arch -> (blocks per stage, channel scale)
MBF_CONFIGS = {
    "mbf": ((1, 4, 6, 2), 2),
    "mbf_large": ((2, 8, 12, 4), 4),
}


class ConvBN(nn.Module):
    """Conv (no bias) + BatchNorm2d, then PReLU unless ``linear`` (the block is ``layers``)."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int = 1, stride: int = 1,
                 padding: int = 0, groups: int = 1, linear: bool = False) -> None:
        super().__init__()
        parts: list[nn.Module] = [
            nn.Conv2d(in_ch, out_ch, kernel, stride, padding, groups=groups, bias=False),
            nn.BatchNorm2d(out_ch),
        ]
        if not linear:
            parts.append(nn.PReLU(out_ch))
        self.layers = nn.Sequential(*parts)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class InvertedBlock(nn.Module):
    """1x1 expand to ``width`` (PReLU), 3x3 depthwise (PReLU), 1x1 linear projection;
    plus the input when ``residual``."""

    def __init__(self, in_ch: int, out_ch: int, width: int, stride: int = 1,
                 residual: bool = False) -> None:
        super().__init__()
        self.residual = residual
        self.layers = nn.Sequential(
            ConvBN(in_ch, width),
            ConvBN(width, width, 3, stride, 1, groups=width),
            ConvBN(width, out_ch, linear=True),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.layers(x)
        return out + x if self.residual else out


class ResidualStage(nn.Module):
    """``n`` residual inverted blocks at constant resolution and channel count."""

    def __init__(self, channels: int, n: int, width: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[InvertedBlock(channels, channels, width, residual=True)
                                      for _ in range(n)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class GDCHead(nn.Module):
    """Global depthwise conv (7x7 on 512 channels) + BN, flatten, Linear, BatchNorm1d."""

    def __init__(self, num_features: int) -> None:
        super().__init__()
        self.layers = nn.Sequential(
            ConvBN(512, 512, 7, groups=512, linear=True),
            nn.Flatten(),
            nn.Linear(512, num_features, bias=False),
            nn.BatchNorm1d(num_features),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


class MobileFaceNet(nn.Module):
    """MobileFaceNet for 112x112 faces -> ``num_features``-D embedding."""

    #: modules that stay float32 in a half-weights model: what arcface_torch's forward runs
    #: outside autocast (``self.conv_sep(x.float())``, then the ``features`` head)
    fp32_modules = ("conv_sep", "features")

    def __init__(self, blocks: tuple[int, int, int, int] = (1, 4, 6, 2), scale: int = 2,
                 num_features: int = 512) -> None:
        super().__init__()
        c1, c2 = 64 * scale, 128 * scale
        first: nn.Module = (ConvBN(c1, c1, 3, 1, 1, groups=64) if blocks[0] == 1
                            else ResidualStage(c1, blocks[0], 128))
        self.layers = nn.ModuleList([
            ConvBN(3, c1, 3, 2, 1),                        # 112 -> 56
            first,
            InvertedBlock(c1, c1, 128, stride=2),          # -> 28
            ResidualStage(c1, blocks[1], 128),
            InvertedBlock(c1, c2, 256, stride=2),          # -> 14
            ResidualStage(c2, blocks[2], 256),
            InvertedBlock(c2, c2, 512, stride=2),          # -> 7
            ResidualStage(c2, blocks[3], 256),
        ])
        self.conv_sep = ConvBN(c2, 512)
        self.features = GDCHead(num_features)

    @property
    def num_features(self) -> int:
        return int(self.features.layers[3].num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        with torch.autocast(device_type=x.device.type, enabled=False):
            return self.features(self.conv_sep(x.float()))


def build_mobilefacenet(arch: str = "mbf", num_features: int = 512) -> MobileFaceNet:
    """A randomly initialised MobileFaceNet ``arch`` (mbf, mbf_large)."""
    if arch not in MBF_CONFIGS:
        raise ValueError(f"unknown mobilefacenet arch {arch!r}; choose from {sorted(MBF_CONFIGS)}")
    blocks, scale = MBF_CONFIGS[arch]
    return MobileFaceNet(blocks, scale, num_features)
