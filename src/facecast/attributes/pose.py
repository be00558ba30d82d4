"""Head pose (yaw, pitch, roll in degrees) from five landmarks, vectorised.

Roll is the angle of the eye line. Yaw and pitch come from fitting a scaled orthographic
camera to a generic 3D five-point face (after removing roll): the nose tip sits in front
of the eye and mouth planes, so its sideways / vertical shift against the eyes and mouth
measures the out-of-plane rotation.

Sign conventions (image coordinates, x right, y down):
- ``roll`` > 0: the face is rotated clockwise in the image (the image-right eye is lower).
- ``yaw`` > 0: the face turns towards the image's right (the nose moves right).
- ``pitch`` > 0: the face tilts up (the nose moves up towards the eyes).
"""

from __future__ import annotations

import numpy as np

# Generic 3D face, millimetres; x right, y down, z towards the camera; origin nose tip.
# Frontal projection matches the ArcFace template's proportions (half inter-ocular 32 mm).
FACE_3D = np.array([
    [-32.0, -36.6, -25.0],   # left eye centre (image left)
    [32.0, -36.6, -25.0],    # right eye centre
    [0.0, 0.0, 0.0],         # nose tip
    [-26.5, 37.0, -22.0],    # left mouth corner
    [26.5, 37.0, -22.0],     # right mouth corner
])


def roll_degrees(landmarks: np.ndarray) -> np.ndarray:
    """Eye-line angle (N,) in degrees from (N, 5, 2) landmarks; > 0 = clockwise."""
    d = landmarks[:, 1] - landmarks[:, 0]
    return np.degrees(np.arctan2(d[:, 1], d[:, 0]))


def head_pose(landmarks: np.ndarray) -> dict[str, np.ndarray]:
    """Yaw, pitch and roll (degrees, (N,) each) from (N, 5, 2) landmarks; NaN if missing."""
    lm = np.asarray(landmarks, dtype=np.float64)
    roll = roll_degrees(lm)
    th = np.radians(roll)
    c, s = np.cos(th), np.sin(th)
    centred = lm - lm.mean(1, keepdims=True)
    # rotate by -roll so the eye line is horizontal
    x = c[:, None] * centred[..., 0] + s[:, None] * centred[..., 1]
    y = -s[:, None] * centred[..., 0] + c[:, None] * centred[..., 1]
    model = FACE_3D - FACE_3D.mean(0)
    pinv = np.linalg.pinv(model)  # (3, 5): solves p2d = M @ model.T in least squares
    r1 = x @ pinv.T  # (N, 3): image x as a combination of model axes
    r2 = y @ pinv.T
    scale = 0.5 * (np.linalg.norm(r1, axis=1) + np.linalg.norm(r2, axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        yaw = np.degrees(np.arcsin(np.clip(r1[:, 2] / scale, -1, 1)))
        pitch = -np.degrees(np.arcsin(np.clip(r2[:, 2] / scale, -1, 1)))
    return {"yaw": yaw, "pitch": pitch, "roll": roll}


def project_face(yaw: float = 0.0, pitch: float = 0.0, roll: float = 0.0,
                 scale: float = 1.0, centre: tuple[float, float] = (0.0, 0.0)) -> np.ndarray:
    """Five 2D landmarks (5, 2) of the generic face rotated by the given angles (degrees).

    Orthographic projection with the conventions of :func:`head_pose` (its inverse);
    used by tests and benchmarks to make landmarks with a known pose.
    """
    y, p, r = np.radians([yaw, pitch, roll])
    ry = np.array([[np.cos(y), 0, np.sin(y)], [0, 1, 0], [-np.sin(y), 0, np.cos(y)]])
    rx = np.array([[1, 0, 0], [0, np.cos(p), -np.sin(p)], [0, np.sin(p), np.cos(p)]])
    pts = FACE_3D @ (rx @ ry).T
    rz = np.array([[np.cos(r), -np.sin(r)], [np.sin(r), np.cos(r)]])
    return (pts[:, :2] @ rz.T) * scale + np.asarray(centre)
