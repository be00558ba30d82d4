"""insightface arcface_torch iResNet-18/34/50/100/200 (archs ``r18`` ... ``r200``).

The module names match the official state dicts exactly (``conv1``, ``bn1``, ``prelu``,
``layer{1..4}.{i}.{bn1,conv1,bn2,prelu,conv2,bn3,downsample.0,downsample.1}``, ``bn2``,
``fc``, ``features``), so an official ``backbone.pth`` (e.g. the ms1mv3/glint360k
ResNet-100 of CAST's benchmark) loads with ``load_state_dict(strict=True)``.

Input: 112x112 RGB aligned with the ArcFace 5-point template, scaled ``(x/255 - 0.5)/0.5``.
Output: ``num_features``-D features (the ``features`` BatchNorm1d), un-normalised. Under
autocast the body runs in reduced precision and the head (``fc``, ``features``) in fp32,
as arcface_torch's ``fp16`` flag does.
"""

from __future__ import annotations

import torch
from torch import nn

#: blocks per stage for each depth (the official configurations)
IRESNET_LAYERS = {
    "r18": (2, 2, 2, 2),
    "r34": (3, 4, 6, 3),
    "r50": (3, 4, 14, 3),
    "r100": (3, 13, 30, 3),
    "r200": (6, 26, 60, 6),
}
STAGE_WIDTHS = (64, 128, 256, 512)


class IBasicBlock(nn.Module):
    """Pre-activation-style residual block: BN-conv3x3-BN-PReLU-conv3x3(stride)-BN + skip."""

    def __init__(self, in_ch: int, out_ch: int, stride: int = 1) -> None:
        super().__init__()
        self.bn1 = nn.BatchNorm2d(in_ch, eps=1e-5)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_ch, eps=1e-5)
        self.prelu = nn.PReLU(out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, stride, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_ch, eps=1e-5)
        self.downsample: nn.Module | None = None
        if stride != 1 or in_ch != out_ch:
            self.downsample = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride, bias=False),
                nn.BatchNorm2d(out_ch, eps=1e-5),
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.bn3(self.conv2(self.prelu(self.bn2(self.conv1(self.bn1(x))))))
        skip = x if self.downsample is None else self.downsample(x)
        return out + skip


class IResNet(nn.Module):
    """iResNet backbone for 112x112 faces -> ``num_features``-D embedding."""

    #: modules that stay float32 in a half-weights model: the head arcface_torch's forward
    #: runs outside autocast (``self.fc(x.float())``, then ``features``)
    fp32_modules = ("fc", "features")

    def __init__(self, layers: tuple[int, ...], num_features: int = 512,
                 input_size: int = 112) -> None:
        super().__init__()
        if input_size % 16:
            raise ValueError(f"iresnet input size must be a multiple of 16, got {input_size}")
        self.conv1 = nn.Conv2d(3, 64, 3, 1, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(64, eps=1e-5)
        self.prelu = nn.PReLU(64)
        in_ch = 64
        for i, (n_blocks, width) in enumerate(zip(layers, STAGE_WIDTHS, strict=True), start=1):
            blocks = [IBasicBlock(in_ch, width, stride=2)]
            blocks += [IBasicBlock(width, width) for _ in range(n_blocks - 1)]
            setattr(self, f"layer{i}", nn.Sequential(*blocks))
            in_ch = width
        self.bn2 = nn.BatchNorm2d(512, eps=1e-5)
        self.dropout = nn.Dropout(p=0.0)
        side = input_size // 16
        self.fc = nn.Linear(512 * side * side, num_features)
        self.features = nn.BatchNorm1d(num_features, eps=1e-5)

    @property
    def num_features(self) -> int:
        return int(self.features.num_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.prelu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        x = self.dropout(torch.flatten(self.bn2(x), 1))
        # the head runs in fp32 (as arcface_torch does): its output norm is a quality signal
        with torch.autocast(device_type=x.device.type, enabled=False):
            return self.features(self.fc(x.float()))


def build_iresnet(arch: str = "r100", num_features: int = 512) -> IResNet:
    """A randomly initialised iResNet of depth ``arch`` (r18, r34, r50, r100, r200)."""
    if arch not in IRESNET_LAYERS:
        raise ValueError(f"unknown iresnet arch {arch!r}; choose from {sorted(IRESNET_LAYERS)}")
    return IResNet(IRESNET_LAYERS[arch], num_features=num_features)
