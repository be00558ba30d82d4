"""Pre-aligned input (``faces.detector: none``): every image becomes its crops directly.

No detector runs. ``faces.aligned_as`` says what the input images already are, as a
*frame*: where the 112 x 112 ArcFace template frame lies in the image.

* ``arcface112`` (insightface crops: MS1MV3, Glint360K, WebFace, the verification
  ``.bin`` sets): the whole image is the ArcFace frame. At 112 x 112 the ArcFace crop is the
  image itself; other sizes are resized to 112 (a warning, once per shard).
* ``facenet160`` (facenet-pytorch / MTCNN crops with ``margin`` pixels): the whole image is
  the face box :data:`ARCFACE112_FACE_BOX` grown by ``faces.facenet_margin`` pixels of the
  160 px crop, as facenet-pytorch's ``extract_face`` grows the MTCNN box (no clipping).
* ``center``: the centred square of side ``faces.center_crop_fraction * min(w, h)`` is taken
  as the ArcFace frame (roughly centred faces of unknown alignment).

From the frame: the landmarks are the ArcFace template mapped into the image, the box is
:data:`ARCFACE112_FACE_BOX` mapped into the image, the ArcFace crop is the frame resampled
to 112 px (bilinear, antialiased; black outside the image, like ``cv2.warpAffine``) and the
facenet crop is facenet-pytorch's crop of that box (:func:`facecast.faces.align.crop_facenet`:
box plus margin, clipped to the image, resized to 160). These fixed transforms are the
whole story: no pixel of the input is looked at to place the face.

Crops are stored as PNG, except with ``faces.keep_jpeg``: a crop that is the whole source
JPEG (identity frame) is stored as that JPEG's bytes when they decode to exactly its pixels
(:func:`facecast.faces.crops.jpeg_as_crop`).
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from typing import Any

import numpy as np

from facecast.faces.align import ARCFACE_TEMPLATE_112, crop_facenet, warp_affine
from facecast.faces.config import FacesConfig
from facecast.faces.crops import encode_png_fast, jpeg_as_crop
from facecast.faces.decode import DecodedImage

log = logging.getLogger(__name__)

ALIGNED_STATUS = "aligned_input"
ARCFACE_SIZE = 112
FACENET_SIZE = 160

#: The face box (x1, y1, x2, y2; pixel edges) of the 112 px ArcFace frame: where MTCNN's box
#: lies after the ArcFace alignment. Median over six real photos (tests/data portraits,
#: skimage's astronaut, matplotlib's grace_hopper), made symmetric about the template's
#: centre line x = 56 and rounded to whole pixels.
ARCFACE112_FACE_BOX = np.array([18.0, 9.0, 94.0, 116.0])


@dataclass(frozen=True)
class Frame:
    """Where the ArcFace frame lies in an image: ``image_edge = origin + scale * frame_edge``

    (edge coordinates: pixel ``i`` spans ``[i, i + 1)``)."""

    ox: float
    oy: float
    sx: float
    sy: float

    def to_image_index(self, pts_frame_index: np.ndarray) -> np.ndarray:
        """Frame pixel-index points (N, 2) -> image pixel-index points."""
        p = np.asarray(pts_frame_index, np.float64) + 0.5
        return np.stack([self.ox + self.sx * p[:, 0], self.oy + self.sy * p[:, 1]], 1) - 0.5

    def box_in_image(self, box_frame_edges: np.ndarray) -> np.ndarray:
        """A frame box (edge coordinates) in image edge coordinates."""
        b = np.asarray(box_frame_edges, np.float64)
        return np.array([self.ox + self.sx * b[0], self.oy + self.sy * b[1],
                         self.ox + self.sx * b[2], self.oy + self.sy * b[3]])

    def image_to_arcface(self) -> np.ndarray:
        """2x3 matrix: image pixel index -> ArcFace-crop pixel index."""
        return np.array([[1.0 / self.sx, 0.0, (0.5 - self.ox) / self.sx - 0.5],
                         [0.0, 1.0 / self.sy, (0.5 - self.oy) / self.sy - 0.5]])

    def is_identity(self) -> bool:
        return (self.ox, self.oy, self.sx, self.sy) == (0.0, 0.0, 1.0, 1.0)


def facenet_region(margin: float, size: int = FACENET_SIZE) -> np.ndarray:
    """The region of the ArcFace frame a facenet crop covers: the face box plus the margin."""
    x1, y1, x2, y2 = ARCFACE112_FACE_BOX
    mx = margin * (x2 - x1) / (size - margin)
    my = margin * (y2 - y1) / (size - margin)
    return np.array([x1 - mx / 2, y1 - my / 2, x2 + mx / 2, y2 + my / 2])


def frame_for(aligned_as: str, width: int, height: int, cfg: FacesConfig) -> Frame:
    """The ArcFace frame of a ``width`` x ``height`` input image of kind ``aligned_as``."""
    if aligned_as == "arcface112":
        return Frame(0.0, 0.0, width / ARCFACE_SIZE, height / ARCFACE_SIZE)
    if aligned_as == "facenet160":
        r = facenet_region(cfg.facenet_margin)
        sx, sy = width / (r[2] - r[0]), height / (r[3] - r[1])
        return Frame(-r[0] * sx, -r[1] * sy, sx, sy)
    if aligned_as == "center":
        side = cfg.center_crop_fraction * min(width, height)
        s = side / ARCFACE_SIZE
        return Frame((width - side) / 2.0, (height - side) / 2.0, s, s)
    raise ValueError(f"faces.aligned_as must be arcface112, facenet160 or center, "
                     f"got {aligned_as!r}")


@functools.lru_cache(maxsize=64)
def _geometry(aligned_as: str, width: int, height: int, cfg: FacesConfig
              ) -> tuple[Frame, list[float], list[float], np.ndarray]:
    """(frame, landmarks as a float32 list, box as a float32 list, box) of one image size:
    the same for every image of that size, so computed once."""
    frame = frame_for(aligned_as, width, height, cfg)
    landmarks = frame.to_image_index(ARCFACE_TEMPLATE_112)
    box = frame.box_in_image(ARCFACE112_FACE_BOX)
    return (frame, landmarks.astype(np.float32).reshape(-1).tolist(),
            box.astype(np.float32).tolist(), box)


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _stored(crop: np.ndarray, dec: DecodedImage, cfg: FacesConfig, whole: bool) -> bytes:
    """The stored bytes of a crop: the source JPEG itself when ``faces.keep_jpeg`` is on,
    the crop is the ``whole`` image and the JPEG decodes to exactly its pixels; else PNG."""
    if cfg.keep_jpeg and whole:
        kept = jpeg_as_crop(dec.jpeg, crop)
        if kept is not None:
            return kept
    return encode_png_fast(crop, cfg.png_compress_level)


def aligned_row(image_id: str, dec: DecodedImage, cfg: FacesConfig,
                warned: dict[str, bool] | None = None) -> dict[str, Any]:
    """The faces row of a pre-aligned image (status ``aligned_input``)."""
    image = dec.array
    assert image is not None
    h, w = image.shape[:2]
    frame, landmarks, bbox, box = _geometry(cfg.aligned_as, w, h, cfg)
    expected = {"arcface112": (ARCFACE_SIZE, ARCFACE_SIZE),
                "facenet160": (FACENET_SIZE, FACENET_SIZE)}.get(cfg.aligned_as)
    message = dec.message
    if expected is not None and (w, h) != expected:
        message = _join(f"{w}x{h} input resized as a {cfg.aligned_as} crop", message)
        if warned is not None and not warned.get("size"):
            warned["size"] = True
            log.warning("faces.aligned_as=%s expects %dx%d images; %s is %dx%d and is "
                        "resized (noted in each such row's message)", cfg.aligned_as,
                        *expected, image_id, w, h)
    row: dict[str, Any] = {
        "image_id": image_id, "status": ALIGNED_STATUS, "message": message,
        "image_width": dec.width or w, "image_height": dec.height or h,
        "n_faces": None, "face_box_areas": None, "det_score": None,
        "bbox": list(bbox), "landmarks": list(landmarks),
        "crop_arcface": None, "crop_facenet": None,
    }
    if "arcface" in cfg.crops:
        if frame.is_identity():
            crop = image
        else:
            crop = warp_affine(image, frame.image_to_arcface(), (ARCFACE_SIZE, ARCFACE_SIZE))
        row["crop_arcface"] = _stored(crop, dec, cfg, frame.is_identity())
    if "facenet" in cfg.crops:
        if cfg.aligned_as == "facenet160" and (w, h) == (FACENET_SIZE, FACENET_SIZE):
            crop = image
        else:
            crop = crop_facenet(image, box, FACENET_SIZE, cfg.facenet_margin)
        row["crop_facenet"] = _stored(crop, dec, cfg, crop is image)
    return row
