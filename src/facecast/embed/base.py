"""What every embedding backend shares: the Embedder interface, devices, AMP, weights.

An :class:`Embedder` takes a batch of aligned face crops as a uint8 tensor
``(N, H, W, 3)`` (RGB, the crop column named by ``crop_column``) and returns the raw
(un-normalised) float32 features ``(N, D)``. The stage takes the norm and normalises, so
every backend reports the same MagFace-style quality signal (the raw norm).
"""

from __future__ import annotations

import abc
import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from facecast.io.paths import portable_or_none

#: Crop columns of the faces Parquet and their pixel size.
CROP_SIZES = {"crop_arcface": 112, "crop_facenet": 160}

AMP_DTYPES = {"none": None, "fp16": torch.float16, "bf16": torch.bfloat16}


class MissingWeightsError(FileNotFoundError):
    """A model's weight file is not where the config says; the message says where to put it."""


def missing_weights(path: str | os.PathLike, model: str, how: str) -> MissingWeightsError:
    """Build the one clear error for an absent weight file: names the file and how to get it."""
    return MissingWeightsError(
        f"embedding model '{model}': weight file not found: {Path(path).absolute()}\n"
        f"  {how}")


_SHA_CACHE: dict[tuple[str, int, int], str] = {}


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 22) -> str:
    """Hex sha256 of a file (cached per path, size and mtime for the life of the process)."""
    p = Path(path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _SHA_CACHE:
        h = hashlib.sha256()
        with open(p, "rb") as fh:
            while block := fh.read(chunk):
                h.update(block)
        _SHA_CACHE[key] = h.hexdigest()
    return _SHA_CACHE[key]


def resolve_device(device: str = "auto") -> torch.device:
    """``auto`` -> CUDA when available, else CPU; ``cuda`` without a GPU is an error."""
    device = str(device or "auto")
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("embed.device is 'cuda' but torch sees no CUDA device "
                           "(set embed.device: auto or cpu)")
    return dev


@contextlib.contextmanager
def autocast(device: torch.device, amp: str = "none") -> Iterator[None]:
    """Mixed precision for the forward pass (``fp16``/``bf16``); a no-op for ``none``.

    fp16 on CPU is slow and poorly supported, so on CPU only ``bf16`` is honoured.
    """
    dtype = AMP_DTYPES[active_amp(device, amp)]
    if dtype is None:
        yield
        return
    with torch.autocast(device_type=device.type, dtype=dtype):
        yield


def active_amp(device: torch.device, amp: str) -> str:
    """The mixed precision a forward pass on ``device`` really runs under: :func:`autocast`
    ignores fp16 on a CPU."""
    return "none" if device.type == "cpu" and amp == "fp16" else amp


class Embedder(abc.ABC):
    """Base class of the embedding backends.

    Subclasses set ``backend``, ``dim``, ``crop_column``, ``weights_path`` and implement
    :meth:`embed`. ``supports_cuda`` says whether the backend can use a GPU at all;
    ``thread_safe`` whether :meth:`embed` may be called from several threads at once.
    """

    backend: str = ""
    supports_cuda: bool = False
    #: True when :meth:`embed` may run in several threads at once (the stage then spreads
    #: CPU micro-batches over the job's threads, ``embed.cpu_micro_batch``)
    thread_safe: bool = False
    #: True when :meth:`embed` computes each crop's features on its own, so the batch's
    #: shape cannot change them (the stage then never pads batches to a fixed shape)
    per_crop: bool = False

    def __init__(self, name: str, device: torch.device | None = None, amp: str = "none") -> None:
        self.name = name
        self.device = device or torch.device("cpu")
        self.amp = amp
        self.dim: int = 0
        self.crop_column: str = "crop_arcface"
        self.weights_path: str | None = None

    @abc.abstractmethod
    def embed(self, crops: torch.Tensor) -> np.ndarray:
        """Raw float32 features ``(N, D)`` of uint8 RGB crops ``(N, H, W, 3)``."""

    def weights_sha256(self) -> str | None:
        """sha256 of the weight file (None for weight-free backends)."""
        return sha256_file(self.weights_path) if self.weights_path else None

    def provenance(self) -> dict[str, Any]:
        """Model facts stored with every embedding Parquet of this model."""
        return {
            "model": self.name,
            "backend": self.backend,
            "weights": portable_or_none(self.weights_path),  # relative to the run folder
            "weights_sha256": self.weights_sha256(),
            "embedding_dim": int(self.dim),
            "crop_column": self.crop_column,
            "device": str(self.device),
            "amp": self.amp,
        }


def to_float_nchw(crops: torch.Tensor, device: torch.device, size: int | None = None,
                  channels_last: bool = True) -> torch.Tensor:
    """uint8 ``(N, H, W, 3)`` -> float32 ``(N, 3, H, W)`` on ``device`` (0..255 scale).

    The copy is non-blocking (pinned host memory makes it asynchronous); a crop of another
    size is resized (bilinear, antialiased) to ``size``.
    """
    x = crops.to(device, non_blocking=True).permute(0, 3, 1, 2).float()
    if size is not None and (x.shape[-1] != size or x.shape[-2] != size):
        x = torch.nn.functional.interpolate(x, size=(size, size), mode="bilinear",
                                            align_corners=False, antialias=True)
    if channels_last and device.type == "cuda":
        x = x.contiguous(memory_format=torch.channels_last)
    return x
