"""Pixel preprocessing shared by the model-file backends (``onnx``, ``torchscript``).

Both take the same options: which aligned crop to feed (``crop``: ``arcface`` 112 px or
``facenet`` 160 px, resized to the model's input size), the per-channel ``mean`` and
``std`` on the 0..255 scale (``(x - mean) / std``; the insightface default is 127.5 and
127.5) and the ``channel_order`` the model expects (``rgb`` or ``bgr``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from facecast.embed.base import to_float_nchw

CROPS = ("arcface", "facenet")
CHANNEL_ORDERS = ("rgb", "bgr")


def as_triple(value: float | list[float], what: str, backend: str) -> np.ndarray:
    """One number or three -> a float32 array of three (one per channel)."""
    arr = np.asarray(value, dtype=np.float32).reshape(-1)
    if arr.size == 1:
        arr = np.repeat(arr, 3)
    if arr.size != 3:
        raise ValueError(f"{backend} {what} must be one number or three, got {value!r}")
    return arr


class PixelSpec:
    """The crop, scaling and channel order of a model-file backend, and their application."""

    def __init__(self, backend: str, crop: str = "arcface",
                 mean: float | list[float] = 127.5, std: float | list[float] = 127.5,
                 channel_order: str = "rgb") -> None:
        if channel_order not in CHANNEL_ORDERS:
            raise ValueError(f"{backend} channel_order must be rgb or bgr, got {channel_order!r}")
        if crop not in CROPS:
            raise ValueError(f"{backend} crop must be arcface or facenet, got {crop!r}")
        self.mean = as_triple(mean, "mean", backend)
        self.std = as_triple(std, "std", backend)
        if not (np.isfinite(self.std).all() and (self.std != 0).all()):
            raise ValueError(f"{backend} std must be finite and non-zero, got {std!r}")
        self.channel_order = channel_order
        self.crop_column = f"crop_{crop}"

    def __call__(self, crops: torch.Tensor, device: torch.device, size: int) -> torch.Tensor:
        """uint8 ``(N, H, W, 3)`` RGB crops -> float32 ``(N, 3, size, size)`` on ``device``,
        channels in the model's order, ``(x - mean) / std``."""
        x = to_float_nchw(crops, device, size, channels_last=False)
        if self.channel_order == "bgr":
            x = x.flip(1)
        mean = torch.from_numpy(self.mean).to(device).view(1, 3, 1, 1)
        std = torch.from_numpy(self.std).to(device).view(1, 3, 1, 1)
        return (x - mean) / std

    def provenance(self) -> dict[str, Any]:
        """The options as stored in every embedding file's provenance."""
        return {"mean": self.mean.tolist(), "std": self.std.tolist(),
                "channel_order": self.channel_order}
