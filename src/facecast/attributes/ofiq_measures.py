"""OFIQ's pixel components on an aligned face: luminance, exposure, dynamic range,
illumination uniformity, natural colour (native values; the 0-100 mappings are
:func:`facecast.attributes.ofiq.quality_value`).

Read from OFIQ (``BSI-OFIQ/OFIQ-Project``, MIT): ``OFIQlib/modules/utils/src/image_utils.cpp``
(``GetLuminanceImageFromBGR``: sRGB-linearised BT.709 luma, ``floor(y * 255 + 0.5)``;
``CalculateReferencePoints`` / ``CalculateRegionOfInterest``: the cheek zones;
``ConvertBGRToCIELAB``: D50 CIELAB of the zones' mean colour), ``Luminance.cpp``,
``UnderExposurePrevention.cpp`` (luminance 0-25), ``OverExposurePrevention.cpp``
(247-255), ``DynamicRange.cpp`` (histogram entropy), ``IlluminationUniformity.cpp``,
``NaturalColour.cpp`` (``IsColoured`` first: an aligned face whose three channels are
equal everywhere gets D = 0); the face region is the convex hull of the aligned landmarks
(``FaceMeasures::GetFaceMask`` with alpha 0, here rasterised directly).

Differences from OFIQ (approximations): the face is aligned from the stored facenet crop
(pixels outside it are not part of the region; ``coverage`` reports how much of the hull
the crop held), the frame is :data:`FRAME` px (OFIQ: 616), the hull is dlib's 68 points,
and the exposure measures have no occlusion mask.
"""

from __future__ import annotations

import cv2
import numpy as np

from facecast.attributes.ofiq_landmarks import MOUTH_CENTER, c_round, distance, eye_centres

#: side of the aligned face in pixels: OFIQ's 616 px frame at half scale (the facenet
#: crop's inter-eye distance, ~50 px, is close to the 56 px this frame gives)
FRAME = 308

_V = np.arange(256) / 255.0
_LINEAR = np.where(_V <= 0.04045, _V / 12.92, ((_V + 0.055) / 1.055) ** 2.4)
#: per-channel BT.709 contributions of the linearised channels, times 255
_LUM_R, _LUM_G, _LUM_B = (c * 255.0 * _LINEAR for c in (0.2126, 0.7152, 0.0722))
#: sRGB (linear) -> XYZ, D50 (image_utils.cpp ConvertBGRToCIELAB) and its white point
_XYZ_D50 = np.array([[0.43605, 0.38508, 0.14309], [0.22249, 0.71689, 0.06062],
                     [0.01393, 0.09710, 0.71419]])
_WHITE_D50 = np.array([0.964221, 1.0, 0.825211])
_LAB_K, _LAB_EPS = 24289 / 27.0, 216 / 24389.0
PIXEL_COMPONENTS = ("LuminanceMean", "LuminanceVariance", "UnderExposurePrevention",
                    "OverExposurePrevention", "DynamicRange", "IlluminationUniformity",
                    "NaturalColour")


_LUT: list[np.ndarray] = []


def _lut() -> np.ndarray:
    """OFIQ's luminance of every 24-bit colour (16 MB, built once per process)."""
    if not _LUT:
        gb = (_LUM_G[:, None] + _LUM_B[None, :]).ravel()
        _LUT.append(np.concatenate([np.floor(r + gb + 0.5).astype(np.uint8) for r in _LUM_R]))
    return _LUT[0]


def luminance(rgb: np.ndarray) -> np.ndarray:
    """OFIQ's 8-bit luminance of an (..., 3) RGB uint8 image (GetLuminanceImageFromBGR:
    ``floor((0.2126 R' + 0.7152 G' + 0.0722 B') * 255 + 0.5)`` of the linearised channels),
    looked up per 24-bit colour."""
    c = rgb.astype(np.uint32)
    return _lut()[(c[..., 0] << 16) | (c[..., 1] << 8) | c[..., 2]]


def lab_ab(mean_rgb: np.ndarray) -> tuple[float, float]:
    """CIELAB a, b of a mean colour (R, G, B in 0-255), as ConvertBGRToCIELAB computes it."""
    x = np.asarray(mean_rgb, dtype=np.float64) / 255.0
    lin = np.where(x > 0.04045, ((x + 0.055) / 1.055) ** 2.4, x / 12.92)
    xyz = _XYZ_D50 @ lin / _WHITE_D50
    f = np.where(xyz <= _LAB_EPS, (_LAB_K * xyz + 16) / 116, np.cbrt(xyz))
    return float(500.0 * (f[0] - f[1])), float(200.0 * (f[1] - f[2]))


def natural_colour_native(a: float, b: float) -> float:
    """NaturalColour.cpp ``CalculateScore``: distance of (a, b) from a in [5, 25], b in
    [5, 35]; 100 when a or b is negative."""
    if a < 0 or b < 0:
        return 100.0
    da = max(0.0, 5 - a, a - 25)
    db = max(0.0, 5 - b, b - 35)
    return float(np.sqrt(da * da + db * db))


def is_coloured(image: np.ndarray) -> bool:
    """NaturalColour.cpp ``IsColoured``: a three-channel image with at least one pixel whose
    channels differ (anywhere in the image, the black border of the alignment included)."""
    img = np.asarray(image)
    if img.ndim != 3 or img.shape[2] != 3:
        return False
    return bool(((img[..., 0] != img[..., 1]) | (img[..., 0] != img[..., 2])).any())


def face_region(aligned_landmarks: np.ndarray, footprint: np.ndarray) -> tuple[np.ndarray,
                                                                               float]:
    """The landmarked region (convex hull of the aligned landmarks) within the pixels the
    crop covered, as a bool (FRAME, FRAME) mask; and the share of the hull covered."""
    hull = cv2.convexHull(aligned_landmarks.astype(np.int32))
    mask = np.zeros(footprint.shape, np.uint8)
    cv2.fillConvexPoly(mask, hull, 1)
    inside = mask.astype(bool)
    n = int(inside.sum())
    region = inside & footprint.astype(bool)
    return region, (float(region.sum()) / n if n else 0.0)


def cheek_zones(aligned_landmarks: np.ndarray) -> tuple[tuple[int, int, int], ...]:
    """(x, y, size) of the left and right cheek zones (image_utils.cpp
    ``CalculateReferencePoints`` + ``CalculateRegionOfInterest``)."""
    left, right = eye_centres(aligned_landmarks[None])
    left, right = left[0], right[0]
    ied = float(distance(right - left))
    mid = c_round((left + right) / 2.0)
    mouth = c_round((aligned_landmarks[MOUTH_CENTER[0]] + aligned_landmarks[MOUTH_CENTER[1]])
                    / 2.0)
    eye_mouth = float(distance(mouth - mid))
    zone, dy = int(ied * 0.3), int(eye_mouth / 2)
    return ((int(left[0]), int(left[1]) + dy, zone),
            (int(right[0]) - zone, int(right[1]) + dy, zone))


def _zone(img: np.ndarray, z: tuple[int, int, int]) -> np.ndarray:
    """The zone's pixels; empty unless the whole zone lies inside the image (OpenCV's
    ``Mat(Rect)``, which OFIQ uses, refuses a rectangle that leaves the image)."""
    x, y, s = z
    if x < 0 or y < 0 or x + s > img.shape[1] or y + s > img.shape[0]:
        return img[:0, :0]
    return img[y:y + s, x:x + s]


def histogram_natives(lum: np.ndarray, region: np.ndarray) -> dict[str, float]:
    """Luminance mean, variance, exposure fractions and entropy over ``region``."""
    hist = np.bincount(lum[region], minlength=256).astype(np.float64)
    total = hist.sum()
    if total == 0:
        return {}
    p = hist / total
    mean = float(p @ _V)
    nz = p[p > 0]
    return {"LuminanceMean": mean, "LuminanceVariance": float(p @ (_V - mean) ** 2),
            "UnderExposurePrevention": float(p[:26].sum()),
            "OverExposurePrevention": float(p[247:].sum()),
            "DynamicRange": float(-(nz * np.log2(nz)).sum())}


def pixel_natives(aligned: np.ndarray, footprint: np.ndarray,
                  aligned_landmarks: np.ndarray) -> tuple[dict[str, float], str]:
    """Native values of :data:`PIXEL_COMPONENTS` for one aligned face (RGB uint8, FRAME
    square), the crop's footprint in it and its whole-pixel landmarks; missing components
    are left out and the message says why."""
    region, coverage = face_region(aligned_landmarks, footprint)
    lum = np.zeros(region.shape, np.uint8)  # only the region's bounding box is needed
    rows, cols = np.flatnonzero(region.any(1)), np.flatnonzero(region.any(0))
    if len(rows):
        box = (slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1))
        lum[box] = luminance(aligned[box])
    out = histogram_natives(lum, region)
    notes = []
    if coverage < 0.9:
        notes.append(f"the facenet crop holds {coverage:.0%} of the landmarked region")
    coloured = is_coloured(aligned)
    if not coloured:  # NaturalColour.cpp: a grey face gets D = 0 (quality 100), no zones
        out["NaturalColour"] = 0.0
    masked = np.where(region, lum, 0).astype(np.uint8)
    zl, zr = cheek_zones(aligned_landmarks)
    left, right = _zone(masked, zl), _zone(masked, zr)
    if left.size == 0 or right.size == 0:
        notes.append(("IlluminationUniformity, NaturalColour" if coloured
                      else "IlluminationUniformity") + ": a cheek zone lies outside the "
                     "aligned face")
        return out, "; ".join(notes)
    hl = np.bincount(left.ravel(), minlength=256) / left.size
    hr = np.bincount(right.ravel(), minlength=256) / right.size
    out["IlluminationUniformity"] = float(np.minimum(hl, hr).sum())
    if coloured:
        rgb = np.where(region[..., None], aligned, 0)
        both = np.concatenate([_zone(rgb, zr).reshape(-1, 3), _zone(rgb, zl).reshape(-1, 3)])
        out["NaturalColour"] = natural_colour_native(*lab_ab(both.mean(0)))
    return out, "; ".join(notes)


def align_face(crop: np.ndarray, crop_to_frame: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The aligned face (FRAME square, bilinear, black outside) of an RGB crop under the
    2x3 crop -> frame matrix, and the crop's footprint (uint8 0/1) in the frame."""
    m = np.asarray(crop_to_frame, dtype=np.float64)
    aligned = cv2.warpAffine(crop, m, (FRAME, FRAME), flags=cv2.INTER_LINEAR,
                             borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    ones = np.ones(crop.shape[:2], np.uint8)
    footprint = cv2.warpAffine(ones, m, (FRAME, FRAME), flags=cv2.INTER_NEAREST,
                               borderMode=cv2.BORDER_CONSTANT, borderValue=0)
    return aligned, footprint
