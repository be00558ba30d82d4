"""Faces from landmarks the dataset gives (IJB's ``*_name_5pts_score.txt``): no detector.

The manifest carries ``given_landmarks`` (x1 y1 ... x5 y5: left eye, right eye, nose,
mouth left, mouth right, pixels of the image) and ``given_score`` (the release's faceness
score). :func:`given_row` aligns the image to the 112 px ArcFace template by the
least-squares similarity transform (:func:`facecast.faces.align.align_arcface`, as
insightface's ``norm_crop`` / the ijb scripts do), keeps the landmarks, puts the score in
``det_score`` and gives status :data:`GIVEN_STATUS`. The box is the ArcFace face box
(:data:`facecast.faces.aligned.ARCFACE112_FACE_BOX`) mapped back into the image; the
facenet crop is cut from it. Landmarks that cannot be aligned get ``align_error``.

A dataset may give points for some rows only (RFW's ``_lmk.txt`` may lack a line, or hold
a garbled one): :func:`given_points` says which cells hold five usable points. The faces
stage sends the other rows to the run's detector; only with ``faces.detector: none`` do
they reach :func:`given_row` without points and get status :data:`NO_LANDMARKS`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from facecast.faces.align import arcface_template, face_crops, similarity_transform
from facecast.faces.aligned import ARCFACE112_FACE_BOX
from facecast.faces.config import FacesConfig
from facecast.faces.crops import encode_png_fast
from facecast.faces.decode import DecodedImage

#: faces status of an image aligned with the dataset's own landmarks (no detection ran)
GIVEN_STATUS = "landmarks_given"
#: faces status of an image the dataset gives no usable points for, with no detector to run
NO_LANDMARKS = "no_landmarks"
#: ``landmark_source`` of a row aligned with the dataset's points
GIVEN_SOURCE = "given"
ARCFACE_SIZE = 112


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def given_points(value: Any) -> np.ndarray | None:
    """The ten coordinates (x1 y1 ... x5 y5, float64) of a manifest ``given_landmarks``
    cell, or None when the cell gives no usable points: null, not ten values, not numbers,
    or a non-finite one."""
    if value is None:
        return None
    try:
        pts = np.asarray(value, np.float64).reshape(-1)
    except (TypeError, ValueError):
        return None
    if pts.size != 10 or not np.isfinite(pts).all():
        return None
    return pts


def face_box(landmarks: np.ndarray) -> np.ndarray:
    """The ArcFace face box of the 112 px crop mapped into the image (x1, y1, x2, y2)."""
    m = similarity_transform(landmarks.reshape(5, 2), arcface_template(ARCFACE_SIZE))
    a, t = m[:, :2], m[:, 2]
    x1, y1, x2, y2 = ARCFACE112_FACE_BOX
    corners = np.array([[x1, y1], [x2, y1], [x1, y2], [x2, y2]], np.float64)
    img = (corners - t) @ np.linalg.inv(a).T
    return np.array([img[:, 0].min(), img[:, 1].min(), img[:, 0].max(), img[:, 1].max()])


def given_row(image_id: str, dec: DecodedImage, landmarks: Any, score: Any,
              cfg: FacesConfig, message: str = "") -> dict[str, Any]:
    """The faces row of an image whose five landmarks the dataset gives (status
    :data:`GIVEN_STATUS`); without usable points (:func:`given_points`) status
    :data:`NO_LANDMARKS`, whose message says that no detector ran."""
    image = dec.array
    assert image is not None
    h, w = image.shape[:2]
    row: dict[str, Any] = {
        "image_id": image_id, "status": GIVEN_STATUS,
        "message": _join("aligned with the dataset's landmarks (no detection)", message,
                         dec.message),
        "image_width": dec.width or w, "image_height": dec.height or h, "n_faces": None,
        "face_box_areas": None,
        "det_score": None if score is None or score != score else float(score),
        "bbox": None, "landmarks": None, "crop_arcface": None, "crop_facenet": None,
    }
    lms = given_points(landmarks)
    if lms is None:
        row.update(status=NO_LANDMARKS, message=_join(
            "the dataset gives no five usable landmarks for this image and faces.detector "
            "is none, so no detector looks for its face (set faces.detector: mtcnn or yunet "
            "to detect the images without landmarks)", message, dec.message))
        return row
    scale = np.array([dec.scale_x, dec.scale_y])  # decoded array vs full-size pixels
    pts = (lms.reshape(5, 2) + 0.5) * scale - 0.5
    level = cfg.png_compress_level
    try:
        box = face_box(pts)
        row["bbox"] = ((box.reshape(2, 2) + 0.5) / scale - 0.5).reshape(-1).astype(
            np.float32).tolist()
        row["landmarks"] = lms.astype(np.float32).tolist()
        row.update(face_crops(image, pts, box, cfg.crops, cfg.facenet_margin,
                              lambda a: encode_png_fast(a, level)))
    except ValueError as exc:
        row.update(status="align_error", message=_join(
            f"alignment with the given landmarks failed: {exc}", message, dec.message),
            crop_arcface=None, crop_facenet=None)
    return row
