"""Face alignment: 5-point similarity warp to the ArcFace template, facenet margin crops.

Coordinates are in pixel-index convention (pixel ``i`` has its centre at ``i``), the same
convention as MTCNN landmarks and OpenCV's ``warpAffine`` used by insightface, so crops
match the reference preprocessing. Warping uses Pillow's affine transform (C, bilinear,
no float copy of the image: ~0.1 ms per 112x112 crop); when the face is more than twice
the crop size, the face region is first box-reduced by an integer factor so the bilinear
sampling does not alias.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection

import numpy as np
from PIL import Image

#: The standard insightface/ArcFace 5-point template for 112x112 crops (x, y): left eye,
#: right eye, nose tip, left mouth corner, right mouth corner (image left/right).
ARCFACE_TEMPLATE_112 = np.array(
    [[38.2946, 51.6963],
     [73.5318, 51.5014],
     [56.0252, 71.7366],
     [41.5493, 92.3655],
     [70.7299, 92.2041]], dtype=np.float32)

#: facenet-pytorch's LFW evaluation margin (pixels of the final 160 px crop).
FACENET_MARGIN = 14


def similarity_transform(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Least-squares similarity transform (Umeyama 1991) mapping ``src`` points onto ``dst``.

    ``src`` and ``dst`` are Nx2 (N >= 2). Returns the 2x3 float64 matrix ``M`` such that
    ``dst ~= src @ M[:, :2].T + M[:, 2]`` (rotation, uniform scale, translation; no
    reflection). Raises ``ValueError`` for degenerate input (all source points equal,
    non-finite values, mismatched shapes).
    """
    src = np.asarray(src, dtype=np.float64)
    dst = np.asarray(dst, dtype=np.float64)
    if src.ndim != 2 or src.shape[1] != 2 or src.shape != dst.shape or len(src) < 2:
        raise ValueError(f"need two Nx2 point sets (N >= 2), got {src.shape} and {dst.shape}")
    if not (np.isfinite(src).all() and np.isfinite(dst).all()):
        raise ValueError("landmarks contain NaN or infinite values")
    n = len(src)
    mu_s, mu_d = src.mean(axis=0), dst.mean(axis=0)
    sc, dc = src - mu_s, dst - mu_d
    var_s = (sc ** 2).sum() / n
    if var_s <= 1e-12:
        raise ValueError("degenerate landmarks: all source points coincide")
    cov = dc.T @ sc / n
    u, s, vt = np.linalg.svd(cov)
    d = np.ones(2)
    if np.linalg.det(u) * np.linalg.det(vt) < 0:
        d[-1] = -1.0
    rot = u @ np.diag(d) @ vt
    scale = float((s * d).sum() / var_s)
    t = mu_d - scale * rot @ mu_s
    return np.hstack([scale * rot, t[:, None]])


def invert_affine(m: np.ndarray) -> np.ndarray:
    """Inverse of a 2x3 affine matrix (as a 2x3 matrix)."""
    a = np.asarray(m, dtype=np.float64)[:, :2]
    inv = np.linalg.inv(a)
    return np.hstack([inv, -inv @ np.asarray(m, dtype=np.float64)[:, 2:]])


def compose_affine(outer: np.ndarray, inner: np.ndarray) -> np.ndarray:
    """The 2x3 affine ``x -> outer(inner(x))``."""
    outer = np.asarray(outer, dtype=np.float64)
    inner = np.asarray(inner, dtype=np.float64)
    return np.hstack([outer[:, :2] @ inner[:, :2], outer[:, :2] @ inner[:, 2:] + outer[:, 2:]])


def warp_affine(image: np.ndarray, m: np.ndarray, size: tuple[int, int]) -> np.ndarray:
    """Warp ``image`` (HxWx3 uint8) by the 2x3 matrix ``m`` (image -> output, index coords).

    Returns an ``size = (width, height)`` uint8 image; output pixels that map outside the
    image are black (like ``cv2.warpAffine`` with a constant border). Bilinear sampling;
    if ``m`` shrinks by 2x or more the source region is first box-reduced by that integer
    factor (antialiasing).
    """
    image = np.asarray(image)
    out_w, out_h = int(size[0]), int(size[1])
    inv = invert_affine(m)  # output index -> image index
    shrink = math.sqrt(abs(np.linalg.det(inv[:, :2])))  # source pixels per output pixel
    k = max(1, int(shrink // 1))
    # only the source region under the output (corners mapped back, plus a margin) is
    # handed to Pillow, so the cost does not grow with the image size
    corners = np.array([[0, 0], [out_w - 1, 0], [0, out_h - 1], [out_w - 1, out_h - 1]],
                       dtype=np.float64)
    src = corners @ inv[:, :2].T + inv[:, 2]
    h, w = image.shape[:2]
    x0 = int(min(max(0, math.floor(src[:, 0].min()) - 2 * k), w - 1))
    y0 = int(min(max(0, math.floor(src[:, 1].min()) - 2 * k), h - 1))
    x1 = int(max(min(w, math.ceil(src[:, 0].max()) + 2 * k + 1), x0 + 1))
    y1 = int(max(min(h, math.ceil(src[:, 1].max()) + 2 * k + 1), y0 + 1))
    region = image[y0:y1, x0:x1]
    if (src[:, 0].max() < 0 or src[:, 1].max() < 0 or src[:, 0].min() > w - 1
            or src[:, 1].min() > h - 1):
        return np.zeros((out_h, out_w, *image.shape[2:]), np.uint8)  # entirely outside
    pil = Image.fromarray(np.ascontiguousarray(region))
    if k >= 2 and region.shape[0] >= k and region.shape[1] >= k:
        # box-reduce by k first (antialiasing); reduced pixel r averages source pixels
        # x0 + k*r .. x0 + k*r + k-1, centred at x0 + k*r + (k-1)/2
        pil = pil.reduce(k)
        to_local = np.array([[1.0 / k, 0.0, -(x0 + (k - 1) / 2) / k],
                             [0.0, 1.0 / k, -(y0 + (k - 1) / 2) / k]])
    else:
        to_local = np.array([[1.0, 0.0, -x0], [0.0, 1.0, -y0]])
    inv = compose_affine(to_local, inv)
    # Pillow samples at pixel centres (i + 0.5): conjugate the index-convention matrix
    a = inv[:, :2]
    t = inv[:, 2] + 0.5 - a @ np.array([0.5, 0.5])
    coeffs = (a[0, 0], a[0, 1], t[0], a[1, 0], a[1, 1], t[1])
    out = pil.transform((out_w, out_h), Image.Transform.AFFINE, coeffs,
                        resample=Image.Resampling.BILINEAR, fillcolor=(0, 0, 0))
    return np.asarray(out)


def arcface_template(size: int = 112) -> np.ndarray:
    """The ArcFace template scaled to a ``size`` x ``size`` crop (5x2 float32)."""
    return (ARCFACE_TEMPLATE_112 * (size / 112.0)).astype(np.float32)


def align_arcface(image: np.ndarray, landmarks5x2: np.ndarray, size: int = 112) -> np.ndarray:
    """Align a face to the ArcFace template: ``size`` x ``size`` x 3 uint8 RGB.

    ``landmarks5x2`` are image pixels (x, y) of left eye, right eye, nose, left and right
    mouth corner. The similarity transform is the least-squares fit of the landmarks onto
    the template (insightface's ``norm_crop``). Raises ``ValueError`` on degenerate landmarks.
    """
    m = similarity_transform(np.asarray(landmarks5x2, dtype=np.float64).reshape(5, 2),
                             arcface_template(size))
    return warp_affine(image, m, (size, size))


def facenet_box(bbox: np.ndarray, image_wh: tuple[int, int], size: int = 160,
                margin: float = FACENET_MARGIN) -> tuple[int, int, int, int]:
    """facenet-pytorch's crop box: ``bbox`` grown by ``margin`` output pixels, clipped, int."""
    x1, y1, x2, y2 = (float(v) for v in np.asarray(bbox, dtype=np.float64).reshape(4))
    mx = margin * (x2 - x1) / (size - margin)
    my = margin * (y2 - y1) / (size - margin)
    w, h = image_wh
    box = [int(max(x1 - mx / 2, 0)), int(max(y1 - my / 2, 0)),
           int(min(x2 + mx / 2, w)), int(min(y2 + my / 2, h))]
    # a box that collapses (face at the very border) still yields one pixel
    box[0], box[1] = min(box[0], w - 1), min(box[1], h - 1)
    box[2], box[3] = max(box[2], box[0] + 1), max(box[3], box[1] + 1)
    return box[0], box[1], box[2], box[3]


def crop_facenet(image: np.ndarray, bbox: np.ndarray, size: int = 160,
                 margin: float = FACENET_MARGIN) -> np.ndarray:
    """facenet-pytorch style crop: ``size`` x ``size`` x 3 uint8 of ``bbox`` plus margin.

    Matches ``facenet_pytorch.models.utils.detect_face.extract_face`` on a PIL image: the box
    (x1, y1, x2, y2, image pixels) is grown by ``margin`` pixels *of the output crop*,
    clipped to the image, truncated to integers and resized bilinearly (antialiased) to a
    square, without keeping the aspect ratio.
    """
    image = np.asarray(image)
    h, w = image.shape[:2]
    x1, y1, x2, y2 = facenet_box(bbox, (w, h), size, margin)
    region = np.ascontiguousarray(image[y1:y2, x1:x2])  # same pixels as PIL's crop(box)
    out = Image.fromarray(region).resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(out)


def center_square_box(width: int, height: int, fraction: float) -> np.ndarray:
    """The centred square (x1, y1, x2, y2) of side ``fraction * min(width, height)``."""
    side = fraction * min(width, height)
    cx, cy = width / 2.0, height / 2.0
    return np.array([cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2], np.float32)


def crop_box_resized(image: np.ndarray, box: np.ndarray, size: int) -> np.ndarray:
    """Crop ``box`` (x1, y1, x2, y2; float, may be fractional) and resize to ``size`` square."""
    image = np.asarray(image)
    h, w = image.shape[:2]
    x0 = int(min(max(0, math.floor(box[0])), w - 1))
    y0 = int(min(max(0, math.floor(box[1])), h - 1))
    x1 = int(max(min(w, math.ceil(box[2])), x0 + 1))
    y1 = int(max(min(h, math.ceil(box[3])), y0 + 1))
    local = (float(box[0]) - x0, float(box[1]) - y0, float(box[2]) - x0, float(box[3]) - y0)
    region = np.ascontiguousarray(image[y0:y1, x0:x1])
    out = Image.fromarray(region).resize((size, size), Image.Resampling.BILINEAR, box=local)
    return np.asarray(out)


def face_crops(image: np.ndarray, landmarks5x2: np.ndarray, bbox: np.ndarray,
               crops: Collection[str], facenet_margin: float,
               encode: Callable[[np.ndarray], bytes]) -> dict[str, bytes]:
    """The crops named in ``crops`` of one face, encoded: ``crop_arcface`` (112 px, aligned
    by the five landmarks) and ``crop_facenet`` (160 px, cut around ``bbox``).

    Raises ValueError when the landmarks cannot be aligned.
    """
    out: dict[str, bytes] = {}
    if "arcface" in crops:
        out["crop_arcface"] = encode(align_arcface(image, landmarks5x2, 112))
    if "facenet" in crops:
        out["crop_facenet"] = encode(crop_facenet(image, bbox, 160, facenet_margin))
    return out
