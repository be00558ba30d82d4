"""dlib's 128-D face-recognition ResNet (``dlib_face_recognition_resnet_model_v1.dat``).

Weights: the file that ships in the ``face_recognition_models`` wheel (found without
importing that package, whose ``__init__`` needs pkg_resources), or an explicit
``weights:`` path.

Input geometry. dlib's network expects 150x150 chips cut the way ``dlib.get_face_chip``
cuts them (its 5-point shape, padding 0.25). We do not re-read the original images: the
chip is resampled from our ArcFace-aligned 112x112 crop by one fixed similarity transform
that maps the ArcFace 5-point template onto :data:`DLIB_CHIP_TEMPLATE_150`, the mean
position of the same five points (MTCNN landmarks: eyes, nose tip, mouth corners) inside
chips that dlib itself cut (``get_face_chip(img, shape_5pt, 150, 0.25)``) from six real
photos (the four ``shared/fixtures/faces``, skimage astronaut, matplotlib grace_hopper;
per-point std 1-3.7 px), made left-right symmetric. The least-squares fit cannot match
both templates exactly (dlib's chip has a slightly shorter eye-to-mouth distance), which
costs a little accuracy; ``tests/test_embed_dlib.py`` checks that descriptors of our chips
stay close to those of dlib's own chips of the same photo.

Engines (model option ``engine``). Only the network's forward differs; the chips are the
same uint8 RGB chips either way.

Where the chips are cut (issue 40.4). On the CPU, :func:`arcface_to_dlib_chips` (PyTorch's
CPU ``grid_sample``, unchanged since before 40.4). When the torch engine runs on another
device (CUDA), :func:`facecast.embed.dlib_chips.device_chips` cuts them there, from the
uint8 crops, with the same grid and the CPU kernel's own arithmetic (fused multiply-adds,
round half to even): the same chips bit for bit (``tests/test_embed_dlib_chips.py``), and
``embed`` no longer waits on a CPU resample between the device's forward passes.

* ``torch`` (default): :mod:`facecast.embed.dlib_dnn` reads the weight file (dlib's own
  serialisation, no dlib code involved) into a torch module that computes what dlib's
  ``compute_face_descriptor`` computes for a 150x150 chip: the raw, un-normalised 128-D
  descriptor, equal to dlib's to float rounding (``tests/test_embed_dlib_torch.py``: max
  |difference| per coordinate <= 1e-4 on real photos, same 10-fold accuracy). Batched,
  channels-last, runs on CUDA too, and may run in several threads (``thread_safe``, the
  stage's CPU micro-batches); ``benchmarks/dlib_engine.py`` measures its speed.
* ``dlib``: dlib's own forward (``dlib.face_recognition_model_v1``); the ``dlib-bin``
  wheel is built without BLAS, computes on one core and holds the GIL.

``num_jitters > 0`` (dlib's random jitter, averaged) exists only in dlib's engine: it needs
``engine: dlib``; with ``engine: torch`` it is a configuration error
(:func:`engine_error`), never a silent switch.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from facecast.embed.base import Embedder, autocast, missing_weights
from facecast.embed.dlib_chips import ChipPlan, chip_plan, device_chips
from facecast.embed.dlib_dnn import load_dlib_resnet
from facecast.faces.align import ARCFACE_TEMPLATE_112, similarity_transform

#: where the same five points fall in dlib's own 150x150, padding-0.25 face chips
DLIB_CHIP_TEMPLATE_150 = np.array([
    [47.24, 45.61], [101.76, 45.61], [74.50, 78.28],
    [50.50, 100.95], [98.50, 100.95]], dtype=np.float64)

DLIB_CHIP_SIZE = 150
DLIB_WEIGHTS_FILE = "dlib_face_recognition_resnet_model_v1.dat"


def default_dlib_weights() -> Path | None:
    """The weight file inside the installed ``face_recognition_models`` wheel, if any."""
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "models" / DLIB_WEIGHTS_FILE


def chip_sampling_grid(src_size: int = 112, chip_size: int = DLIB_CHIP_SIZE) -> torch.Tensor:
    """``grid_sample`` grid (1, chip, chip, 2) that reads a dlib chip out of an ArcFace crop.

    Index convention (pixel ``i`` centred at ``i``, as MTCNN and :mod:`facecast.faces.align`):
    chip pixel (u, v) is read at crop point inverse(M) @ (u, v, 1).
    """
    scale = src_size / 112.0
    mat = similarity_transform(ARCFACE_TEMPLATE_112 * scale,
                               DLIB_CHIP_TEMPLATE_150 * (chip_size / DLIB_CHIP_SIZE))
    full = np.vstack([mat, [0, 0, 1]])
    inv = np.linalg.inv(full)
    v, u = np.mgrid[0:chip_size, 0:chip_size].astype(np.float64)
    pts = np.stack([u.ravel(), v.ravel(), np.ones(u.size)])
    xs, ys = (inv @ pts)[:2]
    # align_corners=False: normalised coord = (2 * pixel + 1) / size - 1
    gx = (2 * xs + 1) / src_size - 1
    gy = (2 * ys + 1) / src_size - 1
    grid = np.stack([gx, gy], axis=-1).reshape(1, chip_size, chip_size, 2)
    return torch.from_numpy(grid.astype(np.float32))


def arcface_to_dlib_chips(crops: torch.Tensor, grid: torch.Tensor | None = None) -> np.ndarray:
    """uint8 ArcFace crops ``(N, S, S, 3)`` -> uint8 dlib chips ``(N, 150, 150, 3)`` (batched)."""
    if grid is None:
        grid = chip_sampling_grid(int(crops.shape[1]))
    x = crops.permute(0, 3, 1, 2).float()
    out = torch.nn.functional.grid_sample(x, grid.expand(len(x), -1, -1, -1), mode="bilinear",
                                          padding_mode="border", align_corners=False)
    return out.round_().clamp_(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous().numpy()


#: values of the model option ``engine``
DLIB_ENGINES = ("torch", "dlib")


def engine_error(engine: str, num_jitters: int) -> str | None:
    """Why ``engine`` with ``num_jitters`` is not a valid dlib_resnet setting (None if it is)."""
    if engine not in DLIB_ENGINES:
        return f"engine: must be one of {', '.join(DLIB_ENGINES)}, got {engine!r}"
    if engine == "torch" and int(num_jitters) > 0:
        return (f"num_jitters: {num_jitters} needs engine: dlib (dlib's random jitter exists "
                "only in dlib's own forward); set engine: dlib, or num_jitters: 0")
    return None


class DlibEmbedder(Embedder):
    """dlib's 128-D ResNet on chips resampled from the ArcFace crop (options: engine,
    num_jitters, weights; module docstring)."""

    backend = "dlib_resnet"
    supports_cuda = True  # the torch engine; engine: dlib runs on the CPU (dlib-bin)

    def __init__(self, name: str, weights: str | None = None, num_jitters: int = 0,
                 engine: str = "torch", device: torch.device | None = None,
                 amp: str = "none") -> None:
        problem = engine_error(engine, num_jitters)
        if problem:
            raise ValueError(f"embed.models.{name}.{problem}")
        if engine == "dlib":
            device, amp = torch.device("cpu"), "none"
        super().__init__(name, device, amp)
        path = Path(weights) if weights else default_dlib_weights()
        if path is None or not path.is_file():
            raise missing_weights(
                path or DLIB_WEIGHTS_FILE, name,
                "Install the weights with `pip install face_recognition_models` or put "
                f"{DLIB_WEIGHTS_FILE} (dlib.net/files) there and set "
                "embed.models.<name>.weights.")
        self.engine = engine
        self.weights_path = str(path)
        self.num_jitters = int(num_jitters)
        self.dim = 128
        self.crop_column = "crop_arcface"
        self._grid = chip_sampling_grid(112)
        #: cut chips on the embedder's device (True off the CPU; the chips are the same)
        self.resample_on_device = engine == "torch" and self.device.type != "cpu"
        self._plans: dict[int, ChipPlan] = {}
        if engine == "dlib":
            import dlib

            self.supports_cuda = False  # dlib-bin wheels are CPU builds
            self.model = dlib.face_recognition_model_v1(os.fspath(path))
        else:
            self.thread_safe = True  # eval-mode forward passes may run side by side
            self.net = load_dlib_resnet(path).to(self.device)
            self.net = self.net.to(memory_format=torch.channels_last)

    def embed_chips(self, chips: np.ndarray) -> np.ndarray:
        """Raw 128-D descriptors of dlib-aligned 150x150 uint8 RGB chips ``(N, 150, 150, 3)``."""
        if len(chips) == 0:
            return np.zeros((0, 128), np.float32)
        if self.engine == "dlib":
            batch = [np.ascontiguousarray(c) for c in chips]
            vecs = self.model.compute_face_descriptor(batch, num_jitters=self.num_jitters)
            return np.asarray([np.asarray(v) for v in vecs], dtype=np.float32)
        return self._torch_forward(torch.from_numpy(np.ascontiguousarray(chips)))

    @torch.inference_mode()
    def _torch_forward(self, chips: torch.Tensor) -> np.ndarray:
        x = chips.to(self.device, non_blocking=True).permute(0, 3, 1, 2).float()
        x = x.contiguous(memory_format=torch.channels_last)
        with autocast(self.device, self.amp):
            out = self.net(x)
        return out.float().cpu().numpy()

    def embed(self, crops: torch.Tensor) -> np.ndarray:
        size = int(crops.shape[1])
        if self.resample_on_device:
            if len(crops) == 0:
                return np.zeros((0, 128), np.float32)
            plan = self._plans.get(size)
            if plan is None:
                plan = self._plans[size] = chip_plan(self._grid_of(size), size).to(self.device)
            return self._torch_forward(device_chips(crops.to(self.device, non_blocking=True),
                                                    plan))
        return self.embed_chips(arcface_to_dlib_chips(crops.cpu(), self._grid_of(size)))

    def _grid_of(self, size: int) -> torch.Tensor:
        return self._grid if size == 112 else chip_sampling_grid(size)

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "engine": self.engine, "num_jitters": self.num_jitters,
                "chip": "similarity-resampled from crop_arcface to dlib 150px/0.25 geometry"}
