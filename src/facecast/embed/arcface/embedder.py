"""Backend ``arcface_torch`` (alias ``iresnet``): any arcface_torch ``backbone.pth``.

Preprocessing is arcface_torch's evaluation (``eval/verification.py``): the 112x112 RGB
ArcFace crop scaled ``(x/255 - 0.5)/0.5``. With ``flip: true`` the features of the crop
and of its horizontal mirror are summed (the stage normalises the sum), as
verification.py does before ``sklearn.preprocessing.normalize``. How the forward runs
(the module as loaded, BatchNorm folded, TorchScript-frozen, or half weights on CUDA) is the
``inference`` option, and ``compile: true`` adds ``torch.compile``
(:mod:`facecast.embed.arcface.inference`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from facecast.embed.arcface.inference import (
    build_inference_model,
    compile_model,
    resolve_mode,
)
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
    ``inference``: ``auto`` (default), ``eager``, ``fused``, ``frozen`` or ``half``
    (:mod:`facecast.embed.arcface.inference`); the mode that runs is ``self.inference``.
    ``compile``: wrap that model in ``torch.compile`` (compiled and checked at build time;
    ``self.compile_seconds`` is None when it did not run).
    """

    backend = "arcface_torch"
    supports_cuda = True
    thread_safe = True  # forward passes of the eval model may run in parallel threads

    def __init__(self, name: str, weights: str, arch: str = "auto", flip: bool = False,
                 inference: str = "auto", heads: int | None = None, compile: bool = False,
                 device: torch.device | None = None, amp: str = "none") -> None:
        super().__init__(name, device, amp)
        model, self.arch = load_backbone(weights, arch, model_name=name,
                                         heads=None if heads is None else int(heads))
        model = model.to(self.device)
        self.dim = int(model.num_features)
        self.inference_option = str(inference)
        mode = resolve_mode(self.inference_option, self.device, amp)
        self.model, self.inference = build_inference_model(model, mode, self.device, name, amp)
        self.compile = bool(compile)
        self.compile_seconds: float | None = None
        if self.compile:
            layout = self.device.type == "cuda" or self.inference == "fused"
            self.model, self.compile_seconds = compile_model(
                self.model, model, self.device, amp, name, channels_last=layout)
        self.weights_path = str(weights)
        self.flip = bool(flip)
        self.crop_column = "crop_arcface"

    @torch.inference_mode()
    def embed_tensor(self, crops: torch.Tensor) -> torch.Tensor:
        """Raw float32 features on the device (flip-sum when ``flip``)."""
        x = preprocess(crops, self.device)
        if self.inference == "fused":
            x = x.contiguous(memory_format=torch.channels_last)
        n = len(x)
        if self.compiled and n == 1:  # a size-1 batch would compile a second graph
            x = torch.cat([x, x])
        with autocast(self.device, self.amp):
            feats = self.model(x).float()
            if self.flip:
                mirrored = torch.flip(x, dims=[3])
                if self.compiled:  # the layout the model was compiled for
                    mirrored = mirrored.contiguous(memory_format=_layout(x))
                feats = feats + self.model(mirrored).float()
        return feats[:n]

    @property
    def compiled(self) -> bool:
        """Whether the model that runs is a ``torch.compile`` one."""
        return self.compile_seconds is not None

    def embed(self, crops: torch.Tensor) -> np.ndarray:
        return self.embed_tensor(crops).cpu().numpy().astype(np.float32, copy=False)

    def provenance(self) -> dict[str, Any]:
        prov = {**super().provenance(), "arch": self.arch, "flip": self.flip,
                "inference": self.inference}
        if self.compile:
            prov.update(compile=self.compiled, compile_seconds=self.compile_seconds)
        return prov


def _layout(x: torch.Tensor) -> torch.memory_format:
    """The memory format of a 4-D tensor (channels-last or contiguous)."""
    return (torch.channels_last if x.is_contiguous(memory_format=torch.channels_last)
            and not x.is_contiguous() else torch.contiguous_format)
