"""The iResNet names of earlier facecast versions (backend ``iresnet``, now an alias of
``arcface_torch``). Everything lives in :mod:`facecast.embed.arcface`."""

from __future__ import annotations

import os

import torch

from facecast.embed.arcface.embedder import ArcfaceTorchEmbedder
from facecast.embed.arcface.iresnet import (
    IRESNET_LAYERS,
    STAGE_WIDTHS,
    IBasicBlock,
    IResNet,
    build_iresnet,
)
from facecast.embed.arcface.weights import load_backbone

__all__ = ["IRESNET_LAYERS", "STAGE_WIDTHS", "IBasicBlock", "IResNet", "IResNetEmbedder",
           "build_iresnet", "load_iresnet"]


def load_iresnet(path: str | os.PathLike, arch: str = "r100", model_name: str = "iresnet",
                 map_location: str | torch.device = "cpu") -> IResNet:
    """Load an insightface ``backbone.pth`` into :class:`IResNet` (strict key match, eval
    mode; ``weights_only=True``)."""
    if arch not in IRESNET_LAYERS:
        raise ValueError(f"unknown iresnet arch {arch!r}; choose from {sorted(IRESNET_LAYERS)}")
    model, _ = load_backbone(path, arch, model_name=model_name, map_location=map_location)
    return model


class IResNetEmbedder(ArcfaceTorchEmbedder):
    """:class:`ArcfaceTorchEmbedder` under its old name (provenance says ``iresnet``)."""

    backend = "iresnet"
