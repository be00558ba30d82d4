"""Batched 5-point similarity alignment for attribute models.

The faces stage stores a 112x112 crop aligned to the ArcFace template. Attribute models
want their own framing (dlib's face chips for the age/gender and FairFace models), so
this module re-maps the five landmarks into crop pixels and warps a whole batch of crops
to another template in one ``torch.nn.functional.grid_sample`` call.
"""

from __future__ import annotations

import numpy as np

# The standard insightface ArcFace 112x112 template: left eye, right eye, nose tip,
# left mouth corner, right mouth corner (image left/right), in pixels.
ARCFACE_TEMPLATE_112 = np.array(
    [[38.2946, 51.6963], [73.5318, 51.5014], [56.0252, 71.7366],
     [41.5493, 92.3655], [70.7299, 92.2041]], dtype=np.float64)

# dlib's mean face shape (points 17-67 of the 68-point model, unit square) at the
# positions of the five MTCNN-style landmarks: eye centres (mean of the two corners),
# nose tip (point 30) and mouth corners (points 48, 54).
DLIB_MEAN_5 = np.array(
    [[0.224152, 0.2119465], [0.75610125, 0.2119465], [0.490127, 0.515625],
     [0.254149, 0.780233], [0.726104, 0.780233]], dtype=np.float64)


def dlib_chip_template(size: int, padding: float) -> np.ndarray:
    """Five landmark positions (5x2 pixels) of a dlib ``get_face_chip_details`` chip."""
    return (padding + DLIB_MEAN_5) / (2.0 * padding + 1.0) * size


def similarity_batch(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Least-squares similarity transforms (Umeyama, no reflection) mapping src to dst.

    ``src``: (N, K, 2) points; ``dst``: (K, 2) or (N, K, 2). Returns (N, 2, 3) matrices
    ``A`` with ``dst ~ A[:, :, :2] @ p + A[:, :, 2]``. Rows whose points are not finite or
    degenerate get NaN matrices.
    """
    src = np.asarray(src, dtype=np.float64)
    dst = np.broadcast_to(np.asarray(dst, dtype=np.float64), src.shape)
    mu_s, mu_d = src.mean(1, keepdims=True), dst.mean(1, keepdims=True)
    s0, d0 = src - mu_s, dst - mu_d
    var_s = (s0 ** 2).sum((1, 2)) / src.shape[1]
    cov = np.einsum("nki,nkj->nij", d0, s0) / src.shape[1]  # (N, 2, 2) dst x src
    out = np.full((src.shape[0], 2, 3), np.nan)
    good = np.isfinite(cov).all((1, 2)) & (var_s > 1e-12)
    if not good.any():
        return out
    u, sig, vt = np.linalg.svd(cov[good])
    d = np.ones((good.sum(), 2))
    d[np.linalg.det(u) * np.linalg.det(vt) < 0, 1] = -1.0
    rot = u @ (d[:, :, None] * vt)
    scale = (sig * d).sum(1) / var_s[good]
    lin = scale[:, None, None] * rot
    t = mu_d[good, 0] - np.einsum("nij,nj->ni", lin, mu_s[good, 0])
    out[good, :, :2] = lin
    out[good, :, 2] = t
    return out


def apply_affine(mats: np.ndarray, pts: np.ndarray) -> np.ndarray:
    """Apply (N, 2, 3) affine matrices to (N, K, 2) points."""
    return np.einsum("nij,nkj->nki", mats[:, :, :2], pts) + mats[:, None, :, 2]


def landmarks_in_arcface_crop(landmarks: np.ndarray, crop_size: int = 112) -> np.ndarray:
    """Map image-pixel landmarks (N, 5, 2) into the ArcFace crop they were aligned to."""
    template = ARCFACE_TEMPLATE_112 * (crop_size / 112.0)
    return apply_affine(similarity_batch(landmarks, template), landmarks)


def warp_batch(images: np.ndarray, src_pts: np.ndarray, dst_pts: np.ndarray,
               size: int) -> np.ndarray:
    """Warp each image so that its ``src_pts`` land on ``dst_pts`` of a size x size chip.

    ``images``: (N, H, W, 3) uint8; ``src_pts``: (N, K, 2) pixel coordinates in the images;
    ``dst_pts``: (K, 2) chip pixel coordinates. Bilinear sampling after an antialiased
    pre-resize (so strong downscaling does not alias); outside pixels are black.
    Rows with invalid points come back black. Returns (N, size, size, 3) uint8.
    """
    import torch  # here: the landmark helpers above serve torch-free jobs (native scores)
    import torch.nn.functional as F

    n, h, w = images.shape[:3]
    if n == 0:
        return np.zeros((0, size, size, 3), np.uint8)
    # chip -> image transforms
    inv = similarity_batch(np.broadcast_to(dst_pts, src_pts.shape), src_pts)
    bad = ~np.isfinite(inv).all((1, 2))
    inv[bad] = np.array([[1e6, 0, 0], [0, 1e6, 0]])  # samples far outside -> zeros
    scale = float(np.nanmedian(np.hypot(inv[~bad, 0, 0], inv[~bad, 1, 0]))) if (~bad).any() else 1.0
    x = torch.from_numpy(np.require(images, requirements=['C', 'W'])).permute(0, 3, 1, 2).float()
    if scale > 1.5:  # chip pixels span several image pixels: low-pass first
        x = F.interpolate(x, size=(max(2, round(h / scale)), max(2, round(w / scale))),
                          mode="bilinear", antialias=True, align_corners=False)
    ys, xs = np.meshgrid(np.arange(size, dtype=np.float64), np.arange(size, dtype=np.float64),
                         indexing="ij")
    grid_pts = np.stack([xs.ravel(), ys.ravel()], 1)  # (P, 2) chip pixel centres
    img_pts = apply_affine(inv, np.broadcast_to(grid_pts, (n, *grid_pts.shape)))
    # pixel centre coordinates -> normalised [-1, 1] (align_corners=False)
    gx = (img_pts[..., 0] + 0.5) / w * 2 - 1
    gy = (img_pts[..., 1] + 0.5) / h * 2 - 1
    grid = torch.from_numpy(np.stack([gx, gy], -1).reshape(n, size, size, 2)).float()
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return out.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).numpy()
