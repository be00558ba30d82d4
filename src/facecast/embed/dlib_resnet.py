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
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch

from facecast.embed.base import Embedder, missing_weights
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


class DlibEmbedder(Embedder):
    """dlib's 128-D ResNet on chips resampled from the ArcFace crop (option: num_jitters)."""

    backend = "dlib_resnet"
    supports_cuda = False  # dlib-bin wheels are CPU builds

    def __init__(self, name: str, weights: str | None = None, num_jitters: int = 0,
                 device: torch.device | None = None, amp: str = "none") -> None:
        super().__init__(name, torch.device("cpu"), "none")
        import dlib

        path = Path(weights) if weights else default_dlib_weights()
        if path is None or not path.is_file():
            raise missing_weights(
                path or DLIB_WEIGHTS_FILE, name,
                "Install the weights with `pip install face_recognition_models` or put "
                f"{DLIB_WEIGHTS_FILE} (dlib.net/files) there and set "
                "embed.models.<name>.weights.")
        self.model = dlib.face_recognition_model_v1(os.fspath(path))
        self.weights_path = str(path)
        self.num_jitters = int(num_jitters)
        self.dim = 128
        self.crop_column = "crop_arcface"
        self._grid = chip_sampling_grid(112)

    def embed_chips(self, chips: np.ndarray) -> np.ndarray:
        """Raw 128-D descriptors of dlib-aligned 150x150 uint8 RGB chips ``(N, 150, 150, 3)``."""
        if len(chips) == 0:
            return np.zeros((0, 128), np.float32)
        batch = [np.ascontiguousarray(c) for c in chips]
        vecs = self.model.compute_face_descriptor(batch, num_jitters=self.num_jitters)
        return np.asarray([np.asarray(v) for v in vecs], dtype=np.float32)

    def embed(self, crops: torch.Tensor) -> np.ndarray:
        grid = self._grid if crops.shape[1] == 112 else chip_sampling_grid(int(crops.shape[1]))
        return self.embed_chips(arcface_to_dlib_chips(crops.cpu(), grid))

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "num_jitters": self.num_jitters,
                "chip": "similarity-resampled from crop_arcface to dlib 150px/0.25 geometry"}
