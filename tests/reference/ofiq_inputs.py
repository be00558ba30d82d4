"""The hostile inputs the OFIQ records are made on (our code).

:mod:`ofiq_recorder` hands them to OFIQ's own measure classes and
``tests/test_attributes_ofiq.py`` runs facecast on the same inputs, rebuilt here
from the seeds the records name. Everything is a function of its arguments only.

Landmarks are built in dlib's 68-point layout (what the ``ofiq`` scorer fits) and handed to
OFIQ in ADNet's 98-point layout by :func:`to_adnet`: each OFIQ face part gets the dlib
point facecast uses for it (the table in :mod:`facecast.attributes.ofiq_landmarks`); ADNet's
third lid pair of each eye repeats dlib's second, and the slots no part names hold the
remaining dlib points, then copies of the nose tip, so the convex hull of the 98 points is
the hull of the 68.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: ADNet index -> dlib index for every point an OFIQ face part names
ADNET_FROM_DLIB = {
    60: 36, 64: 39, 68: 42, 72: 45,            # eye corners
    16: 8, 54: 30, 76: 48, 82: 54,             # chin, nose tip, mouth corners
    61: 37, 67: 41, 62: 38, 66: 40, 63: 38, 65: 40,   # image-left eye lids
    69: 43, 75: 47, 70: 44, 74: 46, 71: 44, 73: 46,   # image-right eye lids
    89: 61, 95: 67, 90: 62, 94: 66, 91: 63, 93: 65,   # inner lips
}
NOSE_TIP = 30

#: HeadPose angles (degrees): OFIQ's clamp bites beyond +-90, roll from arctan2 reaches 180
POSE_ANGLES = [-180.0, -179.0, -135.0, -120.0, -100.0, -90.5, -90.0, -89.5, -60.0, -45.0,
               -30.0, -1.0, 0.0, 0.5, 10.0, 29.9, 45.0, 60.0, 75.0, 89.0, 89.99, 90.0, 90.01,
               95.0, 100.0, 120.0, 150.0, 179.5, 180.0, 270.0, 360.0]

#: SingleFacePresent: face box (width, height) sets; ties, one face, many faces, thin boxes
FACE_BOX_SETS = [
    [(120, 150)],
    [(120, 150), (60, 75)],
    [(60, 75), (120, 150)],
    [(100, 100), (100, 100)],
    [(30, 40), (100, 120), (80, 80), (10, 10)],
    [(7, 3), (3, 7)],
    [(200, 1), (1, 150)],
    [(333, 333), (111, 111), (222, 222)],
    [(97, 89), (13, 11)],
    [(1, 1), (2, 2), (3, 3)],
]


def face_68(center: tuple[float, float], scale: float, angle: float,
            rng: np.random.Generator, jitter: float = 0.02) -> np.ndarray:
    """A plausible dlib-68 face (68, 2) of width ~``scale`` px around ``center``, turned
    by ``angle`` degrees, each point moved by up to ``jitter * scale`` (float pixels)."""
    t = np.linspace(np.pi, 0.0, 17)
    jaw = np.stack([0.5 * np.cos(t), -0.05 + 0.62 * np.sin(t)], 1)
    arc = np.sin(np.linspace(0, np.pi, 5))
    brow = np.stack([np.linspace(-0.42, -0.08, 5), -0.3 - 0.05 * arc], 1)
    nose = np.array([[0, -0.2], [0, -0.12], [0, -0.04], [0, 0.04],
                     [-0.08, 0.09], [-0.04, 0.11], [0, 0.12], [0.04, 0.11], [0.08, 0.09]])
    # corner, two upper-lid points, corner, two lower-lid points (dlib's order)
    eye = np.array([[-0.09, 0], [-0.03, -0.035], [0.03, -0.035], [0.09, 0],
                    [0.03, 0.035], [-0.03, 0.035]])
    u = np.pi - np.arange(12) * np.pi / 6   # left corner, upper lip, right corner, lower
    outer = np.stack([0.2 * np.cos(u), 0.3 - 0.08 * np.sin(u)], 1)
    v = np.pi - np.arange(8) * np.pi / 4
    inner = np.stack([0.13 * np.cos(v), 0.3 - 0.03 * np.sin(v)], 1)
    pts = np.concatenate([jaw, brow, brow[::-1] * [-1, 1], nose, eye + [-0.2, -0.16],
                          eye + [0.2, -0.16], outer, inner]) * scale
    pts += rng.uniform(-jitter, jitter, pts.shape) * scale
    a = np.radians(angle)
    rot = np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
    return pts @ rot.T + np.asarray(center, dtype=np.float64)


def whole(points: np.ndarray) -> np.ndarray:
    """Points rounded half away from zero to whole pixels (as OFIQ's int16 landmarks)."""
    p = np.asarray(points, dtype=np.float64)
    return np.sign(p) * np.floor(np.abs(p) + 0.5)


def to_adnet(points68: np.ndarray) -> np.ndarray:
    """(98, 2) ADNet-layout copy of (68, 2) dlib points (see the module doc)."""
    p = np.asarray(points68)
    out = np.repeat(p[NOSE_TIP][None], 98, axis=0)
    rest = [i for i in range(68) if i not in set(ADNET_FROM_DLIB.values())]
    free = [j for j in range(98) if j not in ADNET_FROM_DLIB]
    for j, i in zip(free, rest, strict=False):
        out[j] = p[i]
    for j, i in ADNET_FROM_DLIB.items():
        out[j] = p[i]
    return out


def geometry_cases(seed: int = 29794, n_random: int = 24) -> list[dict[str, Any]]:
    """Landmark cases for the geometric components: random faces in ordinary images, and
    hostile ones (tiny images, faces beyond the border, negative coordinates, yaw at 90
    degrees). Each: ``width``, ``height``, ``yaw``, whole-pixel dlib ``landmarks``."""
    rng = np.random.default_rng(seed)
    cases = []
    for _ in range(n_random):
        w, h = (int(v) for v in rng.integers(60, 900, 2))
        scale = float(rng.uniform(0.2, 0.9) * min(w, h))
        center = (float(rng.uniform(0.3, 0.7) * w), float(rng.uniform(0.3, 0.7) * h))
        pts = face_68(center, scale, float(rng.uniform(-40, 40)), rng)
        cases.append({"width": w, "height": h, "yaw": float(rng.uniform(-80, 80)),
                      "landmarks": whole(pts)})
    hostile = [  # (width, height, centre, scale, angle, yaw)
        (24, 30, (12.0, 15.0), 20.0, 0.0, 0.0),       # small image
        (9, 11, (4.5, 5.5), 8.0, 5.0, 10.0),          # smaller still
        (40, 40, (-3.0, 10.0), 30.0, 0.0, 0.0),       # face past the left border
        (64, 48, (60.0, 47.0), 50.0, 15.0, -30.0),    # past the right and lower borders
        (300, 300, (150.0, 20.0), 200.0, 0.0, 90.0),  # above the top; yaw 90
        (300, 300, (150.0, 150.0), 120.0, 180.0, 0.0),  # upside down
        (500, 400, (250.0, 200.0), 150.0, 0.0, -89.9999999),
        (120, 160, (60.5, 80.5), 61.0, 0.0, 0.0),
    ]
    for w, h, center, scale, angle, yaw in hostile:
        cases.append({"width": w, "height": h, "yaw": yaw,
                      "landmarks": whole(face_68(center, scale, angle, rng, 0.03))})
    return cases


#: NaturalColour cases: name -> (seed, kind); kinds in :func:`colour_image`
COLOUR_CASES = {"grey": (1, "grey"), "grey_dark": (2, "grey_dark"),
                "grey_one_coloured_pixel": (3, "grey_dot"), "skin": (4, "skin"),
                "skin_red": (5, "skin_red"), "skin_yellow": (7, "yellow"),
                "skin_blue": (6, "blue"), "skin_cold": (8, "cold")}
#: aligned-face side of the colour cases (facecast's FRAME)
COLOUR_FRAME = 308


def colour_image(seed: int, kind: str, frame: int = COLOUR_FRAME) -> tuple[np.ndarray,
                                                                           np.ndarray]:
    """An aligned face (frame x frame x 3 RGB uint8) and its whole-pixel dlib landmarks:
    a face at OFIQ's reference position (scaled to ``frame``) over noise; ``grey*`` kinds
    have three equal channels (``grey_dot``: but one pixel in a corner)."""
    rng = np.random.default_rng(seed)
    s = frame / 616.0
    pts = whole(face_68((308.0 * s, 330.0 * s), 230.0 * s, 0.0, rng, 0.01))
    base = {"grey": 128, "grey_dark": 40, "grey_dot": 150, "skin": (205, 150, 120),
            "skin_red": (220, 110, 100), "yellow": (230, 180, 60), "blue": (90, 110, 200),
            "cold": (120, 130, 125)}[kind]
    noise = rng.integers(-12, 13, (frame, frame, 1 if kind.startswith("grey") else 3))
    img = np.clip(np.asarray(base)[None, None] + noise, 0, 255).astype(np.uint8)
    img = np.broadcast_to(img, (frame, frame, 3)).copy()
    if kind == "grey_dot":
        img[2, 3] = (151, 150, 150)
    return img, pts
