"""Who the synthetic people are and how each photo is taken: the random laws of identity
traits and image covariates, and the seeded random streams they are drawn from.

:func:`sample_identity` draws an :class:`IdentityTraits` (constant across a person's
images), :func:`sample_covariates` an :class:`ImageCovariates` (per image; the covariates
that carry planted effects come from
:func:`facecast.datasets.synthetic.effects.planted_covariates`).
:func:`stream_rng` gives each identity, image and the split its own stream, so output is a
pure function of the seed. The laws are listed in :mod:`facecast.datasets.synthetic`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from facecast.datasets.synthetic.effects import is_low_contrast_group, planted_covariates

__all__ = [
    "IMAGE_STREAM",
    "SPLIT_STREAM",
    "TRAIT_STREAM",
    "IdentityTraits",
    "ImageCovariates",
    "mix",
    "sample_covariates",
    "sample_identity",
    "stream_rng",
]

TRAIT_STREAM, IMAGE_STREAM, SPLIT_STREAM = 0, 1, 2
"""Stream ids of :func:`stream_rng`: identity traits, one image, the train/test split."""

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


def stream_rng(seed: int, *stream: int) -> np.random.Generator:
    """The random generator of stream ``(seed, *stream)`` (``SeedSequence([seed, *stream])``,
    the seed taken modulo 2**32); the same arguments always give the same draws."""
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
        """1.0 when ``skin_tone >= 0.5``, else 0.0."""
        return float(self.skin_tone >= 0.5)

    @property
    def low_contrast_group(self) -> float:
        """Planted effect 3: dark-skinned women are rendered with low contrast."""
        return is_low_contrast_group(self.male, self.skin_tone)


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


def mix(a: np.ndarray, b: np.ndarray, t: float | np.ndarray) -> np.ndarray:
    """Linear blend ``(1 - t) * a + t * b`` (colours, probability vectors)."""
    return (1.0 - t) * a + t * b


def sample_identity(rng: np.random.Generator) -> IdentityTraits:
    """Draw one identity's traits from ``rng`` (see the module docstring for the laws)."""
    skin_tone = float(rng.uniform(0.0, 1.0))
    male = float(rng.random() < 0.5)
    age = float(rng.uniform(18.0, 80.0))
    if skin_tone < 0.5:
        skin = mix(_SKIN_LIGHT, _SKIN_MID, skin_tone / 0.5)
    else:
        skin = mix(_SKIN_MID, _SKIN_DARK, (skin_tone - 0.5) / 0.5)
    skin = np.clip(skin * rng.uniform(0.96, 1.04, 3), 0, 1)
    p_hair = mix(_HAIR_P_LIGHT, _HAIR_P_DARK, skin_tone)
    hair = _HAIR_COLOURS[rng.choice(len(p_hair), p=p_hair / p_hair.sum())]
    hair = np.clip(hair * rng.uniform(0.85, 1.15), 0, 1)
    p_iris = mix(_IRIS_P_LIGHT, _IRIS_P_DARK, skin_tone)
    iris = _IRIS_COLOURS[rng.choice(len(p_iris), p=p_iris / p_iris.sum())]
    iris = np.clip(iris * rng.uniform(0.85, 1.15, 3), 0, 1)
    hair_grey = float(np.clip((age - 38.0) / 35.0 + rng.normal(0, 0.12), 0.0, 1.0))
    wrinkles = float(np.clip((age - 32.0) / 40.0 + rng.normal(0, 0.06), 0.0, 1.0))
    beard = float(male == 1.0 and rng.random() < 0.4)
    bald = float(male == 1.0 and age > 40 and rng.random() < 0.35)
    hair_long = float(bald == 0.0 and rng.random() < (0.75 if male == 0.0 else 0.12))
    lip_base = skin * np.array([0.80, 0.52, 0.52])
    if male == 0.0 and rng.random() < 0.5:  # lipstick
        lip_base = mix(lip_base, np.array([0.62, 0.12, 0.18]), float(rng.uniform(0.3, 0.7)))
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
    """Draw one image's covariates from ``rng``; glasses depend on age, hats on sex, noise
    on light (the planted ones first, by :func:`planted_covariates`, then pose and camera)."""
    planted = planted_covariates(rng, traits.age, traits.male)
    return ImageCovariates(
        yaw=float(rng.uniform(-25.0, 25.0)),
        roll=float(rng.normal(0.0, 7.0)),
        scale=float(rng.uniform(0.8, 1.15)),
        shift_x=float(rng.uniform(-0.05, 0.05)),
        shift_y=float(rng.uniform(-0.05, 0.04)),
        blur=planted["blur"],
        noise=planted["noise"],
        illumination=planted["illumination"],
        light_direction=float(rng.uniform(-60.0, 60.0)),
        jpeg_quality=int(rng.integers(40, 96)),
        glasses=planted["glasses"],
        hat=planted["hat"],
        smile=float(rng.uniform(0.0, 1.0)),
        gaze=float(rng.uniform(-0.3, 0.3)),
        background_seed=int(rng.integers(0, 2**31 - 1)),
        clothing_rgb=tuple(float(c) for c in rng.uniform(0.08, 0.85, 3)),
        hat_rgb=tuple(float(c) for c in rng.uniform(0.05, 0.8, 3)),
        frame_rgb=tuple(float(c) for c in (rng.uniform(0.02, 0.3, 3) if rng.random() < 0.6
                                            else np.full(3, rng.uniform(0.55, 0.8)))),
    )

