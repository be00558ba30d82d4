"""Procedural synthetic face dataset: the embedded, offline demo of facecast.

:func:`generate_dataset` renders colour face images of ``n_identities`` made-up people,
``images_per_identity`` each, writes them as JPEG to ``out_dir/images/<identity>/<k>.jpg``
and, last, the ground truth table ``out_dir/truth.parquet`` (the rule's output marker).

Everything is drawn with vectorised numpy on a pixel grid (soft signed-distance masks,
a depth map shaded by a Lambertian + specular light), so a few hundred identities take
seconds. Output is a pure function of the seed: each identity and each image has its own
random stream (``SeedSequence([seed, stream, identity, image])``), so images and table are
byte-identical whatever ``n_jobs`` is.

Identity traits (same in every image of a person; ground truth as ``label_*``):
``skin_tone`` (0 light .. 1 dark, uniform), ``male`` (0/1), ``age`` (18..80 years, uniform),
``eye_spacing``, ``nose_width``, ``mouth_width``, ``face_aspect`` (face units: the face
half-width is 1), ``hair_grey`` (0..1, rises with age), ``wrinkles`` (0..1, rises with age),
``beard`` (0/1, men only), ``hair_long`` (0/1), ``bald`` (0/1), ``dark_skin``
(``skin_tone >= 0.5``), plus unlabelled identity cues (hair colour and style, brow shape,
iris colour, jaw taper, eye and lip shape, moles, freckles, and a fixed skin texture that
moves with the face).

Image covariates (per image): ``yaw`` (U(-25, 25) degrees) and ``roll`` (N(0, 7) degrees),
``scale`` (face size relative to a half-width of 0.22 x image size, U(0.8, 1.15)), ``blur``
(Gaussian sigma in pixels of a 224 px image; scaled with the image size), ``noise``
(Gaussian sigma, fraction of full range), ``illumination`` (exposure gain),
``light_direction`` (degrees, negative = light from the image's left), ``jpeg_quality``
(40..95), ``glasses`` (0/1), ``hat`` (0/1), ``smile`` (0..1).

Planted effects that later stages must recover:

1. Glasses rise with age: ``P(glasses) = 1 / (1 + exp(-(age - 50) / 8))`` per image
   (3 % at 22 years, 50 % at 50, 98 % at 80); Pearson corr(age, glasses) is about 0.7.
2. A blur range that lowers recognisability: 70 % of images get mild blur
   (sigma U(0, 0.8) px at 224 px), 30 % strong blur (sigma U(1.5, 3.5) px at 224 px).
3. One protected group gets worse, less consistent captures: dark-skinned women
   (``male == 0`` and ``skin_tone >= 0.5``, ``label_low_contrast_group == 1``, about a
   quarter of identities). Per image, drawn from the image's own stream, *before*
   exposure, blur, the same sensor noise as everyone and JPEG:
   (a) face geometry varies from photo to photo (expression, distance, lens): eye
   spacing and height, mouth width, height and lips, face aspect, nose length and brow
   height each move by N(0, (``GROUP_JITTER`` = 1.6 x the sd of that trait's identity
   law)^2), clipped to the law's range; the ``label_*`` columns keep the identity's values;
   (b) low contrast: in the face the fine detail (image minus its blur at sigma = 1.5 % of
   the size) keeps ``LOW_CONTRAST_FACTOR`` = 0.7 of its contrast
   (``COARSE_CONTRAST_FACTOR`` = 1.0 for the coarse structure), then the whole frame
   (face, hair, outline, background) keeps ``GROUP_CONTRAST`` = 0.8 around its mean colour;
   (c) uneven light: a smooth log-gain field (4 x 4 Gaussian grid, bicubic, sd
   ``SHADING_STRENGTH``) and a white-balance cast (log-gain sd ``COLOUR_CAST`` = 0.06 per
   channel); (d) a low-resolution camera: the frame is resampled to ``GROUP_RESOLUTION``
   = 0.4 of its size and back. Measured with ``SHADING_STRENGTH`` = 0.15 on 80 identities
   x 6 images at 224 px (seed 20231, ``benchmarks/synthetic_detection.py --lbp --dlib``;
   positive-pair AUC = the group's genuine pairs against all impostor pairs): MTCNN found
   0.745 of the group's faces (0.947 of the others); dlib AUC 0.70 for the group vs
   0.77 / 0.89 / 0.89 (dark men / light women / light men). With the current 0.25, on the
   test suite's demo (64 identities x 6 images at 160 px, fair_pool protocol): MTCNN finds
   0.55 of the group's faces (0.94 of the others); dlib AUC 0.63 for the group vs
   0.81 / 0.87 / 0.81, and the FairFace bias metric names the group the most discriminated
   for positive pairs (mean d+ 0.26 vs 0.19 for dark men). The LBP baseline is not
   sensitive to it (AUC 0.69 vs 0.66-0.67: contrast-invariant codes).
4. Low light means more sensor noise: ``illumination`` is U(0.55, 1.25) and
   ``noise = U(0, 0.012) + 0.045 * (1.25 - illumination) / 0.7``, so corr(illumination,
   noise) is about -0.97.
5. Hats are worn more by men: ``P(hat) = 0.25`` for men, ``0.08`` for women.

6. Annotation noise (issue 14, optional ``label_noise``): observed columns
   ``label_noisy_<attr>`` next to the clean ``label_*`` ones, with per-attribute flips,
   one attribute flipped in one group only, an exact planted contradiction rate and one
   identity flipped in every image (see :mod:`facecast.datasets.label_noise`). Only these added
   columns carry noise; images and the clean labels do not change.

Splits: one identity in four (``n_identities // 4``, chosen by a seeded permutation) gets
``split = "train"`` and ``exclude = True`` (it fits the LBP whitening and the attribute
trainer and never enters benchmarks); the rest are ``split = "test"``, ``exclude = False``.
"""

from __future__ import annotations

import io
import math
import multiprocessing as mp
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image
from scipy.ndimage import gaussian_filter
from tqdm import tqdm

from facecast.datasets.label_noise import plant_label_noise
from facecast.io.atomic import atomic_path
from facecast.io.parquet_io import write_parquet

__all__ = [
    "COARSE_CONTRAST_FACTOR",
    "COLOUR_CAST",
    "GROUP_CONTRAST",
    "GROUP_JITTER",
    "GROUP_RESOLUTION",
    "LOW_CONTRAST_FACTOR",
    "SHADING_STRENGTH",
    "IdentityTraits",
    "ImageCovariates",
    "generate_dataset",
    "glasses_probability",
    "identity_name",
    "render_face",
    "render_image",
    "sample_covariates",
    "sample_identity",
]

LOW_CONTRAST_FACTOR = 0.7
"""Fine-detail contrast multiplier in the faces of the planted low-contrast group."""
COARSE_CONTRAST_FACTOR = 1.0
"""Coarse-structure contrast multiplier in the faces of the planted low-contrast group."""
GROUP_CONTRAST = 0.8
"""Whole-frame contrast multiplier (face, hair, background) of the low-contrast group."""
SHADING_STRENGTH = 0.25
"""Std of the per-image smooth log-gain (uneven light) field of the low-contrast group."""
COLOUR_CAST = 0.06
"""Std of the per-image, per-channel log white-balance cast of the low-contrast group."""
GROUP_RESOLUTION = 0.4
"""Effective resolution (fraction of the image size) of the low-contrast group's camera."""
GROUP_JITTER = 1.6
"""Per-image face-geometry sd of the low-contrast group, in units of the identity-law sd."""

REFERENCE_SIZE = 224
"""Image size at which ``blur`` sigmas are expressed (they scale with the image size)."""

_TRAIT_STREAM, _IMAGE_STREAM, _SPLIT_STREAM = 0, 1, 2

# --------------------------------------------------------------------------- palettes
_SKIN_LIGHT = np.array([0.96, 0.80, 0.69], np.float32)
_SKIN_MID = np.array([0.78, 0.57, 0.42], np.float32)
_SKIN_DARK = np.array([0.46, 0.30, 0.20], np.float32)
_HAIR_COLOURS = np.array([
    [0.06, 0.05, 0.05],  # black
    [0.17, 0.11, 0.07],  # dark brown
    [0.33, 0.21, 0.12],  # brown
    [0.52, 0.38, 0.24],  # light brown
    [0.80, 0.66, 0.40],  # blonde
    [0.62, 0.27, 0.12],  # red
    [0.40, 0.17, 0.10],  # auburn
], np.float32)
_HAIR_P_LIGHT = np.array([0.12, 0.22, 0.20, 0.16, 0.17, 0.06, 0.07])
_HAIR_P_DARK = np.array([0.55, 0.33, 0.08, 0.02, 0.0, 0.0, 0.02])
_IRIS_COLOURS = np.array([
    [0.20, 0.11, 0.05],  # dark brown
    [0.38, 0.22, 0.09],  # brown
    [0.42, 0.36, 0.16],  # hazel
    [0.25, 0.42, 0.25],  # green
    [0.27, 0.45, 0.66],  # blue
    [0.45, 0.50, 0.55],  # grey
], np.float32)
_IRIS_P_LIGHT = np.array([0.15, 0.25, 0.15, 0.12, 0.25, 0.08])
_IRIS_P_DARK = np.array([0.65, 0.30, 0.05, 0.0, 0.0, 0.0])


def identity_name(index: int) -> str:
    """Folder / identity name of identity number ``index`` (``id00017``)."""
    return f"id{index:05d}"


def glasses_probability(age: np.ndarray | float) -> np.ndarray | float:
    """Planted effect 1: the per-image probability of glasses at ``age`` years."""
    return 1.0 / (1.0 + np.exp(-(np.asarray(age, dtype=float) - 50.0) / 8.0))


def _rng(seed: int, *stream: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence([int(seed) & 0xFFFFFFFF, *stream]))


# --------------------------------------------------------------------------- sampling
@dataclass(frozen=True)
class IdentityTraits:
    """Everything that makes one synthetic person (constant across their images)."""

    skin_tone: float
    male: float
    age: float
    eye_spacing: float
    nose_width: float
    mouth_width: float
    face_aspect: float
    hair_grey: float
    wrinkles: float
    beard: float
    hair_long: float
    bald: float
    # unlabelled identity cues
    skin_rgb: tuple[float, float, float]
    hair_rgb: tuple[float, float, float]
    iris_rgb: tuple[float, float, float]
    lip_rgb: tuple[float, float, float]
    jaw_taper: float
    hairline: float
    hair_volume: float
    hair_part: float
    fringe: float
    brow_thickness: float
    brow_arch: float
    brow_height: float
    brow_length: float
    eye_size: float
    eye_height: float
    nose_length: float
    mouth_height: float
    lip_thickness: float
    beard_density: float
    moustache: float
    moles: tuple[tuple[float, float, float], ...]
    freckles: float
    freckle_seed: int
    texture_seed: int
    texture_strength: float

    @property
    def dark_skin(self) -> float:
        return float(self.skin_tone >= 0.5)

    @property
    def low_contrast_group(self) -> float:
        """Planted effect 3: dark-skinned women are rendered with low contrast."""
        return float(self.male == 0.0 and self.skin_tone >= 0.5)


@dataclass(frozen=True)
class ImageCovariates:
    """Per-image nuisance factors (pose, camera, accessories)."""

    yaw: float
    roll: float
    scale: float
    shift_x: float
    shift_y: float
    blur: float
    noise: float
    illumination: float
    light_direction: float
    jpeg_quality: int
    glasses: float
    hat: float
    smile: float
    gaze: float
    background_seed: int
    clothing_rgb: tuple[float, float, float]
    hat_rgb: tuple[float, float, float]
    frame_rgb: tuple[float, float, float]


def _mix(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    return (1.0 - t) * a + t * b


def sample_identity(rng: np.random.Generator) -> IdentityTraits:
    """Draw one identity's traits from ``rng`` (see the module docstring for the laws)."""
    skin_tone = float(rng.uniform(0.0, 1.0))
    male = float(rng.random() < 0.5)
    age = float(rng.uniform(18.0, 80.0))
    if skin_tone < 0.5:
        skin = _mix(_SKIN_LIGHT, _SKIN_MID, skin_tone / 0.5)
    else:
        skin = _mix(_SKIN_MID, _SKIN_DARK, (skin_tone - 0.5) / 0.5)
    skin = np.clip(skin * rng.uniform(0.96, 1.04, 3), 0, 1)
    p_hair = _mix(_HAIR_P_LIGHT, _HAIR_P_DARK, skin_tone)
    hair = _HAIR_COLOURS[rng.choice(len(p_hair), p=p_hair / p_hair.sum())]
    hair = np.clip(hair * rng.uniform(0.85, 1.15), 0, 1)
    p_iris = _mix(_IRIS_P_LIGHT, _IRIS_P_DARK, skin_tone)
    iris = _IRIS_COLOURS[rng.choice(len(p_iris), p=p_iris / p_iris.sum())]
    iris = np.clip(iris * rng.uniform(0.85, 1.15, 3), 0, 1)
    hair_grey = float(np.clip((age - 38.0) / 35.0 + rng.normal(0, 0.12), 0.0, 1.0))
    wrinkles = float(np.clip((age - 32.0) / 40.0 + rng.normal(0, 0.06), 0.0, 1.0))
    beard = float(male == 1.0 and rng.random() < 0.4)
    bald = float(male == 1.0 and age > 40 and rng.random() < 0.35)
    hair_long = float(bald == 0.0 and rng.random() < (0.75 if male == 0.0 else 0.12))
    lip_base = skin * np.array([0.80, 0.52, 0.52])
    if male == 0.0 and rng.random() < 0.5:  # lipstick
        lip_base = _mix(lip_base, np.array([0.62, 0.12, 0.18]), float(rng.uniform(0.3, 0.7)))
    n_moles = int(rng.integers(0, 4))
    moles = tuple(
        (float(rng.uniform(-0.65, 0.65)), float(rng.uniform(-0.55, 0.85)),
         float(rng.uniform(0.016, 0.03)))
        for _ in range(n_moles)
    )
    return IdentityTraits(
        skin_tone=skin_tone,
        male=male,
        age=age,
        eye_spacing=float(rng.uniform(0.34, 0.46)),
        nose_width=float(rng.uniform(0.16, 0.30) + 0.03 * male),
        mouth_width=float(rng.uniform(0.27, 0.42)),
        face_aspect=float(rng.uniform(1.22, 1.48)),
        hair_grey=hair_grey,
        wrinkles=wrinkles,
        beard=beard,
        hair_long=hair_long,
        bald=bald,
        skin_rgb=tuple(float(c) for c in skin),
        hair_rgb=tuple(float(c) for c in hair),
        iris_rgb=tuple(float(c) for c in iris),
        lip_rgb=tuple(float(c) for c in np.clip(lip_base, 0, 1)),
        jaw_taper=float(rng.uniform(0.12, 0.24) if male else rng.uniform(0.22, 0.38)),
        hairline=float(rng.uniform(-0.95, -0.68)),
        hair_volume=float(rng.uniform(1.04, 1.18)),
        hair_part=float(rng.uniform(-0.5, 0.5)),
        fringe=float(rng.random() < 0.3),
        brow_thickness=float(rng.uniform(0.045, 0.07) if male else rng.uniform(0.03, 0.05)),
        brow_arch=float(rng.uniform(0.0, 0.07)),
        brow_height=float(rng.uniform(-0.37, -0.29)),
        brow_length=float(rng.uniform(0.17, 0.24)),
        eye_size=float(rng.uniform(0.85, 1.15) * (1.0 if male else 1.07)),
        eye_height=float(rng.uniform(-0.16, -0.06)),
        nose_length=float(rng.uniform(0.26, 0.40)),
        mouth_height=float(rng.uniform(0.58, 0.72)),
        lip_thickness=float(rng.uniform(0.7, 1.3)),
        beard_density=float(rng.uniform(0.45, 0.9)),
        moustache=float(beard == 1.0 and rng.random() < 0.7),
        moles=moles,
        freckles=float(rng.uniform(0.2, 0.6) if rng.random() < 0.15 and skin_tone < 0.4
                       else 0.0),
        freckle_seed=int(rng.integers(0, 2**31 - 1)),
        texture_seed=int(rng.integers(0, 2**31 - 1)),
        texture_strength=float(rng.uniform(0.04, 0.07)),
    )


def sample_covariates(rng: np.random.Generator, traits: IdentityTraits) -> ImageCovariates:
    """Draw one image's covariates; glasses depend on age, hats on sex, noise on light."""
    illumination = float(rng.uniform(0.55, 1.25))
    noise = float(rng.uniform(0.0, 0.012) + 0.045 * (1.25 - illumination) / 0.7)
    strong = rng.random() < 0.3
    blur = float(rng.uniform(1.5, 3.5) if strong else rng.uniform(0.0, 0.8))
    glasses = float(rng.random() < glasses_probability(traits.age))
    hat = float(rng.random() < (0.25 if traits.male else 0.08))
    return ImageCovariates(
        yaw=float(rng.uniform(-25.0, 25.0)),
        roll=float(rng.normal(0.0, 7.0)),
        scale=float(rng.uniform(0.8, 1.15)),
        shift_x=float(rng.uniform(-0.05, 0.05)),
        shift_y=float(rng.uniform(-0.05, 0.04)),
        blur=blur,
        noise=noise,
        illumination=illumination,
        light_direction=float(rng.uniform(-60.0, 60.0)),
        jpeg_quality=int(rng.integers(40, 96)),
        glasses=glasses,
        hat=hat,
        smile=float(rng.uniform(0.0, 1.0)),
        gaze=float(rng.uniform(-0.3, 0.3)),
        background_seed=int(rng.integers(0, 2**31 - 1)),
        clothing_rgb=tuple(float(c) for c in rng.uniform(0.08, 0.85, 3)),
        hat_rgb=tuple(float(c) for c in rng.uniform(0.05, 0.8, 3)),
        frame_rgb=tuple(float(c) for c in (rng.uniform(0.02, 0.3, 3) if rng.random() < 0.6
                                            else np.full(3, rng.uniform(0.55, 0.8)))),
    )


# --------------------------------------------------------------------------- drawing
def _soft(dist: np.ndarray, px: float) -> np.ndarray:
    """Anti-aliased coverage of the region ``dist < 0`` (``dist`` in face units)."""
    return np.clip(0.5 - dist / px, 0.0, 1.0).astype(np.float32)


def _ellipse_dist(u: np.ndarray, v: np.ndarray, cu: float, cv: float, a: float,
                  b: float) -> np.ndarray:
    """Approximate signed distance to an axis-aligned ellipse (negative inside)."""
    x = (u - cu) / a
    y = (v - cv) / b
    k = np.sqrt(x * x + y * y)
    grad = np.sqrt((x / a) ** 2 + (y / b) ** 2) / np.maximum(k, 1e-6)
    return (k - 1.0) / np.maximum(grad, 1e-6)


def _segment_dist(u: np.ndarray, v: np.ndarray, a: tuple[float, float],
                  b: tuple[float, float]) -> np.ndarray:
    """Distance to the segment a-b (face units)."""
    du, dv = b[0] - a[0], b[1] - a[1]
    t = np.clip(((u - a[0]) * du + (v - a[1]) * dv) / max(du * du + dv * dv, 1e-9), 0.0, 1.0)
    return np.sqrt((u - a[0] - t * du) ** 2 + (v - a[1] - t * dv) ** 2)


def _gauss(u: np.ndarray, v: np.ndarray, cu: float, cv: float, su: float,
           sv: float) -> np.ndarray:
    return np.exp(-0.5 * (((u - cu) / su) ** 2 + ((v - cv) / sv) ** 2)).astype(np.float32)


def _background(size: int, seed: int) -> np.ndarray:
    """A textured, smoothly varying indoor-like background (sinusoids + blurred noise)."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    grey = rng.uniform(0.2, 0.85)
    base = np.clip(grey + rng.uniform(-0.15, 0.15, 3), 0.05, 0.95).astype(np.float32)
    img = np.broadcast_to(base, (size, size, 3)).copy()
    for _ in range(3):
        k = rng.uniform(1.0, 6.0) * 2 * math.pi
        ang = rng.uniform(0, math.pi)
        phase = rng.uniform(0, 2 * math.pi)
        wave = np.sin(k * (xx * math.cos(ang) + yy * math.sin(ang)) + phase)
        img += wave[..., None] * (rng.uniform(-0.07, 0.07) + rng.uniform(-0.02, 0.02, 3)
                                  ).astype(np.float32)
    fine = gaussian_filter(rng.standard_normal((size, size)).astype(np.float32),
                           sigma=size / 150)
    img += (fine * float(rng.uniform(0.04, 0.12)))[..., None]
    return np.clip(img, 0.0, 1.0)


def _shade(nx: np.ndarray, ny: np.ndarray, nz: np.ndarray, light: np.ndarray,
           ambient: float = 0.38, spec: float = 0.10) -> np.ndarray:
    """Lambertian + Blinn specular shading of unit normals under ``light``."""
    ndl = np.clip(nx * light[0] + ny * light[1] + nz * light[2], 0.0, 1.0)
    half = light + np.array([0.0, 0.0, 1.0], np.float32)
    half = half / np.linalg.norm(half)
    ndh = np.clip(nx * half[0] + ny * half[1] + nz * half[2], 0.0, 1.0)
    return (ambient + (1.0 - ambient) * ndl + spec * ndh**24).astype(np.float32)


def _normals(z: np.ndarray, px: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit normals (face frame) of a depth map ``z`` sampled every ``px`` face units."""
    gy, gx = np.gradient(z, px)
    gx = np.clip(gx, -6.0, 6.0)
    gy = np.clip(gy, -6.0, 6.0)
    inv = 1.0 / np.sqrt(gx * gx + gy * gy + 1.0)
    return (-gx * inv).astype(np.float32), (-gy * inv).astype(np.float32), inv.astype(np.float32)


def _dome_shade(u: np.ndarray, v: np.ndarray, cu: float, cv: float, a: float, b: float,
                light: np.ndarray, ambient: float, spec: float) -> np.ndarray:
    """Shading of an ellipsoidal dome (hair, hat) centred at (cu, cv) with semi-axes a, b."""
    x = (u - cu) / a
    y = (v - cv) / b
    nz = np.sqrt(np.clip(1.0 - x * x - y * y, 0.02, 1.0))
    norm = np.sqrt(x * x + y * y + nz * nz)
    return _shade(x / norm, y / norm, nz / norm, light, ambient=ambient, spec=spec)


def _skin_texture(u0: np.ndarray, v: np.ndarray, seed: int) -> np.ndarray:
    """An identity's skin texture: a fixed random field of unit variance on face coordinates.

    A sum of random plane waves (wavelengths 0.12-0.5 face units), so the same person shows
    the same pattern in every image (it moves with the face) and different people differ.
    """
    rng = np.random.default_rng(seed)
    n = 24
    k = rng.uniform(12.0, 52.0, n)
    ang = rng.uniform(0.0, math.pi, n)
    phase = rng.uniform(0.0, 2 * math.pi, n)
    ku = (k * np.cos(ang)).tolist()  # python floats keep the float32 arithmetic
    kv = (k * np.sin(ang)).tolist()
    out = np.zeros_like(u0)
    for a, b, c in zip(ku, kv, phase.tolist(), strict=True):
        out += np.cos(u0 * a + v * b + c)
    return out * math.sqrt(2.0 / n)


def _yaw_u(u0: float, z0: float, yaw: float) -> float:
    """Image-plane u of a head point at (u0, depth z0) after turning the head by ``yaw``."""
    return u0 * math.cos(yaw) + z0 * math.sin(yaw)


def _foreshorten(u0: float, yaw: float) -> float:
    """Horizontal scale of a small feature at u0 (face units) after a yaw turn."""
    phi = math.asin(max(-0.95, min(0.95, u0)))
    return float(np.clip(math.cos(phi + yaw) / math.cos(phi), 0.3, 1.2))


class _Canvas:
    """An image plus the face coordinate frame (u right, v down; face half-width = 1).

    :meth:`region` returns the pixel window covering a face-unit rectangle (whatever the
    roll), with its u, v grids, so small features cost only their own pixels.
    """

    def __init__(self, img: np.ndarray, cx: float, cy: float, ppu: float, roll: float):
        self.img = img
        self.size = img.shape[0]
        self.cx, self.cy, self.ppu = cx, cy, ppu
        self.px = 1.0 / ppu
        self.cr, self.sr = math.cos(roll), math.sin(roll)
        self.face = np.zeros(img.shape[:2], np.float32)  # face coverage (features clip to it)
        self.shade = np.ones(img.shape[:2], np.float32)  # face shading

    def region(self, u0: float, u1: float, v0: float, v1: float) -> _Region:
        us = np.array([u0, u1, u1, u0])
        vs = np.array([v0, v0, v1, v1])
        xs = self.cx + self.ppu * (us * self.cr - vs * self.sr)
        ys = self.cy + self.ppu * (us * self.sr + vs * self.cr)
        x0 = int(np.clip(math.floor(xs.min()) - 1, 0, self.size))
        x1 = int(np.clip(math.ceil(xs.max()) + 2, 0, self.size))
        y0 = int(np.clip(math.floor(ys.min()) - 1, 0, self.size))
        y1 = int(np.clip(math.ceil(ys.max()) + 2, 0, self.size))
        return _Region(self, slice(y0, y1), slice(x0, x1))


class _Region:
    """A pixel window of a :class:`_Canvas` with face coordinates ``u``, ``v``."""

    def __init__(self, canvas: _Canvas, sy: slice, sx: slice):
        self.c = canvas
        self.sl = (sy, sx)
        yy, xx = np.mgrid[sy, sx].astype(np.float32)
        dx = xx + 0.5 - canvas.cx
        dy = yy + 0.5 - canvas.cy
        self.u = ((dx * canvas.cr + dy * canvas.sr) * canvas.px).astype(np.float32)
        self.v = ((-dx * canvas.sr + dy * canvas.cr) * canvas.px).astype(np.float32)
        self.empty = self.u.size == 0

    @property
    def face(self) -> np.ndarray:
        return self.c.face[self.sl]

    @property
    def shade(self) -> np.ndarray:
        return self.c.shade[self.sl]

    def soft(self, dist: np.ndarray) -> np.ndarray:
        return _soft(dist, self.c.px)

    def paint(self, alpha: np.ndarray, colour: np.ndarray | Sequence[float]) -> None:
        """Alpha-composite ``colour`` (RGB or window-sized HxWx3) into the window."""
        if self.empty:
            return
        a = np.asarray(alpha, np.float32)[..., None]
        target = self.c.img[self.sl]
        target += a * (np.asarray(colour, dtype=np.float32) - target)


def render_face(traits: IdentityTraits, cov: ImageCovariates, size: int) -> np.ndarray:
    """Render the clean face (before group contrast, exposure, blur, noise and JPEG).

    Returns a float32 HxWx3 array in [0, 1]. A pure function of its arguments.
    """
    return _render(traits, cov, size)[0]


def _render(traits: IdentityTraits, cov: ImageCovariates,
            size: int) -> tuple[np.ndarray, np.ndarray]:
    """Clean render and the face (skin ellipse) coverage mask, both float32."""
    S = int(size)
    ppu = 0.22 * S * cov.scale  # pixels per face unit (face half-width)
    roll = math.radians(cov.roll)
    yaw = math.radians(cov.yaw)
    cv = _Canvas(_background(S, cov.background_seed), S * (0.5 + cov.shift_x),
                 S * (0.46 + cov.shift_y), ppu, roll)
    h = traits.face_aspect
    hv = traits.hair_volume
    skin = np.asarray(traits.skin_rgb, np.float32)
    hair_col = _mix(np.asarray(traits.hair_rgb, np.float32),
                    np.array([0.74, 0.74, 0.72], np.float32), traits.hair_grey)
    brow_col = _mix(np.asarray(traits.hair_rgb, np.float32) * 0.8,
                    np.array([0.55, 0.55, 0.53], np.float32), 0.6 * traits.hair_grey)
    az = math.radians(cov.light_direction)
    light_img = np.array([math.sin(az), -0.35, math.cos(az)], np.float32)
    light_img /= np.linalg.norm(light_img)
    cr, sr = math.cos(roll), math.sin(roll)
    light = np.array([light_img[0] * cr + light_img[1] * sr,
                      -light_img[0] * sr + light_img[1] * cr, light_img[2]], np.float32)

    # ---- shoulders, long hair behind the head, neck, ears
    sh_top = h + 0.2
    r = cv.region(-2.4, 2.4, sh_top - 0.05, sh_top + 2.5)
    if not r.empty:
        d_sh = _ellipse_dist(r.u, r.v, 0.0, sh_top + 1.1, 2.2, 1.1)
        sh = _dome_shade(r.u, r.v, 0.0, sh_top + 1.1, 2.3, 1.3, light, 0.45, 0.0)
        r.paint(r.soft(d_sh), np.asarray(cov.clothing_rgb, np.float32) * sh[..., None])
    if traits.hair_long:
        r = cv.region(-1.45 * hv, 1.45 * hv, -h - 0.3, h + 0.8)
        d_back = np.maximum(_ellipse_dist(r.u, r.v, 0.0, 0.1, 1.2 * hv, h + 0.2),
                            r.v - (h + 0.55))
        back = 0.5 + 0.25 * np.clip(1 - (r.u / 1.3) ** 2, 0, 1)
        strands = 0.9 + 0.1 * np.sin(50.0 * r.u)
        r.paint(r.soft(d_back), hair_col * (back * strands)[..., None])
    neck_w = 0.55 + 0.08 * traits.male
    r = cv.region(-neck_w - 0.1, neck_w + 0.1, 0.2 * h, h + 0.9)
    d_neck = np.maximum(np.abs(r.u) - neck_w, np.maximum(0.3 * h - r.v, r.v - (h + 0.8)))
    x = np.clip(r.u / (neck_w + 0.05), -0.99, 0.99)
    neck = _shade(x, 0 * x, np.sqrt(1 - x * x), light, spec=0.0)
    neck *= 1.0 - 0.4 * np.exp(-np.clip(r.v - h * 0.9, 0, None) / 0.2)  # jaw shadow
    r.paint(r.soft(d_neck), skin * neck[..., None])
    for s in (-1.0, 1.0):
        eu = _yaw_u(s * 0.97, 0.1, yaw)
        r = cv.region(eu - 0.2, eu + 0.2, -0.3, 0.35)
        d_ear = _ellipse_dist(r.u, r.v, eu, 0.02, 0.14, 0.25)
        ear = 0.6 + 0.3 * _gauss(r.u, r.v, eu, 0.0, 0.1, 0.18)
        r.paint(r.soft(d_ear), skin * ear[..., None])

    # ---- face: a depth map (ellipsoid + bumps), Lambertian shading, skin colour
    es, ev = traits.eye_spacing, traits.eye_height
    nw, mv = traits.nose_width, traits.mouth_height
    eyes_u = [_yaw_u(s * es, 0.85, yaw) for s in (-1.0, 1.0)]
    nose_root = _yaw_u(0.0, 1.0, yaw)
    nose_tip = _yaw_u(0.0, 1.25, yaw)
    nv_tip = ev + traits.nose_length + 0.05
    mouth_u = _yaw_u(0.0, 0.95, yaw)
    head = cv.region(-1.05, 1.05, -h - 0.05, h + 0.05)
    u, v = head.u, head.v
    w_v = 1.0 - traits.jaw_taper * np.clip(v / h, 0.0, 1.0) ** 2
    q = (u / w_v) ** 2 + (v / h) ** 2
    d_face = (np.sqrt(q) - 1.0) * w_v
    face_a = head.soft(d_face)
    z = np.sqrt(np.clip(1.0 - q, 0.0, 1.0)) * 0.9
    t = np.clip((v - ev) / max(nv_tip - ev, 1e-3), 0.0, 1.0)
    ridge_u = nose_root + (nose_tip - nose_root) * t
    ridge_w = 0.07 + 0.11 * t * nw / 0.23
    ridge = (0.08 + 0.2 * t) * np.exp(-0.5 * ((u - ridge_u) / ridge_w) ** 2)
    ridge *= (v > ev - 0.05) * np.exp(-np.clip(v - nv_tip, 0, None) ** 2 / 0.003)
    z += ridge.astype(np.float32)
    z += 0.07 * _gauss(u, v, nose_tip, nv_tip, 0.08 * nw / 0.23 + 0.03, 0.06)
    for eu in eyes_u:
        z -= 0.08 * _gauss(u, v, eu, ev + 0.01, 0.18, 0.12)  # eye sockets
        z += 0.04 * _gauss(u, v, eu * 1.1, ev + 0.32, 0.2, 0.12)  # cheekbones
    z += 0.05 * _gauss(u, v, 0.5 * (eyes_u[0] + eyes_u[1]), traits.brow_height - 0.02, 0.55, 0.07)
    z += 0.035 * _gauss(u, v, mouth_u, mv + 0.02, traits.mouth_width * 0.8, 0.07)
    z += 0.04 * _gauss(u, v, _yaw_u(0.0, 0.8, yaw), h * 0.82, 0.25, 0.12)
    shade = _shade(*_normals(z, cv.px), light)
    shade *= 1.0 - 0.3 * _gauss(u, v, nose_tip, nv_tip + 0.07, 0.1 + 0.2 * nw, 0.03)
    shade *= 1.0 - 0.18 * _gauss(u, v, mouth_u, mv + 0.15, traits.mouth_width * 0.6, 0.035)
    blush = np.zeros_like(u)
    for s in (-1.0, 1.0):
        blush += 0.08 * _gauss(u, v, _yaw_u(s * 0.5, 0.8, yaw), 0.3, 0.18, 0.14)
    col = _mix(skin, np.array([0.78, 0.32, 0.32], np.float32), blush[..., None])
    u0 = (u - np.sqrt(np.clip(1.0 - q, 0.0, 1.0)) * 0.9 * math.sin(yaw)) / math.cos(yaw)
    col = col * (1.0 + traits.texture_strength * _skin_texture(u0, v, traits.texture_seed)
                 )[..., None]
    head.paint(face_a, col * shade[..., None])
    cv.face[head.sl] = face_a
    cv.shade[head.sl] = shade

    def face_region(cu: float, cv_: float, hu: float, hvv: float) -> _Region:
        return cv.region(cu - hu, cu + hu, cv_ - hvv, cv_ + hvv)

    # ---- freckles and moles (identity cues)
    if traits.freckles > 0:
        frng = np.random.default_rng(traits.freckle_seed)
        r = cv.region(-0.75, 0.75, -0.05, 0.55)
        dots = np.full(r.u.shape, 9.0, np.float32)
        for _ in range(40):
            fu0, fv0 = frng.uniform(-0.6, 0.6), frng.uniform(0.0, 0.45)
            dots = np.minimum(dots, np.hypot(r.u - _yaw_u(fu0, 0.85, yaw), r.v - fv0))
        r.paint(traits.freckles * 0.5 * r.soft(dots - 0.012) * r.face, skin * 0.6)
    for mu0, mv0, mr in traits.moles:
        mu = _yaw_u(mu0, 0.85, yaw)
        fs = _foreshorten(mu0, yaw)
        r = face_region(mu, mv0, mr + 0.05, mr + 0.05)
        r.paint(0.85 * r.soft(_ellipse_dist(r.u, r.v, mu, mv0, mr * fs, mr)) * r.face,
                np.array([0.22, 0.13, 0.09], np.float32))

    # ---- wrinkles (age)
    wr = traits.wrinkles
    if wr > 0.05:
        strength = (0.12 + 0.3 * wr) * wr**0.5
        fore = _yaw_u(0.0, 0.9, yaw)
        r = cv.region(fore - 0.6, fore + 0.6, -0.8, -0.45)
        lines = np.zeros_like(r.u)
        for i, lv in enumerate((-0.52, -0.62, -0.72)):
            wave = lv + 0.015 * np.sin(6.0 * r.u + i)
            lines += np.exp(-0.5 * ((r.v - wave) / 0.011) ** 2)
        lines *= np.abs(r.u - fore) < 0.55
        r.paint(np.clip(lines, 0, 1) * strength * r.face, skin * 0.45)
        for s in (-1.0, 1.0):
            a = (_yaw_u(s * (nw * 0.55 + 0.08), 0.95, yaw), nv_tip - 0.02)
            b = (_yaw_u(s * (traits.mouth_width + 0.07), 0.85, yaw), mv + 0.12)
            r = cv.region(min(a[0], b[0]) - 0.05, max(a[0], b[0]) + 0.05, a[1] - 0.05,
                          b[1] + 0.05)
            fold = np.exp(-0.5 * (_segment_dist(r.u, r.v, a, b) / 0.014) ** 2)
            r.paint(fold * strength * r.face, skin * 0.45)
            cu = _yaw_u(s * (es + 0.2), 0.75, yaw)
            r = cv.region(cu - 0.15, cu + 0.15, ev - 0.12, ev + 0.12)
            feet = np.zeros_like(r.u)
            for ang in (-0.4, 0.0, 0.4):
                end = (cu + s * 0.11 * math.cos(ang), ev + 0.11 * math.sin(ang))
                feet += np.exp(-0.5 * (_segment_dist(r.u, r.v, (cu, ev), end) / 0.009) ** 2)
            r.paint(np.clip(feet, 0, 1) * strength * r.face, skin * 0.45)

    # ---- beard and moustache
    if traits.beard:
        r = cv.region(-1.05, 1.05, nv_tip, h + 0.05)
        brng = np.random.default_rng(traits.freckle_seed + 1)
        tex = gaussian_filter(brng.standard_normal(r.u.shape).astype(np.float32), 0.7)
        ramp = np.clip((r.v - (nv_tip + 0.12)) / 0.15, 0, 1)
        r.paint(r.face * ramp * traits.beard_density * (0.75 + 0.25 * np.tanh(tex)),
                hair_col * 0.75)
    if traits.moustache:
        r = face_region(mouth_u, mv - 0.1, traits.mouth_width + 0.05, 0.1)
        d_m = _ellipse_dist(r.u, r.v, mouth_u, mv - 0.1, traits.mouth_width * 0.95, 0.055)
        r.paint(0.85 * r.soft(d_m) * r.face, hair_col * 0.7)

    # ---- mouth
    mw = traits.mouth_width * _foreshorten(0.0, yaw)
    lt = traits.lip_thickness
    r = face_region(mouth_u, mv, mw + 0.05, 0.2)
    xm = (r.u - mouth_u) / mw
    inside_x = np.clip(1.0 - xm**2, 0.0, 1.0)
    line_v = mv - cov.smile * 0.07 * xm**2 + 0.02 * cov.smile
    upper = np.maximum(line_v - 0.065 * lt * np.sqrt(inside_x)
                       + 0.015 * np.exp(-((xm / 0.12) ** 2)) - r.v, r.v - line_v)
    lower = np.maximum(line_v - r.v, r.v - (line_v + 0.085 * lt * inside_x**0.6))
    lip = np.asarray(traits.lip_rgb, np.float32) * r.shade[..., None]
    r.paint(r.soft(np.maximum(upper, np.abs(xm) - 1.0)) * r.face, lip * 0.85)
    r.paint(r.soft(np.maximum(lower, np.abs(xm) - 1.0)) * r.face, lip * 1.05)
    mouth_line = np.exp(-0.5 * ((r.v - line_v) / 0.013) ** 2) * (np.abs(xm) < 1.04)
    r.paint(0.85 * mouth_line * r.face, np.array([0.12, 0.04, 0.04], np.float32))

    # ---- nose: nostrils and alar creases
    for s in (-1.0, 1.0):
        nu = nose_tip + s * nw * 0.38 * _foreshorten(s * 0.15, yaw)
        r = face_region(nu, nv_tip, 0.12, 0.1)
        d_n = _ellipse_dist(r.u, r.v, nu, nv_tip + 0.025, 0.05 * nw / 0.23, 0.026)
        r.paint(0.8 * r.soft(d_n) * r.face, skin * 0.2)
        wing = _ellipse_dist(r.u, r.v, nose_tip + s * nw * 0.52, nv_tip - 0.01, 0.07, 0.07)
        r.paint(0.4 * np.exp(-0.5 * (wing / 0.012) ** 2) * (r.v > nv_tip - 0.07) * r.face,
                skin * 0.45)

    # ---- eyes
    eye_w = 0.19 * traits.eye_size
    eye_h = 0.074 * traits.eye_size
    iris = np.asarray(traits.iris_rgb, np.float32)
    for s, eu in zip((-1.0, 1.0), eyes_u, strict=True):
        fs = _foreshorten(s * es, yaw)
        a_e = eye_w * fs
        r = face_region(eu, ev, a_e + 0.08, eye_h + 0.12)
        xe = (r.u - eu) / a_e
        ye = r.v - ev
        span = np.clip(1.0 - xe**2, 0.0, 1.0)
        top = -eye_h * span**0.65 - 0.014 * xe * s  # upper lid; outer corner a bit higher
        bot = eye_h * 0.75 * span**0.9
        d_eye = np.maximum(np.maximum(top - ye, ye - bot), (np.abs(xe) - 1.0) * a_e)
        eye_a = r.soft(d_eye) * r.face
        r.paint(0.25 * _gauss(r.u, r.v, eu, ev - 0.02, a_e * 1.2, 0.09) * r.face, skin * 0.35)
        crease = np.exp(-0.5 * ((ye - (top - 0.04)) / 0.011) ** 2) * (np.abs(xe) < 0.9)
        r.paint(0.3 * crease * r.face, skin * 0.4)
        r.paint(eye_a, np.array([0.93, 0.91, 0.88], np.float32) * (0.6 + 0.4 * r.shade[..., None]))
        iu = eu + (cov.gaze + 0.3 * math.sin(yaw)) * a_e * 0.45
        rad = np.sqrt(((r.u - iu) / fs) ** 2 + ye**2)
        r_i = eye_h * 1.15
        ring = np.clip(1.0 - rad / r_i, 0, 1)[..., None]
        r.paint(r.soft((rad - r_i) * fs) * eye_a, iris * (0.5 + 0.7 * ring))
        r.paint(r.soft((rad - r_i * 0.42) * fs) * eye_a, np.array([0.03, 0.03, 0.03]))
        hl = _ellipse_dist(r.u, r.v, iu + 0.35 * r_i * light[0], ev - 0.35 * r_i,
                           0.22 * r_i, 0.22 * r_i)
        r.paint(0.9 * r.soft(hl) * eye_a, np.array([1.0, 1.0, 1.0], np.float32))
        lash_t = 0.016 + 0.01 * (1.0 - traits.male)
        lash = r.soft(np.abs(ye - top + lash_t * 0.4) - lash_t / 2) * (np.abs(xe) < 1.08)
        r.paint(lash * r.face, np.array([0.05, 0.04, 0.04], np.float32))
        lower_lid = np.exp(-0.5 * ((ye - bot - 0.006) / 0.008) ** 2) * (np.abs(xe) < 0.95)
        r.paint(0.35 * lower_lid * r.face, skin * 0.45)

    # ---- brows
    bl = traits.brow_length
    for s, eu in zip((-1.0, 1.0), eyes_u, strict=True):
        fs = _foreshorten(s * es, yaw)
        bu = eu + s * 0.02
        r = face_region(bu, traits.brow_height, bl * fs + 0.05, 0.15)
        xb = (r.u - bu) / (bl * fs)
        cb = traits.brow_height - traits.brow_arch * np.clip(1.0 - (xb + 0.3 * s) ** 2, 0, 1)
        thick = traits.brow_thickness * (1.0 - 0.45 * np.clip((xb * s + 1.0) / 2.0, 0, 1))
        d_br = np.maximum(np.abs(r.v - cb) - thick / 2, (np.abs(xb) - 1.0) * bl * fs)
        r.paint(0.92 * r.soft(d_br) * r.face, brow_col)

    # ---- hair on top of the head
    r = cv.region(-1.3 * hv, 1.3 * hv, -h - 0.3, 0.5 + 0.3 * traits.hair_long)
    if not traits.bald:
        part = traits.hair_part
        hl = traits.hairline + 0.2 * traits.fringe
        hair_line = hl + 0.42 * r.u**2 + 0.05 * np.abs(r.u - part * 0.5)
        d_cap = _ellipse_dist(r.u, r.v, 0.0, -0.05, 1.08 * hv, h + 0.1 * hv)
        w_r = 1.0 - traits.jaw_taper * np.clip(r.v / h, 0.0, 1.0) ** 2
        d_face_r = (np.sqrt((r.u / w_r) ** 2 + (r.v / h) ** 2) - 1.0) * w_r
        side = np.maximum(-d_face_r, r.v - (0.05 + 0.3 * traits.hair_long))
        d_hair = np.maximum(d_cap, np.minimum(r.v - hair_line, side))
        strands = 0.85 + 0.15 * np.sin(55.0 * (r.u - part) + 6.0 * r.v)
        hs = _dome_shade(r.u, r.v, 0.0, -0.05, 1.1 * hv, h + 0.12, light, 0.45, 0.25)
        r.paint(r.soft(d_hair), hair_col * (strands * hs)[..., None])
    else:
        for s in (-1.0, 1.0):
            d_side = _ellipse_dist(r.u, r.v, s * 0.93, -0.25, 0.1, 0.28)
            r.paint(0.7 * r.soft(d_side) * r.face, hair_col * 0.9)

    # ---- glasses (thin frames)
    if cov.glasses:
        frame = np.asarray(cov.frame_rgb, np.float32)
        ft = 0.022
        inner_edges = []
        for s, eu in zip((-1.0, 1.0), eyes_u, strict=True):
            fs = _foreshorten(s * es, yaw)
            ga, gb = (eye_w + 0.06) * fs, 0.145
            r = face_region(eu, ev, ga + 0.05, gb + 0.05)
            gx = (r.u - eu) / ga
            gy = (r.v - ev - 0.015) / gb
            k = (gx**4 + gy**4) ** 0.25
            r.paint(0.12 * r.soft((k - 1.0) * min(ga, gb)), np.array([0.85, 0.9, 0.95]))
            r.paint(r.soft(np.abs(k - 1.0) * min(ga, gb) - ft / 2), frame)
            inner_edges.append(eu - s * ga)
            a = (eu + s * ga, ev - 0.04)
            b = (_yaw_u(s * 0.97, 0.1, yaw), ev - 0.02)
            if s * math.sin(yaw) < 0.25:  # the far arm hides behind the head
                r = cv.region(min(a[0], b[0]) - 0.05, max(a[0], b[0]) + 0.05, ev - 0.1, ev + 0.05)
                r.paint(r.soft(_segment_dist(r.u, r.v, a, b) - ft / 2.5), frame)
        lo, hi = sorted(inner_edges)
        r = cv.region(lo - 0.03, hi + 0.03, ev - 0.1, ev)
        r.paint(r.soft(_segment_dist(r.u, r.v, (lo, ev - 0.045), (hi, ev - 0.045)) - ft / 2.5),
                frame)

    # ---- hat (a knitted beanie)
    if cov.hat:
        hat = np.asarray(cov.hat_rgb, np.float32)
        r = cv.region(-1.35, 1.35, -h - 0.4, 0.0)
        hat_line = traits.hairline + 0.05 + 0.25 * r.u**2
        d_hat = np.maximum(_ellipse_dist(r.u, r.v, 0.0, -0.1, 1.16 * max(hv, 1.05), h + 0.22),
                           r.v - hat_line)
        knit = 0.85 + 0.15 * np.sin(60.0 * r.u) * np.sin(8.0 * r.v)
        hs = _dome_shade(r.u, r.v, 0.0, -0.1, 1.2, h + 0.25, light, 0.45, 0.05)
        band = 1.0 - 0.15 * (r.v > hat_line - 0.16)
        r.paint(r.soft(d_hat), hat * (knit * hs * band)[..., None])
    return np.clip(cv.img, 0.0, 1.0), cv.face


#: face-geometry traits of the low-contrast group that vary from image to image: name ->
#: the (low, high) range of the identity law (the per-image sd is GROUP_JITTER x its sd)
_JITTERED = {"eye_spacing": (0.34, 0.46), "mouth_width": (0.27, 0.42),
             "face_aspect": (1.22, 1.48), "eye_height": (-0.16, -0.06),
             "nose_length": (0.26, 0.40), "mouth_height": (0.58, 0.72),
             "brow_height": (-0.37, -0.29), "lip_thickness": (0.7, 1.3)}


def _jitter_geometry(traits: IdentityTraits, rng: np.random.Generator) -> IdentityTraits:
    """Planted effect 3: this image's face geometry of a low-contrast-group identity.

    Each trait in ``_JITTERED`` moves by N(0, (GROUP_JITTER x sd of its identity law)^2),
    clipped to that law's range; the labels keep the identity's own values.
    """
    sd = GROUP_JITTER / math.sqrt(12.0)
    moved = {k: float(np.clip(getattr(traits, k) + rng.normal(0.0, sd * (hi - lo)), lo, hi))
             for k, (lo, hi) in _JITTERED.items()}
    return replace(traits, **moved)


def _poor_capture(img: np.ndarray, face: np.ndarray, size: int,
                  rng: np.random.Generator) -> np.ndarray:
    """Planted effect 3: the low-contrast group's capture (before exposure, blur, noise, JPEG).

    1. The whole frame (face, hair, outline, background) keeps ``GROUP_CONTRAST`` of its
       contrast around the frame's mean colour; inside the face the fine detail (the image
       minus its blur at sigma = 1.5 % of the size) keeps only ``LOW_CONTRAST_FACTOR``
       and the coarse structure ``COARSE_CONTRAST_FACTOR`` (around the face's mean colour).
    2. Uneven light that changes from image to image: a smooth random log-gain field
       (bicubic upsampling of a 4x4 Gaussian grid, std ``SHADING_STRENGTH``) multiplies
       the frame, and a random white-balance cast (log-gain std ``COLOUR_CAST`` per channel).
    Sensor noise and JPEG are then the same as everyone's, so less identity survives.
    """
    w = face[..., None]
    mean = (img * w).sum(axis=(0, 1)) / max(float(face.sum()), 1.0)
    s = 0.015 * size
    low = gaussian_filter(img, sigma=(s, s, 0.0), mode="nearest")
    flat = mean + COARSE_CONTRAST_FACTOR * (low - mean) + LOW_CONTRAST_FACTOR * (img - low)
    img = img + w * (flat - img)
    frame_mean = img.mean(axis=(0, 1))
    img = frame_mean + GROUP_CONTRAST * (img - frame_mean)
    grid = rng.standard_normal((4, 4)).astype(np.float32)
    field = np.asarray(Image.fromarray(grid, mode="F").resize(
        (size, size), Image.Resampling.BICUBIC), np.float32).copy()
    field *= SHADING_STRENGTH / max(float(field.std()), 1e-6)
    cast = rng.normal(0.0, COLOUR_CAST, 3).astype(np.float32)
    img = img * np.exp(field[..., None] + cast)
    small = max(8, round(size * GROUP_RESOLUTION))
    chans = [Image.fromarray(np.ascontiguousarray(img[..., c]), mode="F")
             .resize((small, small), Image.Resampling.BILINEAR, reducing_gap=None)
             .resize((size, size), Image.Resampling.BICUBIC) for c in range(3)]
    return np.stack([np.asarray(ch, np.float32) for ch in chans], axis=-1)


def render_image(traits: IdentityTraits, cov: ImageCovariates, size: int,
                 noise_rng: np.random.Generator) -> np.ndarray:
    """Render a full camera image: face, group contrast, exposure, blur, noise (uint8 HxWx3).

    The JPEG step (``cov.jpeg_quality``) happens when the image is written.
    """
    if traits.low_contrast_group:
        traits = _jitter_geometry(traits, noise_rng)
    img, face = _render(traits, cov, size)
    if traits.low_contrast_group:
        img = _poor_capture(img, face, size, noise_rng)
    img = img * cov.illumination
    sigma = cov.blur * size / REFERENCE_SIZE
    if sigma > 0.05:
        img = gaussian_filter(img, sigma=(sigma, sigma, 0.0), mode="nearest")
    img = img + noise_rng.standard_normal(img.shape, dtype=np.float32) * cov.noise
    return (np.clip(img, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)


def _encode_jpeg(img: np.ndarray, quality: int) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(img, "RGB").save(buf, format="JPEG", quality=int(quality))
    return buf.getvalue()


# --------------------------------------------------------------------------- dataset
#: label columns (``label_<name>``) drawn per identity, per image, and derived group flags;
#: literal, so the config checks read them without importing this module
IDENTITY_LABELS = ("skin_tone", "male", "age", "eye_spacing", "nose_width", "mouth_width",
                   "face_aspect", "hair_grey", "wrinkles", "beard", "hair_long", "bald")
IMAGE_LABELS = ("yaw", "roll", "scale", "blur", "noise", "illumination", "light_direction",
                "jpeg_quality", "glasses", "hat", "smile")
GROUP_LABELS = ("dark_skin", "low_contrast_group")


def _identity_rows(job: tuple[int, int, int, int, str]) -> list[dict[str, Any]]:
    """Render and write every image of one identity; return its table rows."""
    seed, index, n_images, size, out_dir = job
    traits = sample_identity(_rng(seed, _TRAIT_STREAM, index))
    name = identity_name(index)
    folder = Path(out_dir) / "images" / name
    folder.mkdir(parents=True, exist_ok=True)
    tdict = asdict(traits)
    base = {f"label_{k}": float(tdict[k]) for k in IDENTITY_LABELS}
    base["label_dark_skin"] = traits.dark_skin
    base["label_low_contrast_group"] = traits.low_contrast_group
    rows = []
    for k in range(n_images):
        rng = _rng(seed, _IMAGE_STREAM, index, k)
        cov = sample_covariates(rng, traits)
        img = render_image(traits, cov, size, rng)
        data = _encode_jpeg(img, cov.jpeg_quality)
        target = folder / f"{k}.jpg"
        with atomic_path(target) as tmp:
            tmp.write_bytes(data)
        cdict = asdict(cov)
        row = {"path": f"images/{name}/{k}.jpg", "identity": name}
        row.update(base)
        row.update({f"label_{c}": float(cdict[c]) for c in IMAGE_LABELS})
        rows.append(row)
    return rows


def _train_identities(seed: int, n_identities: int) -> set[int]:
    n_train = n_identities // 4
    perm = _rng(seed, _SPLIT_STREAM).permutation(n_identities)
    return {int(i) for i in perm[:n_train]}


def generate_dataset(
    out_dir: Path,
    *,
    seed: int,
    n_jobs: int = 1,
    provenance: dict | None = None,
    n_identities: int = 240,
    images_per_identity: int = 8,
    image_size: int = 224,
    label_noise: dict | None = None,
) -> pd.DataFrame:
    """Render the synthetic dataset into ``out_dir``; return (and write) its truth table.

    Images go to ``out_dir/images/<identity>/<k>.jpg``; the table, written last with
    :func:`facecast.io.parquet_io.write_parquet`, to ``out_dir/truth.parquet``. Columns:
    ``path`` (relative to ``out_dir``), ``identity``, ``split`` (``train``/``test``),
    ``exclude`` (bool, True for train identities) and float ``label_*`` ground truth for
    every trait and covariate (see the module docstring). Rows are ordered by identity,
    then image index. Output depends only on ``seed`` and the sizes, not on ``n_jobs``.

    ``label_noise`` (a :data:`facecast.datasets.label_noise.DEMO_LABEL_NOISE`-shaped spec) adds
    observed annotation columns ``label_noisy_<attr>`` with planted annotation noise (issue
    14); images and the clean ``label_*`` columns are unchanged. None = no such columns.
    """
    if n_identities < 1 or images_per_identity < 1:
        raise ValueError("n_identities and images_per_identity must be >= 1, got "
                         f"{n_identities} and {images_per_identity}")
    if not 32 <= image_size <= 4096:
        raise ValueError(f"image_size must be in [32, 4096], got {image_size}")
    out_dir = Path(out_dir)
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    jobs = [(int(seed), i, int(images_per_identity), int(image_size), str(out_dir))
            for i in range(n_identities)]
    n_jobs = max(1, min(int(n_jobs), n_identities))
    rows: list[dict[str, Any]] = []
    progress = tqdm(total=n_identities, desc="synthetic identities", unit="id",
                    mininterval=2.0)
    if n_jobs == 1:
        for job in jobs:
            rows.extend(_identity_rows(job))
            progress.update()
    else:
        method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
        with mp.get_context(method).Pool(n_jobs) as pool:
            for part in pool.imap(_identity_rows, jobs, chunksize=4):
                rows.extend(part)
                progress.update()
    progress.close()
    table = pd.DataFrame(rows)
    train = _train_identities(seed, n_identities)
    is_train = np.array([int(n[2:]) in train for n in table["identity"]], dtype=bool)
    table.insert(2, "split", np.where(is_train, "train", "test"))
    table.insert(3, "exclude", is_train)
    labels = [c for c in table.columns if c.startswith("label_")]
    table[labels] = table[labels].astype("float64")
    table, planted = plant_label_noise(table, label_noise, int(seed))
    prov = dict(provenance or {})
    if planted:
        prov["label_noise"] = {"spec": dict(label_noise or {}), "planted": planted}
    prov.update({"stage": "synthetic_dataset", "generator_seed": int(seed),
                 "n_identities": int(n_identities),
                 "images_per_identity": int(images_per_identity),
                 "image_size": int(image_size)})
    write_parquet(table, out_dir / "truth.parquet", provenance=prov)
    return table
