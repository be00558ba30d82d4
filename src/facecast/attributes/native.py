"""Native quality and geometry measures (no model weights), inspired by ISO/IEC 29794-5.

Every measure is computed for a whole shard at once on the aligned crops (numpy, one
array op per measure over a block of images, :data:`BLOCK` at a time; ``blur_effect`` is
scikit-image's, batched: :func:`blur_effect_batch`). Values are NaN where an input is
missing (no crop, no landmarks, no embedding).
"""

from __future__ import annotations

import numpy as np
from scipy import ndimage

from facecast.attributes.inputs import FaceBatch
from facecast.attributes.pose import head_pose

# OFIQ's exposure limits on 8-bit luminance: under-exposed <= 25, over-exposed >= 247.
UNDEREXPOSED_MAX = 25.0 / 255.0
OVEREXPOSED_MIN = 247.0 / 255.0

# Inner face region of a crop (fractions of height/width); the ArcFace template puts the
# eyes at ~46% and the mouth at ~82% of the height, so this box holds brows to chin.
FACE_ROWS = (0.20, 0.95)
FACE_COLS = (0.15, 0.85)

NATIVE_COLUMNS = {
    "sharpness_laplacian": "variance of the 4-neighbour Laplacian of the luminance (0-255 scale) "
                           "in the inner face region; higher = sharper",
    "blur_effect": "scikit-image blur_effect (Crete et al. 2007) of the inner face region; "
                   "0 = sharp, 1 = fully blurred",
    "luminance_mean": "mean luminance (BT.601 Y, 0-1) of the inner face region",
    "luminance_var": "variance of that luminance",
    "underexposure": "fraction of face pixels with luminance <= 25/255",
    "overexposure": "fraction of face pixels with luminance >= 247/255",
    "dynamic_range": "99th minus 1st percentile of the face luminance (0-1)",
    "illumination_uniformity": "1 - |L - R| / (L + R) for the mean luminance of the left and "
                               "right face halves; 1 = evenly lit",
    "inter_eye_distance": "distance between the eye centres in original image pixels",
    "bbox_width": "detection box width in image pixels",
    "bbox_height": "detection box height in image pixels",
    "face_area_rel": "detection box area (clipped to the image) / image area",
    "yaw": "head yaw in degrees from the 5 landmarks; > 0 = face turned towards image right",
    "pitch": "head pitch in degrees; > 0 = face tilted up",
    "roll": "head roll in degrees (eye line); > 0 = rotated clockwise in the image",
    "det_score": "face detector confidence",
}

#: Columns computed from the landmarks or the box. For pre-aligned input (faces status
#: ``aligned_input``, ``faces.detector: none``) these are the alignment template's, mapped
#: into the image (facecast.faces.aligned), not measured: the descriptions say so.
TEMPLATE_COLUMNS = ("inter_eye_distance", "bbox_width", "bbox_height", "face_area_rel",
                    "yaw", "pitch", "roll")
TEMPLATE_NOTE = ("; for pre-aligned input (faces.detector none, status aligned_input) "
                 "from the alignment template's landmarks/box, not measured (constant)")


#: images per block of the image measures (bounds the float32 temporaries: ~10 MB each)
BLOCK = 256
#: scikit-image's ``blur_effect`` floor on gradient magnitudes
_BLUR_EPSILON = float(np.spacing(1))
#: scikit-image's Sobel weights: derivative along one axis, smoothing along the other
_SOBEL_EDGE = np.array([1.0, 0.0, -1.0])
_SOBEL_SMOOTH = np.array([0.25, 0.5, 0.25])


def _abs_sobel(x: np.ndarray, axis: int) -> np.ndarray:
    """|Sobel derivative| along ``axis`` of a (N, H, W) stack (axis 1 or 2), scikit-image's
    weights and ``reflect`` border, as two 1-D passes."""
    other = 3 - axis
    smooth = ndimage.correlate1d(x, _SOBEL_SMOOTH, axis=other, mode="reflect")
    return np.abs(ndimage.correlate1d(smooth, _SOBEL_EDGE, axis=axis, mode="reflect"))


def luminance(crops: np.ndarray) -> np.ndarray:
    """BT.601 luma in [0, 1] of (N, H, W, 3) uint8 images, float32 (N, H, W)."""
    w = np.array([0.299, 0.587, 0.114], dtype=np.float32) / 255.0
    return crops.astype(np.float32) @ w


def face_region(y: np.ndarray) -> np.ndarray:
    """The inner face box (see ``FACE_ROWS``/``FACE_COLS``) of (N, H, W[, C]) images."""
    h, w = y.shape[1:3]
    r0, r1 = round(FACE_ROWS[0] * h), round(FACE_ROWS[1] * h)
    c0, c1 = round(FACE_COLS[0] * w), round(FACE_COLS[1] * w)
    return y[:, r0:r1, c0:c1]


def blur_effect_batch(images: np.ndarray, h_size: int = 11) -> np.ndarray:
    """``skimage.measure.blur_effect(image, h_size)`` of each (H, W) float image of a
    (N, H, W) stack, in a few array operations instead of one call per image.

    The same steps as scikit-image 0.26 (Crete et al. 2007): per axis, the absolute Sobel
    derivative of the image and of its ``h_size`` moving average along that axis (both
    floored at machine epsilon), the sums of the derivative and of its loss to the
    averaging over the interior ``[2:-1]``, blur = |M1 - M2| / M1; the larger of the two
    axes' values. Equal to scikit-image's to float32 rounding (its sums are float32,
    these float64; its 3 x 3 Sobel kernel is two 1-D passes here).
    """
    x = np.asarray(images)
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"blur_effect_batch wants float images, got {x.dtype}")
    inner = (slice(None), slice(2, x.shape[1] - 1), slice(2, x.shape[2] - 1))
    out = np.zeros(len(x), dtype=np.float64)
    for ax in (1, 2):
        sharp = _abs_sobel(x, ax)
        soft = _abs_sobel(ndimage.uniform_filter1d(x, h_size, axis=ax), ax)
        np.maximum(sharp, _BLUR_EPSILON, out=sharp)
        np.maximum(soft, _BLUR_EPSILON, out=soft)
        m1 = sharp[inner].sum(axis=(1, 2), dtype=np.float64)
        m2 = np.maximum(sharp - soft, 0)[inner].sum(axis=(1, 2), dtype=np.float64)
        out = np.maximum(out, np.abs(m1 - m2) / m1)
    return out


def laplacian_variance(y: np.ndarray) -> np.ndarray:
    """Variance of the 4-neighbour Laplacian of (N, H, W) images (value scale 0-255)."""
    y = y.astype(np.float32) * 255.0
    lap = (4 * y[:, 1:-1, 1:-1] - y[:, :-2, 1:-1] - y[:, 2:, 1:-1]
           - y[:, 1:-1, :-2] - y[:, 1:-1, 2:])
    return lap.reshape(len(y), -1).var(1)


def image_measures(crops: np.ndarray) -> dict[str, np.ndarray]:
    """Quality measures of (N, H, W, 3) uint8 aligned crops -> dict of (N,) float arrays."""
    keys = list(NATIVE_COLUMNS)[:8]
    if len(crops) == 0:
        return {k: np.zeros(0) for k in keys}
    parts = [_block_measures(crops[s:s + BLOCK]) for s in range(0, len(crops), BLOCK)]
    return {k: np.concatenate([p[k] for p in parts]) for k in keys}


def _block_measures(crops: np.ndarray) -> dict[str, np.ndarray]:
    n = len(crops)
    face = luminance(face_region(crops))       # only the inner box is converted
    flat = face.reshape(n, -1)
    half = face.shape[2] // 2
    left = face[:, :, :half].reshape(n, -1).mean(1)
    right = face[:, :, face.shape[2] - half:].reshape(n, -1).mean(1)
    lo, hi = np.percentile(flat, [1, 99], axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        uniform = 1.0 - np.abs(left - right) / (left + right)
    uniform = np.where(left + right > 0, uniform, 1.0)
    return {
        "sharpness_laplacian": laplacian_variance(face),
        "blur_effect": blur_effect_batch(face, h_size=11),
        "luminance_mean": flat.mean(1),
        "luminance_var": flat.var(1),
        "underexposure": (flat <= UNDEREXPOSED_MAX).mean(1),
        "overexposure": (flat >= OVEREXPOSED_MIN).mean(1),
        "dynamic_range": hi - lo,
        "illumination_uniformity": uniform,
    }


def geometry_measures(landmarks: np.ndarray, bbox: np.ndarray, image_width: np.ndarray,
                      image_height: np.ndarray, det_score: np.ndarray) -> dict[str, np.ndarray]:
    """Detection geometry: eye distance, box size, relative face area, pose, confidence."""
    eyes = landmarks[:, 1] - landmarks[:, 0]
    bw = bbox[:, 2] - bbox[:, 0]
    bh = bbox[:, 3] - bbox[:, 1]
    cw = np.clip(np.minimum(bbox[:, 2], image_width) - np.maximum(bbox[:, 0], 0), 0, None)
    ch = np.clip(np.minimum(bbox[:, 3], image_height) - np.maximum(bbox[:, 1], 0), 0, None)
    with np.errstate(invalid="ignore", divide="ignore"):
        area_rel = cw * ch / (image_width * image_height)
    return {
        "inter_eye_distance": np.hypot(eyes[:, 0], eyes[:, 1]),
        "bbox_width": bw,
        "bbox_height": bh,
        "face_area_rel": area_rel,
        **head_pose(landmarks),
        "det_score": det_score.astype(np.float64),
    }


def native_scores(batch: FaceBatch, embed_norms: dict[str, np.ndarray] | None = None,
                  ) -> dict[str, np.ndarray]:
    """Every native column for a shard (image measures NaN where there is no crop).

    ``embed_norms`` maps an embedder name to its (N,) raw norms aligned with ``batch``
    (NaN where missing); each becomes ``embed_norm_<model>``.
    """
    n = len(batch)
    out: dict[str, np.ndarray] = {}
    img = image_measures(batch.crops[batch.has_crop])
    for key, vals in img.items():
        col = np.full(n, np.nan)
        col[batch.has_crop] = vals
        out[key] = col
    out.update(geometry_measures(batch.landmarks, batch.bbox, batch.image_width,
                                 batch.image_height, batch.det_score))
    for model, norms in (embed_norms or {}).items():
        out[f"embed_norm_{model}"] = np.asarray(norms, dtype=np.float64)
    return out
