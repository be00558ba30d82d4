"""insightface arcface_torch iResNet (18/34/50/100/200) and its ``backbone.pth`` loader.

The module names match the official state dicts exactly (``conv1``, ``bn1``, ``prelu``,
``layer{1..4}.{i}.{bn1,conv1,bn2,prelu,conv2,bn3,downsample.0,downsample.1}``, ``bn2``,
``fc``, ``features``), so an official ``backbone.pth`` (e.g. the ms1mv3/glint360k
ResNet-100 of CAST's benchmark) loads with ``load_state_dict(strict=True)``.

Input: 112x112 RGB aligned with the ArcFace 5-point template, scaled ``(x/255 - 0.5)/0.5``.
Output: 512-D features (the ``features`` BatchNorm1d), un-normalised.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from facecast.embed.base import Embedder, autocast, missing_weights, to_float_nchw

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


def _unwrap_state_dict(obj: Any) -> dict[str, torch.Tensor]:
    """Accept a bare state dict or a training checkpoint ``{"state_dict_backbone": ...}``."""
    if isinstance(obj, dict):
        for key in ("state_dict_backbone", "state_dict", "model"):
            if key in obj and isinstance(obj[key], dict):
                obj = obj[key]
                break
    if not isinstance(obj, dict):
        raise ValueError("iresnet weights must be a state dict")
    # DistributedDataParallel / torch.compile prefixes
    out = {}
    for k, v in obj.items():
        for prefix in ("module.", "_orig_mod."):
            if k.startswith(prefix):
                k = k[len(prefix):]
        out[k] = v
    return out


def load_iresnet(path: str | os.PathLike, arch: str = "r100", model_name: str = "iresnet",
                 map_location: str | torch.device = "cpu") -> IResNet:
    """Load an insightface ``backbone.pth`` into :class:`IResNet` (strict key match, eval mode).

    Loading is ``weights_only=True``: a file that holds anything but tensors is refused.
    """
    p = Path(path)
    if not p.is_file():
        raise missing_weights(p, model_name,
                              "Put an insightface arcface_torch backbone.pth there (e.g. "
                              "ms1mv3_arcface_r100_fp16/backbone.pth from the insightface "
                              "model zoo) or set embed.models.<name>.weights.")
    state = _unwrap_state_dict(torch.load(p, map_location=map_location, weights_only=True))
    num_features = int(state["features.weight"].shape[0]) if "features.weight" in state else 512
    model = build_iresnet(arch, num_features=num_features)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise ValueError(f"{p} does not match iresnet arch {arch!r}: {err}") from err
    return model.eval()


class IResNetEmbedder(Embedder):
    """Embeddings from an insightface iResNet ``backbone.pth`` (options: arch, flip)."""

    backend = "iresnet"
    supports_cuda = True

    def __init__(self, name: str, weights: str, arch: str = "r100", flip: bool = False,
                 device: torch.device | None = None, amp: str = "none") -> None:
        super().__init__(name, device, amp)
        self.model = load_iresnet(weights, arch, model_name=name).to(self.device)
        if self.device.type == "cuda":
            self.model = self.model.to(memory_format=torch.channels_last)
        self.weights_path = str(weights)
        self.arch = arch
        self.flip = bool(flip)
        self.dim = int(self.model.features.num_features)
        self.crop_column = "crop_arcface"

    @torch.inference_mode()
    def embed_tensor(self, crops: torch.Tensor) -> torch.Tensor:
        """Raw features on the device (flip-sum when ``flip``)."""
        x = to_float_nchw(crops, self.device, 112).div_(127.5).sub_(1.0)  # (x/255-0.5)/0.5
        with autocast(self.device, self.amp):
            feats = self.model(x).float()
            if self.flip:
                feats = feats + self.model(torch.flip(x, dims=[3])).float()
        return feats

    def embed(self, crops: torch.Tensor) -> np.ndarray:
        return self.embed_tensor(crops).cpu().numpy().astype(np.float32, copy=False)

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "arch": self.arch, "flip": self.flip}
