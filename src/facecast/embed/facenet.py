"""facenet-pytorch InceptionResnetV1 (VGGFace2 / CASIA-WebFace) with offline weight loading.

Weights are the files facenet-pytorch itself downloads, looked up where it caches them:
``$TORCH_HOME/checkpoints/20180402-114759-vggface2.pt`` (or ``...-casia-webface.pt``;
``$TORCH_HOME`` defaults to ``$XDG_CACHE_HOME/torch`` = ``~/.cache/torch``), or an explicit
``weights:`` path. Nothing is downloaded. Input: the 160x160 margin crop
(``crop_facenet``), standardised as facenet does, ``(x - 127.5) / 128``. Output: the 512-D
``last_bn`` features before facenet's own L2 normalisation (so the raw norm is kept).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
from facenet_pytorch import InceptionResnetV1

from facecast.embed.base import Embedder, autocast, missing_weights, to_float_nchw

#: official file names and classifier sizes of the two pretrained releases
FACENET_WEIGHTS = {
    "vggface2": ("20180402-114759-vggface2.pt", 8631),
    "casia-webface": ("20180408-102900-casia-webface.pt", 10575),
}
FACENET_URL = "https://github.com/timesler/facenet-pytorch/releases/download/v2.2.9/"


def torch_home() -> Path:
    """``$TORCH_HOME``, else ``$XDG_CACHE_HOME/torch``, else ``~/.cache/torch`` (as facenet-pytorch)."""
    default = os.path.join(os.getenv("XDG_CACHE_HOME", "~/.cache"), "torch")
    return Path(os.path.expanduser(os.getenv("TORCH_HOME", default)))


def facenet_weights_path(pretrained: str = "vggface2", weights: str | None = None) -> Path:
    """Where the weights of ``pretrained`` are expected (``weights`` overrides the cache path)."""
    if pretrained not in FACENET_WEIGHTS:
        raise ValueError(f"facenet pretrained must be one of {sorted(FACENET_WEIGHTS)}, "
                         f"got {pretrained!r}")
    if weights:
        return Path(weights)
    return torch_home() / "checkpoints" / FACENET_WEIGHTS[pretrained][0]


def load_facenet(pretrained: str = "vggface2", weights: str | None = None,
                 model_name: str = "facenet") -> tuple[InceptionResnetV1, Path]:
    """Build InceptionResnetV1 and load the official state dict (weights_only, strict)."""
    path = facenet_weights_path(pretrained, weights)
    fname, n_classes = FACENET_WEIGHTS[pretrained]
    if not path.is_file():
        raise missing_weights(
            path, model_name,
            f"Download {FACENET_URL}{fname} and save it as {path} (the facenet-pytorch "
            "cache), or set embed.models.<name>.weights to the file.")
    model = InceptionResnetV1(pretrained=None, classify=False)
    state = torch.load(path, map_location="cpu", weights_only=True)
    if "logits.weight" in state:
        n_classes = int(state["logits.weight"].shape[0])
    model.logits = torch.nn.Linear(512, n_classes)  # present in the official files
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise ValueError(f"{path} is not an InceptionResnetV1 state dict: {err}") from err
    return model.eval(), path


def facenet_features(model: InceptionResnetV1, x: torch.Tensor) -> torch.Tensor:
    """InceptionResnetV1 forward up to ``last_bn`` (facenet's output before L2 normalising)."""
    for name in ("conv2d_1a", "conv2d_2a", "conv2d_2b", "maxpool_3a", "conv2d_3b",
                 "conv2d_4a", "conv2d_4b", "repeat_1", "mixed_6a", "repeat_2", "mixed_7a",
                 "repeat_3", "block8", "avgpool_1a", "dropout"):
        x = getattr(model, name)(x)
    with torch.autocast(device_type=x.device.type, enabled=False):
        return model.last_bn(model.last_linear(x.flatten(1).float()))


class FacenetEmbedder(Embedder):
    """Embeddings from facenet-pytorch InceptionResnetV1 (options: pretrained, weights)."""

    backend = "facenet"
    supports_cuda = True
    #: eval-mode forward passes may run side by side: the stage's CPU micro-batches of 8
    #: (fixed forward shape, batch-invariant) then run in the job's threads, 1.7x the
    #: faces per second of one 64-face forward instead of 2x fewer
    thread_safe = True

    def __init__(self, name: str, pretrained: str = "vggface2", weights: str | None = None,
                 device: torch.device | None = None, amp: str = "none") -> None:
        super().__init__(name, device, amp)
        model, path = load_facenet(pretrained, weights, model_name=name)
        self.model = model.to(self.device)
        if self.device.type == "cuda":
            self.model = self.model.to(memory_format=torch.channels_last)
        self.weights_path = str(path)
        self.pretrained = pretrained
        self.dim = 512
        self.crop_column = "crop_facenet"

    @torch.inference_mode()
    def embed(self, crops: torch.Tensor) -> np.ndarray:
        x = to_float_nchw(crops, self.device, 160).sub_(127.5).div_(128.0)
        with autocast(self.device, self.amp):
            feats = facenet_features(self.model, x)
        return feats.float().cpu().numpy()

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "pretrained": self.pretrained}
