"""Batched MTCNN face detection (facenet-pytorch 2.5.3 networks and bundled weights).

The P/R/O-nets are built untrained and their weights loaded with
``torch.load(weights_only=True)`` from the files facenet-pytorch ships (or
``faces.weights_dir``), so provenance can record each file's sha256. Images are first
shrunk so the longer side is at most ``max_side`` (detection cost grows with the pixel
count, and faces in large photos are large), grouped by size and run through MTCNN's
cascade in batches; boxes and landmarks are mapped back to full-image pixels.
On CUDA, mixed sizes are zero-padded into 32-pixel buckets so they batch together.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from PIL import Image

from facecast.faces.config import FacesConfig
from facecast.io.paths import portable_path

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

MTCNN_FILES = {"pnet": "pnet.pt", "rnet": "rnet.pt", "onet": "onet.pt"}
_CUDA_BUCKET = 32


@dataclass
class Detections:
    """Faces found in one image (full-image pixel coordinates, index convention).

    ``boxes`` (n, 4) x1, y1, x2, y2; ``scores`` (n,); ``landmarks`` (n, 5, 2) x, y of left
    eye, right eye, nose, left and right mouth corner. ``error`` is set (and n = 0) when the
    detector failed on this image.
    """

    boxes: np.ndarray = field(default_factory=lambda: np.zeros((0, 4), np.float32))
    scores: np.ndarray = field(default_factory=lambda: np.zeros((0,), np.float32))
    landmarks: np.ndarray = field(default_factory=lambda: np.zeros((0, 5, 2), np.float32))
    error: str = ""

    def __len__(self) -> int:
        return int(len(self.scores))


def select_face(det: Detections, policy: str, width: int, height: int) -> int | None:
    """Index of the face to keep under ``policy``, or None when there is none.

    ``largest``: largest box area; ``central``: box centre nearest the image centre;
    ``score``: highest detection score. Ties go to the lower index (deterministic).
    """
    if len(det) == 0:
        return None
    b = det.boxes.astype(np.float64)
    if policy == "largest":
        key = -(b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    elif policy == "central":
        cx, cy = (b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2
        key = ((cx - (width - 1) / 2) / max(width, 1)) ** 2 + ((cy - (height - 1) / 2)
                                                              / max(height, 1)) ** 2
    elif policy == "score":
        key = -det.scores.astype(np.float64)
    else:
        raise ValueError(f"unknown face selection policy {policy!r}")
    return int(np.argmin(key))


def resolve_device(device: str) -> torch.device:
    """``auto`` -> cuda if available else cpu; otherwise the named device (must exist)."""
    import torch  # here: pre-aligned input runs the faces stage without torch

    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"faces.device is {device!r} but torch sees no CUDA device")
    return dev


def default_weights_dir() -> Path:
    """Where facenet-pytorch's wheel keeps the MTCNN weights."""
    import facenet_pytorch

    return Path(facenet_pytorch.__file__).parent / "data"


def sha256_file(path: str | Path) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_mtcnn_nets(weights_dir: str | Path | None = None, device: torch.device | str = "cpu"
                    ) -> tuple[dict[str, torch.nn.Module], dict[str, dict[str, str]]]:
    """Build MTCNN's P/R/O-nets and load their state dicts from ``weights_dir``.

    Returns (nets by name, {name: {"path", "sha256"}}). A missing file raises
    FileNotFoundError naming it; a file with the wrong tensors raises RuntimeError.
    """
    import torch
    from facenet_pytorch.models.mtcnn import ONet, PNet, RNet

    wdir = Path(weights_dir) if weights_dir else default_weights_dir()
    nets: dict[str, torch.nn.Module] = {"pnet": PNet(pretrained=False),
                                        "rnet": RNet(pretrained=False),
                                        "onet": ONet(pretrained=False)}
    info: dict[str, dict[str, str]] = {}
    for name, fname in MTCNN_FILES.items():
        path = wdir / fname
        if not path.is_file():
            raise FileNotFoundError(
                f"MTCNN weights {path} not found: put facenet-pytorch's {fname} there "
                f"(it ships in the facenet-pytorch wheel under facenet_pytorch/data/) or "
                f"set faces.weights_dir")
        state = torch.load(path, map_location="cpu", weights_only=True)
        nets[name].load_state_dict(state)
        nets[name].eval().to(device)
        info[name] = {"path": portable_path(path), "sha256": sha256_file(path)}
    return nets, info


def _as_array(obj: Any, shape_tail: tuple[int, ...]) -> np.ndarray:
    a = np.asarray(obj)
    if a.size == 0:
        return np.zeros((0, *shape_tail), np.float32)
    return a.astype(np.float32).reshape(-1, *shape_tail)


class FaceDetector:
    """MTCNN detector configured from the ``faces`` config section.

    ``detect(images)`` takes HxWx3 uint8 RGB arrays of any sizes and returns one
    :class:`Detections` per image (all faces above the thresholds, best first by score).
    """

    name = "mtcnn"

    def __init__(self, config: Mapping[str, Any] | FacesConfig | None = None) -> None:
        self.cfg = FacesConfig.from_mapping(config)
        self.device = resolve_device(self.cfg.device)
        self.nets, self.weights = load_mtcnn_nets(self.cfg.weights_dir or None, self.device)
        #: pad sizes up to multiples of this so mixed sizes share batches (GPU only: on CPU
        #: padding costs more than batching saves)
        self.bucket = _CUDA_BUCKET if self.device.type == "cuda" else 1

    def settings(self) -> dict[str, Any]:
        """Detector name, version, weights checksums and settings (for provenance)."""
        from importlib.metadata import version

        return {
            "detector": self.name,
            "implementation": f"facenet-pytorch {version('facenet-pytorch')}",
            "weights": self.weights,
            "device": str(self.device),
            "min_face_size": self.cfg.min_face_size,
            "thresholds": list(self.cfg.thresholds),
            "scale_factor": self.cfg.scale_factor,
            "max_side": self.cfg.max_side,
            "batch_size": self.cfg.batch_size,
        }

    def _prepare(self, image: np.ndarray) -> tuple[np.ndarray, float, float]:
        """Shrink so the longer side <= max_side; return (array, fx, fy) full px per det px."""
        h, w = image.shape[:2]
        s = self.cfg.max_side / max(h, w)
        if s >= 1.0:
            return image, 1.0, 1.0
        nw, nh = max(1, round(w * s)), max(1, round(h * s))
        small = np.asarray(Image.fromarray(image).resize(
            (nw, nh), Image.Resampling.BILINEAR, reducing_gap=3.0))
        return small, w / nw, h / nh

    def _run_batch(self, batch: np.ndarray) -> tuple[Sequence[Any], Sequence[Any]]:
        import torch
        from facenet_pytorch.models.utils.detect_face import detect_face

        tensor = torch.from_numpy(batch).to(self.device)
        with torch.inference_mode():
            return detect_face(tensor, self.cfg.min_face_size, self.nets["pnet"],
                               self.nets["rnet"], self.nets["onet"],
                               list(self.cfg.thresholds), self.cfg.scale_factor, self.device)

    def _detect_group(self, arrays: list[np.ndarray], shape: tuple[int, int]
                      ) -> list[Detections]:
        """Detect in same-shape arrays (padded to ``shape``), falling back one by one."""
        hh, ww = shape
        batch = np.zeros((len(arrays), hh, ww, 3), np.uint8)
        for i, a in enumerate(arrays):
            batch[i, :a.shape[0], :a.shape[1]] = a
        try:
            boxes, points = self._run_batch(batch)
        except RuntimeError as exc:
            if len(arrays) == 1:
                return [Detections(error=f"detector failed: {exc}")]
            log.warning("batch of %d failed (%s); retrying one by one", len(arrays), exc)
            return [self._detect_group([a], shape)[0] for a in arrays]
        out = []
        for i in range(len(arrays)):
            b = _as_array(boxes[i], (5,))
            p = _as_array(points[i], (5, 2))
            order = np.argsort(-b[:, 4], kind="stable")
            out.append(Detections(b[order, :4], b[order, 4], p[order]))
        return out

    def detect(self, images: Sequence[np.ndarray]) -> list[Detections]:
        """Detect faces in each image; one :class:`Detections` per input, in input order."""
        results: list[Detections | None] = [None] * len(images)
        prepared: list[tuple[np.ndarray, float, float]] = []
        groups: dict[tuple[int, int], list[int]] = defaultdict(list)
        bucket = self.bucket
        for i, img in enumerate(images):
            img = np.asarray(img)
            if img.ndim != 3 or img.shape[2] != 3 or img.dtype != np.uint8:
                raise ValueError(f"detect needs HxWx3 uint8 RGB arrays, got {img.shape} "
                                 f"{img.dtype}")
            small, fx, fy = self._prepare(img)
            prepared.append((small, fx, fy))
            h, w = small.shape[:2]
            if min(h, w) < self.cfg.min_face_size:  # MTCNN's image pyramid would be empty
                results[i] = Detections()
                continue
            key = (math.ceil(h / bucket) * bucket, math.ceil(w / bucket) * bucket)
            groups[key].append(i)
        bs = self.cfg.batch_size
        for shape in sorted(groups):
            idx = groups[shape]
            for start in range(0, len(idx), bs):
                chunk = idx[start:start + bs]
                dets = self._detect_group([prepared[i][0] for i in chunk], shape)
                for i, det in zip(chunk, dets, strict=True):
                    _, fx, fy = prepared[i]
                    h, w = prepared[i][0].shape[:2]
                    results[i] = _rescale(det, fx, fy, w, h)
        return [r if r is not None else Detections() for r in results]


def _rescale(det: Detections, fx: float, fy: float, w: int, h: int) -> Detections:
    """Map detections from a shrunk (or padded) image back to the full image."""
    if len(det) == 0:
        return det
    boxes = det.boxes.astype(np.float64)
    # a padded bucket can only add boxes centred in the padding: drop those
    cx, cy = (boxes[:, 0] + boxes[:, 2]) / 2, (boxes[:, 1] + boxes[:, 3]) / 2
    keep = (cx < w) & (cy < h)
    scale = np.array([fx, fy, fx, fy])
    boxes = (boxes[keep] + 0.5) * scale - 0.5
    lms = (det.landmarks[keep].astype(np.float64) + 0.5) * np.array([fx, fy]) - 0.5
    return Detections(boxes.astype(np.float32), det.scores[keep].astype(np.float32),
                      lms.astype(np.float32), det.error)
