"""The planted effects of the synthetic dataset: the laws and image treatments that later
stages must recover (effects 1-5 of :mod:`facecast.datasets.synthetic`).

:func:`planted_covariates` draws the covariates that carry effects 1, 2, 4 and 5 (glasses
with age, a strong-blur share, noise with low light, hats with sex);
:func:`is_low_contrast_group`, :func:`jitter_geometry` and :func:`poor_capture` are
effect 3, the protected group's worse, less consistent captures. Effect 6 (annotation
noise) lives in :mod:`facecast.datasets.label_noise`.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TypeVar

import numpy as np
from PIL import Image
from scipy.ndimage import gaussian_filter

#: an identity's traits (facecast.datasets.synthetic.sampling.IdentityTraits, a dataclass);
#: generic here so this module does not import sampling, which imports it
Traits = TypeVar("Traits")

__all__ = [
    "COARSE_CONTRAST_FACTOR",
    "COLOUR_CAST",
    "GROUP_CONTRAST",
    "GROUP_JITTER",
    "GROUP_RESOLUTION",
    "JITTERED",
    "LOW_CONTRAST_FACTOR",
    "SHADING_STRENGTH",
    "glasses_probability",
    "is_low_contrast_group",
    "jitter_geometry",
    "planted_covariates",
    "poor_capture",
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

#: face-geometry traits of the low-contrast group that vary from image to image: name ->
#: the (low, high) range of the identity law (the per-image sd is GROUP_JITTER x its sd)
JITTERED = {"eye_spacing": (0.34, 0.46), "mouth_width": (0.27, 0.42),
            "face_aspect": (1.22, 1.48), "eye_height": (-0.16, -0.06),
            "nose_length": (0.26, 0.40), "mouth_height": (0.58, 0.72),
            "brow_height": (-0.37, -0.29), "lip_thickness": (0.7, 1.3)}


def glasses_probability(age: np.ndarray | float) -> np.ndarray | float:
    """Planted effect 1: the per-image probability of glasses at ``age`` years."""
    return 1.0 / (1.0 + np.exp(-(np.asarray(age, dtype=float) - 50.0) / 8.0))


def planted_covariates(rng: np.random.Generator, age: float,
                       male: float) -> dict[str, float]:
    """Draw the image covariates that carry planted effects 1, 2, 4 and 5 from ``rng``.

    Returns ``illumination``, ``noise`` (rises as the light falls, effect 4), ``blur`` (30 %
    strong, effect 2), ``glasses`` (:func:`glasses_probability` of ``age``, effect 1) and
    ``hat`` (0.25 for men, 0.08 for women, effect 5), drawn in this order (the order is
    part of the seeded output).
    """
    illumination = float(rng.uniform(0.55, 1.25))
    noise = float(rng.uniform(0.0, 0.012) + 0.045 * (1.25 - illumination) / 0.7)
    strong = rng.random() < 0.3
    blur = float(rng.uniform(1.5, 3.5) if strong else rng.uniform(0.0, 0.8))
    glasses = float(rng.random() < glasses_probability(age))
    hat = float(rng.random() < (0.25 if male else 0.08))
    return {"illumination": illumination, "noise": noise, "blur": blur,
            "glasses": glasses, "hat": hat}


def is_low_contrast_group(male: float, skin_tone: float) -> float:
    """Planted effect 3: 1.0 for dark-skinned women (the low-contrast group), else 0.0."""
    return float(male == 0.0 and skin_tone >= 0.5)


def jitter_geometry(traits: Traits, rng: np.random.Generator) -> Traits:
    """Planted effect 3: this image's face geometry of a low-contrast-group identity.

    Each trait in ``JITTERED`` moves by N(0, (GROUP_JITTER x sd of its identity law)^2),
    clipped to that law's range; the labels keep the identity's own values.
    """
    sd = GROUP_JITTER / math.sqrt(12.0)
    moved = {k: float(np.clip(getattr(traits, k) + rng.normal(0.0, sd * (hi - lo)), lo, hi))
             for k, (lo, hi) in JITTERED.items()}
    return replace(traits, **moved)


def poor_capture(img: np.ndarray, face: np.ndarray, size: int,
                 rng: np.random.Generator) -> np.ndarray:
    """Planted effect 3: the low-contrast group's capture (before exposure, blur, noise, JPEG).

    1. The whole frame (face, hair, outline, background) keeps ``GROUP_CONTRAST`` of its
       contrast around the frame's mean colour; inside the face the fine detail (the image
       minus its blur at sigma = 1.5 % of the size) keeps only ``LOW_CONTRAST_FACTOR``
       and the coarse structure ``COARSE_CONTRAST_FACTOR`` (around the face's mean colour).
    2. Uneven light that changes from image to image: a smooth random log-gain field
       (bicubic upsampling of a 4x4 Gaussian grid, std ``SHADING_STRENGTH``) multiplies
       the frame, and a random white-balance cast (log-gain std ``COLOUR_CAST`` per channel).
    3. A low-resolution camera: the frame is resampled to ``GROUP_RESOLUTION`` of its size
       and back.
    Sensor noise and JPEG are then the same as everyone's, so less identity survives.
    Returns the float32 HxWx3 frame.
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
