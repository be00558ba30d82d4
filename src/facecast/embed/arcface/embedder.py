"""Backend ``arcface_torch`` (alias ``iresnet``): any arcface_torch ``backbone.pth``.

Preprocessing is arcface_torch's evaluation (``eval/verification.py``): the 112x112 RGB
ArcFace crop scaled ``(x/255 - 0.5)/0.5``. With ``flip: true`` the features of the crop
and of its horizontal mirror are summed (the stage normalises the sum), as
verification.py does before ``sklearn.preprocessing.normalize``. How the forward runs
(the module as loaded, BatchNorm folded, or TorchScript-frozen) is the ``inference`` option
(:mod:`facecast.embed.arcface.inference`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from facecast.embed.arcface.inference import build_inference_model, resolve_mode
from facecast.embed.arcface.weights import load_backbone
from facecast.embed.base import Embedder, autocast, to_float_nchw

INPUT_SIZE = 112


def preprocess(crops: torch.Tensor, device: torch.device) -> torch.Tensor:
    """uint8 RGB ``(N, H, W, 3)`` -> float ``(N, 3, 112, 112)`` scaled to [-1, 1]."""
    return to_float_nchw(crops, device, INPUT_SIZE).div_(127.5).sub_(1.0)  # (x/255-0.5)/0.5


class ArcfaceTorchEmbedder(Embedder):
    """Embeddings from an insightface arcface_torch (or CAST) ``backbone.pth``.

    ``arch``: r18, r34, r50, r100, r200, mbf, mbf_large, vit_t, vit_s, vit_b, or ``auto``
    (inferred from the file's keys and shapes). ``flip``: add the mirrored crop's features.
    ``inference``: ``auto`` (default), ``eager``, ``fused`` or ``frozen``
    (:mod:`facecast.embed.arcface.inference`); the mode that runs is ``self.inference``.
    """

    backend = "arcface_torch"
    supports_cuda = True
    thread_safe = True  # forward passes of the eval model may run in parallel threads

    def __init__(self, name: str, weights: str, arch: str = "auto", flip: bool = False,
                 inference: str = "auto", heads: int | None = None,
                 device: torch.device | None = None, amp: str = "none") -> None:
        super().__init__(name, device, amp)
        model, self.arch = load_backbone(weights, arch, model_name=name,
                                         heads=None if heads is None else int(heads))
        model = model.to(self.device)
        self.dim = int(model.num_features)
        self.inference_option = str(inference)
        mode = resolve_mode(self.inference_option, self.device, amp)
        self.model, self.inference = build_inference_model(model, mode, self.device, name)
        self.weights_path = str(weights)
        self.flip = bool(flip)
        self.crop_column = "crop_arcface"

    @torch.inference_mode()
    def embed_tensor(self, crops: torch.Tensor) -> torch.Tensor:
        """Raw float32 features on the device (flip-sum when ``flip``)."""
        x = preprocess(crops, self.device)
        if self.inference == "fused":
            x = x.contiguous(memory_format=torch.channels_last)
        with autocast(self.device, self.amp):
            feats = self.model(x).float()
            if self.flip:
                feats = feats + self.model(torch.flip(x, dims=[3])).float()
        return feats

    def embed(self, crops: torch.Tensor) -> np.ndarray:
        return self.embed_tensor(crops).cpu().numpy().astype(np.float32, copy=False)

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "arch": self.arch, "flip": self.flip,
                "inference": self.inference}
