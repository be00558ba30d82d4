"""Rendering of the synthetic faces: one person's traits and one photo's covariates in,
pixels out.

:func:`render_face` paints the clean face (background, shoulders, head, features,
accessories: the layers of :mod:`facecast.datasets.synthetic.layers`);
:func:`render_image` turns it into a camera image (the low-contrast group's capture from
:mod:`facecast.datasets.synthetic.effects`, exposure, blur, sensor noise).
"""

from __future__ import annotations

import numpy as np
from scipy.ndimage import gaussian_filter

from facecast.datasets.synthetic.effects import jitter_geometry, poor_capture
from facecast.datasets.synthetic.layers import (
    face_frame,
    paint_body,
    paint_brows,
    paint_eyes,
    paint_facial_hair,
    paint_glasses,
    paint_hair,
    paint_hat,
    paint_marks,
    paint_mouth,
    paint_nose,
    paint_skin,
    paint_wrinkles,
)
from facecast.datasets.synthetic.sampling import IdentityTraits, ImageCovariates

__all__ = ["REFERENCE_SIZE", "render_face", "render_image"]

REFERENCE_SIZE = 224
"""Image size at which ``blur`` sigmas are expressed (they scale with the image size)."""


def render_face(traits: IdentityTraits, cov: ImageCovariates, size: int) -> np.ndarray:
    """Render the clean face (before group contrast, exposure, blur, noise and JPEG).

    Returns a float32 HxWx3 array in [0, 1]. A pure function of its arguments.
    """
    return _render(traits, cov, size)[0]


def _render(traits: IdentityTraits, cov: ImageCovariates,
            size: int) -> tuple[np.ndarray, np.ndarray]:
    """Clean render and the face (skin ellipse) coverage mask, both float32: the layers of
    :mod:`facecast.datasets.synthetic.layers`, painted back to front."""
    f = face_frame(traits, cov, size)
    paint_body(f)
    paint_skin(f)
    paint_marks(f)
    paint_wrinkles(f)
    paint_facial_hair(f)
    paint_mouth(f)
    paint_nose(f)
    paint_eyes(f)
    paint_brows(f)
    paint_hair(f)
    paint_glasses(f)
    paint_hat(f)
    return np.clip(f.cv.img, 0.0, 1.0), f.cv.face


def render_image(traits: IdentityTraits, cov: ImageCovariates, size: int,
                 noise_rng: np.random.Generator) -> np.ndarray:
    """Render a full camera image: face, group contrast, exposure, blur, noise (uint8 HxWx3).

    The JPEG step (``cov.jpeg_quality``) happens when the image is written.
    """
    if traits.low_contrast_group:
        traits = jitter_geometry(traits, noise_rng)
    img, face = _render(traits, cov, size)
    if traits.low_contrast_group:
        img = poor_capture(img, face, size, noise_rng)
    img = img * cov.illumination
    sigma = cov.blur * size / REFERENCE_SIZE
    if sigma > 0.05:
        img = gaussian_filter(img, sigma=(sigma, sigma, 0.0), mode="nearest")
    img = img + noise_rng.standard_normal(img.shape, dtype=np.float32) * cov.noise
    return (np.clip(img, 0.0, 1.0) * 255.0 + 0.5).astype(np.uint8)

