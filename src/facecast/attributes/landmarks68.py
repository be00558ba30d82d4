"""The shared dlib 68-point fit of a faces shard (issue 40.7): one fit serves the ``ofiq``
scorer and the labels stage's ``features``.

dlib's predictor (:func:`facecast.attributes.ofiq_landmarks.fit_68`) runs inside the
detection box on the stored facenet crop (:func:`fit_rows`). From that one fit the ``ofiq``
scorer derives its components, and :func:`landmark_table` the *landmark shard*
(``results/{ds}/attributes/landmarks/{shard}.parquet``, written by rule ``attributes_ofiq``;
by rule ``features_shard`` where the ``ofiq`` scorer does not run): the points in image
pixels, shape measurements and a PnP head pose per row, every faces row with a status
(``ok`` | ``no_face`` (faces status not usable) | ``no_crop`` | ``landmark_error``).

Point indices (0-based, iBUG 300-W layout): jaw 0-16 (chin 8), brows 17-21 / 22-26
(subject's right / left, image left / right), nose bridge 27-30 (tip 30), nose base
31-35, eyes 36-41 / 42-47, outer lips 48-59, inner lips 60-67.

:func:`measurements` works on (N, 68, 2) arrays at once: each shape is translated to its
eye midpoint, rotated so the eye line is horizontal and scaled so the distance between
the eye centres is 1, so every measure is invariant to in-plane rotation, scale and
translation. :func:`head_pose` fits a generic 3D face (PnP) for yaw / pitch / roll.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from facecast.attributes import ofiq_landmarks as lm
from facecast.attributes.inputs import CROP_SIZES, FaceBatch
from facecast.faces.align import facenet_box

__all__ = ["MEASURES", "USABLE_FACES", "LandmarkFit", "crop_frame", "facenet_margin",
           "fit_rows", "head_pose", "landmark_table", "measurements", "normalise_shapes",
           "run_landmark_shard", "without_crops", "write_landmark_shard"]

log = logging.getLogger("facecast.attributes")

#: faces statuses whose rows are fitted (others: ``no_face``)
USABLE_FACES = ("ok", "fallback", "aligned_input", "landmarks_given")
#: the facenet crop the predictor runs on
FIT_CROP = "facenet"

#: measurement name -> what it is (all lengths in inter-eye distances, areas in IED^2)
MEASURES = {
    "eye_distance": "inner eye corners apart (39-42)",
    "eye_area": "mean eye-contour polygon area",
    "eye_angle": "canthal tilt, degrees (outer corner above inner = positive)",
    "brow_arch": "sagitta of a parabola fitted to each brow, mean of both",
    "brow_length": "polyline length of each brow, mean of both",
    "nose_width": "alar width (31-35)",
    "nose_height": "nasion to nose base (27-33)",
    "mouth_width": "mouth corners apart (48-54)",
    "lip_thickness": "upper (51-62) + lower (66-57) lip height",
    "lip_ratio": "upper / lower lip height",
    "chin_flatness": "chin base width (6-10) / (2 x chin depth below the 6-10 chord)",
    "face_aspect": "brow-line-to-chin height / jaw width (0-16)",
}


def normalise_shapes(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Map (N, 68, 2) shapes to eye-centred, eye-line-horizontal, unit-IED frames.

    Returns (normalised shapes, inter-eye distance in input pixels).
    """
    p = np.asarray(points, dtype=np.float64)
    right = p[:, 36:42].mean(axis=1)
    left = p[:, 42:48].mean(axis=1)
    d = left - right
    ied = np.hypot(d[:, 0], d[:, 1])
    ang = np.arctan2(d[:, 1], d[:, 0])
    c, s = np.cos(-ang), np.sin(-ang)
    rot = np.stack([np.stack([c, -s], -1), np.stack([s, c], -1)], axis=1)  # (N, 2, 2)
    centred = p - ((right + left) / 2)[:, None, :]
    out = np.einsum("nij,nkj->nki", rot, centred) / np.where(ied > 0, ied, np.nan)[:, None, None]
    return out, ied


def _dist(p: np.ndarray, a: int, b: int) -> np.ndarray:
    return np.hypot(*(p[:, a] - p[:, b]).T)


def _polygon_area(pts: np.ndarray) -> np.ndarray:
    x, y = pts[..., 0], pts[..., 1]
    return 0.5 * np.abs(np.sum(x * np.roll(y, -1, axis=1) - np.roll(x, -1, axis=1) * y, axis=1))


def _sagitta(pts: np.ndarray) -> np.ndarray:
    """Height of a least-squares parabola's apex above its end chord (image y points down)."""
    x, y = pts[..., 0], pts[..., 1]
    xm = x - x.mean(axis=1, keepdims=True)
    v = np.stack([xm**2, xm, np.ones_like(xm)], axis=-1)  # (N, k, 3)
    vtv = np.einsum("nki,nkj->nij", v, v)
    vty = np.einsum("nki,nk->ni", v, y)
    ok = np.isfinite(vtv).all(axis=(1, 2)) & (np.abs(np.linalg.det(np.nan_to_num(vtv))) > 1e-12)
    coef = np.full((x.shape[0], 3), np.nan)
    if ok.any():
        coef[ok] = np.linalg.solve(vtv[ok], vty[ok][..., None])[..., 0]
    half = (x.max(axis=1) - x.min(axis=1)) / 2
    return coef[:, 0] * half**2  # y points down: an upward arch has its minimum y mid-brow


def measurements(points: np.ndarray) -> dict[str, np.ndarray]:
    """Every :data:`MEASURES` entry for (N, 68, 2) landmark arrays (NaN where degenerate)."""
    p, _ = normalise_shapes(points)
    if p.shape[0] == 0:
        return {k: np.zeros(0) for k in MEASURES}
    eye_r, eye_l = p[:, 36:42], p[:, 42:48]
    # canthal tilt: image y points down; outer corners 36 (image left) and 45 (image right)
    tilt_r = np.degrees(np.arctan2(p[:, 39, 1] - p[:, 36, 1], p[:, 39, 0] - p[:, 36, 0]))
    tilt_l = np.degrees(np.arctan2(p[:, 42, 1] - p[:, 45, 1], p[:, 45, 0] - p[:, 42, 0]))
    brow_len = (np.linalg.norm(np.diff(p[:, 17:22], axis=1), axis=-1).sum(axis=1)
                + np.linalg.norm(np.diff(p[:, 22:27], axis=1), axis=-1).sum(axis=1)) / 2
    upper = _dist(p, 51, 62)
    lower = _dist(p, 66, 57)
    chord_y = (p[:, 6, 1] + p[:, 10, 1]) / 2
    depth = p[:, 8, 1] - chord_y
    brow_y = p[:, 17:27, 1].mean(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = {
            "eye_distance": _dist(p, 39, 42),
            "eye_area": (_polygon_area(eye_r) + _polygon_area(eye_l)) / 2,
            "eye_angle": (tilt_r + tilt_l) / 2,
            "brow_arch": (_sagitta(p[:, 17:22]) + _sagitta(p[:, 22:27])) / 2,
            "brow_length": brow_len,
            "nose_width": _dist(p, 31, 35),
            "nose_height": _dist(p, 27, 33),
            "mouth_width": _dist(p, 48, 54),
            "lip_thickness": upper + lower,
            "lip_ratio": np.where(lower > 1e-6, upper / lower, np.nan),
            "chin_flatness": np.where(depth > 1e-6, _dist(p, 6, 10) / (2 * depth), np.nan),
            "face_aspect": (p[:, 8, 1] - brow_y) / _dist(p, 0, 16),
        }
    return out


#: generic 3D face (mm-ish, x right, y up, z towards the camera) for points 30, 8, 36, 45, 48, 54
_MODEL_3D = np.array([[0.0, 0.0, 0.0], [0.0, -330.0, -65.0], [-225.0, 170.0, -135.0],
                      [225.0, 170.0, -135.0], [-150.0, -150.0, -125.0],
                      [150.0, -150.0, -125.0]])
_PNP_POINTS = [30, 8, 36, 45, 48, 54]


def _project(params: np.ndarray, model: np.ndarray, focal: float, c: float) -> np.ndarray:
    """(N, 6) rotation vectors + translations -> (N, 6, 2) projected model points."""
    from scipy.spatial.transform import Rotation

    p = params.reshape(-1, 6)
    rot = Rotation.from_rotvec(p[:, :3]).as_matrix()  # (N, 3, 3)
    cam = np.einsum("nij,kj->nki", rot, model) + p[:, None, 3:]
    return np.stack([focal * cam[..., 0] / cam[..., 2] + c,
                     focal * cam[..., 1] / cam[..., 2] + c], axis=-1)


def head_pose(points: np.ndarray, size: float, iterations: int = 30) -> np.ndarray:
    """(N, 3) yaw, pitch, roll in degrees from a PnP fit of a generic 3D face.

    ``size``: image width in pixels (pinhole camera, focal length = size, principal point
    at the centre). The 6-point PnP is a Levenberg-Marquardt reprojection fit run on all
    faces at once (numpy: finite-difference Jacobians and 6 x 6 solves batched over faces),
    started frontal at the distance matching the eye-corner span, so it cannot settle on
    the mirrored face-behind-the-camera solution. Angles: yaw about the vertical axis,
    pitch about the horizontal one, roll in the image plane (0 for a level, frontal face).
    """
    from scipy.spatial.transform import Rotation

    pts = np.asarray(points, dtype=np.float64)
    out = np.full((pts.shape[0], 3), np.nan)
    ok = np.isfinite(pts[:, _PNP_POINTS]).all(axis=(1, 2))
    if not ok.any():
        return out
    img = pts[ok][:, _PNP_POINTS]  # (M, 6, 2)
    model = _MODEL_3D * [1.0, -1.0, -1.0]  # to image axes: y down, z away from the camera
    focal, c = float(size), float(size) / 2.0
    span = np.maximum(np.hypot(*(img[:, 3] - img[:, 2]).T), 1e-3)
    tz = focal * 450.0 / span
    x = np.c_[np.zeros((len(img), 3)), (img[:, 0, 0] - c) * tz / focal,
              (img[:, 0, 1] - c) * tz / focal, tz]
    step = np.array([1e-4, 1e-4, 1e-4, 1e-2, 1e-2, 1e-2])

    def resid(q: np.ndarray) -> np.ndarray:
        return (_project(q, model, focal, c) - img).reshape(len(img), -1)  # (M, 12)

    lam = np.full(len(img), 1e-3)
    r = resid(x)
    cost = (r**2).sum(axis=1)
    for _ in range(int(iterations)):
        jac = np.stack([(resid(x + np.eye(6)[k] * step[k] * np.maximum(1.0, np.abs(x[:, [k]])))
                         - r) / (step[k] * np.maximum(1.0, np.abs(x[:, k])))[:, None]
                        for k in range(6)], axis=2)  # (M, 12, 6)
        jtj = np.einsum("mik,mil->mkl", jac, jac)
        jtr = np.einsum("mik,mi->mk", jac, r)
        damp = jtj + lam[:, None, None] * np.eye(6) * np.maximum(
            np.einsum("mkk->mk", jtj), 1e-9)[:, :, None]
        delta = np.linalg.solve(damp, -jtr[..., None])[..., 0]
        x_new = x + delta
        r_new = resid(x_new)
        cost_new = (r_new**2).sum(axis=1)
        better = np.isfinite(cost_new) & (cost_new < cost)
        x[better], r[better], cost[better] = x_new[better], r_new[better], cost_new[better]
        lam = np.where(better, lam / 3.0, lam * 4.0)
    rot = Rotation.from_rotvec(x[:, :3]).as_matrix()
    out[ok] = np.degrees(np.c_[np.arcsin(-np.clip(rot[:, 2, 0], -1, 1)),
                               np.arctan2(rot[:, 2, 1], rot[:, 2, 2]),
                               np.arctan2(rot[:, 1, 0], rot[:, 0, 0])])
    return out


# ------------------------------------------------------------------ the one fit per shard

def crop_frame(bbox: np.ndarray, width: float, height: float, size: int,
               margin: float) -> tuple[np.ndarray, np.ndarray]:
    """The detection box in facenet-crop pixels and the 2x3 crop -> image matrix."""
    x1, y1, x2, y2 = facenet_box(bbox, (int(width), int(height)), size, margin)
    sx, sy = size / (x2 - x1), size / (y2 - y1)
    box = np.array([(bbox[0] - x1) * sx, (bbox[1] - y1) * sy,
                    (bbox[2] - x1) * sx, (bbox[3] - y1) * sy])
    return box, np.array([[1.0 / sx, 0.0, x1], [0.0, 1.0 / sy, y1]])


def facenet_margin(faces_path: str | os.PathLike) -> float:
    """The facenet crop's margin of a faces shard, from its provenance (facenet-pytorch's
    14 where it is not recorded)."""
    from facecast.faces.align import FACENET_MARGIN
    from facecast.io.parquet_io import read_provenance

    margin = (read_provenance(faces_path).get("faces_config") or {}).get("facenet_margin")
    if margin is None:
        log.info("landmarks: %s records no faces.facenet_margin; assuming %s", faces_path,
                 FACENET_MARGIN)
        margin = FACENET_MARGIN
    return float(margin)


class LandmarkFit:
    """dlib's 68 points of one :class:`FaceBatch` chunk, fitted once (:func:`fit_rows`).

    ``crop`` (N, 68, 2): the points in facenet-crop pixels as dlib returns them (NaN where
    there is no fit); ``to_img`` (N, 2, 3): crop -> image matrices; ``box`` (N, 4): the
    facenet box (x1, y1, x2, y2, whole image pixels) the crop was cut from; ``error``:
    why a row with a crop has no fit ('' when it has one).
    """

    def __init__(self, n: int) -> None:
        self.crop = np.full((n, 68, 2), np.nan)
        self.to_img = np.full((n, 2, 3), np.nan)
        self.box = np.full((n, 4), np.nan)
        self.error = np.full(n, "", dtype=object)

    def image_points(self) -> np.ndarray:
        """(N, 68, 2) points in image pixels: x1 + p / sx, y1 + p / sy (unrounded)."""
        size = float(CROP_SIZES[FIT_CROP])
        x1, y1, x2, y2 = (self.box[:, k, None] for k in range(4))
        return np.stack([x1 + self.crop[..., 0] / (size / (x2 - x1)),
                         y1 + self.crop[..., 1] / (size / (y2 - y1))], axis=-1)


def fit_rows(predictor, batch: FaceBatch, margin: float) -> LandmarkFit:
    """dlib's 68 points inside the detection box (mapped into the facenet crop) of every
    row of ``batch`` that has a crop; a row whose fit fails keeps NaN and a message."""
    n, size = len(batch), CROP_SIZES[FIT_CROP]
    fit = LandmarkFit(n)
    for i in np.flatnonzero(batch.has_crop):
        b = batch.bbox[i]
        if not (np.isfinite(b).all() and np.isfinite([batch.image_width[i],
                                                      batch.image_height[i]]).all()):
            fit.error[i] = "no detection box or image size to place dlib's landmarks"
            continue
        try:
            box, fit.to_img[i] = crop_frame(b, batch.image_width[i], batch.image_height[i],
                                            size, margin)
            fit.box[i] = facenet_box(b, (int(batch.image_width[i]),
                                         int(batch.image_height[i])), size, margin)
            fit.crop[i] = lm.fit_68(predictor, batch.crops[i], box)
        except Exception as exc:  # a bad row keeps a status, the job goes on
            fit.error[i] = f"dlib 68-point fit failed: {type(exc).__name__}: {exc}"
    return fit


def _row_status(batch: FaceBatch, fit: LandmarkFit) -> tuple[np.ndarray, np.ndarray]:
    """Status and message of each landmark-shard row (see the module doc)."""
    n = len(batch)
    status = np.full(n, "ok", dtype=object)
    message = np.full(n, "", dtype=object)
    faces_status = np.asarray(batch.status).astype(str)
    has_box = np.isfinite(batch.bbox).all(axis=1)
    for i in range(n):
        if faces_status[i] not in USABLE_FACES:
            status[i], message[i] = "no_face", f"faces status {faces_status[i]}"
        elif batch.crop_error[i]:
            status[i], message[i] = "landmark_error", batch.crop_error[i]
        elif not batch.has_crop[i] or not has_box[i]:
            status[i], message[i] = "no_crop", "no facenet crop stored (faces.crops)"
        elif fit.error[i] or not np.isfinite(fit.crop[i]).all():
            status[i], message[i] = "landmark_error", fit.error[i] or "no landmarks"
    return status, message


def landmark_table(batches: list[FaceBatch], fits: list[LandmarkFit]) -> pd.DataFrame:
    """The landmark shard of a faces shard's chunks and their fits: one row per faces row
    (``image_id``, ``status``, ``message``, ``landmarks`` (136 image-pixel floats, null
    without a fit), ``m_*`` (:data:`MEASURES`, from the crop points), ``pose_yaw`` /
    ``pose_pitch`` / ``pose_roll`` (degrees, :func:`head_pose`))."""
    parts = [_row_status(b, f) for b, f in zip(batches, fits, strict=True)]
    ids = np.concatenate([np.asarray(b.image_id).astype(str) for b in batches]) \
        if batches else np.zeros(0, dtype=str)
    crop = np.concatenate([f.crop for f in fits]) if fits else np.zeros((0, 68, 2))
    img = np.concatenate([f.image_points() for f in fits]) if fits else crop
    ok = np.concatenate([s == "ok" for s, _ in parts]) if parts else np.zeros(0, bool)
    crop[~ok], img[~ok] = np.nan, np.nan
    n = len(ids)
    out = pd.DataFrame({"image_id": pd.Series(ids, dtype=object).astype(str),
                        "status": np.concatenate([s for s, _ in parts]) if parts else [],
                        "message": np.concatenate([m for _, m in parts]) if parts else []})
    out["landmarks"] = [p.reshape(-1).astype(np.float32).tolist() if np.isfinite(p).all()
                        else None for p in img]
    for k, v in measurements(crop).items():
        out[f"m_{k}"] = v
    pose = head_pose(crop, float(CROP_SIZES[FIT_CROP])) if n else np.zeros((0, 3))
    out["pose_yaw"], out["pose_pitch"], out["pose_roll"] = pose.T if n else ([], [], [])
    return out


def write_landmark_shard(table: pd.DataFrame, out_path: str | os.PathLike,
                         provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Write a landmark shard (:func:`landmark_table`); returns ``table``."""
    from facecast.io.parquet_io import write_parquet

    write_parquet(table, out_path, provenance=dict(provenance or {}) | {
        "landmark_fit": "dlib shape_predictor_68_face_landmarks on the facenet crop"})
    log.info("landmark shard: %d rows, %d with landmarks", len(table),
             int((table["status"] == "ok").sum()))
    return table


def run_landmark_shard(faces_path: str | os.PathLike, out_path: str | os.PathLike, *,
                       chunk_rows: int = 1024,
                       provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """The landmark shard of one faces shard on its own (rule ``features_shard``, where the
    ``ofiq`` scorer does not fit the points): the same fit and table as the scorer's."""
    from facecast.attributes.inputs import iter_faces

    margin = facenet_margin(faces_path)
    predictor = lm.load_predictor()
    batches, fits = [], []
    for batch in iter_faces(faces_path, FIT_CROP, chunk_rows=chunk_rows):
        batches.append(without_crops(batch))
        fits.append(fit_rows(predictor, batch, margin))
    return write_landmark_shard(landmark_table(batches, fits), out_path, provenance)


def without_crops(batch: FaceBatch) -> FaceBatch:
    """``batch`` with its decoded crops dropped (the table needs none of the pixels)."""
    from dataclasses import replace

    return replace(batch, crops=np.zeros((len(batch), 1, 1, 3), np.uint8))
