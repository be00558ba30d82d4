"""Drawing primitives of the synthetic faces: signed distances, soft masks, shading, the
background and skin textures, and the face-frame canvas that features are painted on.

Everything works in face units (u right, v down; the face half-width is 1) on numpy pixel
grids; :class:`Canvas` maps face units to pixels (scale, shift, roll) and
:class:`Region` is the pixel window of one feature. The layers of
:mod:`facecast.datasets.synthetic.layers` paint the face with these, in the order
:mod:`facecast.datasets.synthetic.render` calls them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy.ndimage import gaussian_filter

__all__ = [
    "Canvas",
    "Region",
    "background",
    "dome_shade",
    "ellipse_dist",
    "foreshorten",
    "gauss",
    "normals",
    "segment_dist",
    "shade_normals",
    "skin_texture",
    "soft",
    "yaw_u",
]


def soft(dist: np.ndarray, px: float) -> np.ndarray:
    """Anti-aliased coverage of the region ``dist < 0`` (``dist`` in face units)."""
    return np.clip(0.5 - dist / px, 0.0, 1.0).astype(np.float32)


def ellipse_dist(u: np.ndarray, v: np.ndarray, cu: float, cv: float, a: float,
                 b: float) -> np.ndarray:
    """Approximate signed distance to an axis-aligned ellipse (negative inside)."""
    x = (u - cu) / a
    y = (v - cv) / b
    k = np.sqrt(x * x + y * y)
    grad = np.sqrt((x / a) ** 2 + (y / b) ** 2) / np.maximum(k, 1e-6)
    return (k - 1.0) / np.maximum(grad, 1e-6)


def segment_dist(u: np.ndarray, v: np.ndarray, a: tuple[float, float],
                 b: tuple[float, float]) -> np.ndarray:
    """Distance to the segment a-b (face units)."""
    du, dv = b[0] - a[0], b[1] - a[1]
    t = np.clip(((u - a[0]) * du + (v - a[1]) * dv) / max(du * du + dv * dv, 1e-9), 0.0, 1.0)
    return np.sqrt((u - a[0] - t * du) ** 2 + (v - a[1] - t * dv) ** 2)


def gauss(u: np.ndarray, v: np.ndarray, cu: float, cv: float, su: float,
          sv: float) -> np.ndarray:
    """Unnormalised Gaussian bump (peak 1) centred at (cu, cv) with sds su, sv (float32)."""
    return np.exp(-0.5 * (((u - cu) / su) ** 2 + ((v - cv) / sv) ** 2)).astype(np.float32)


def background(size: int, seed: int) -> np.ndarray:
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


def shade_normals(nx: np.ndarray, ny: np.ndarray, nz: np.ndarray, light: np.ndarray,
                   ambient: float = 0.38, spec: float = 0.10) -> np.ndarray:
    """Lambertian + Blinn specular shading of unit normals under ``light``."""
    ndl = np.clip(nx * light[0] + ny * light[1] + nz * light[2], 0.0, 1.0)
    half = light + np.array([0.0, 0.0, 1.0], np.float32)
    half = half / np.linalg.norm(half)
    ndh = np.clip(nx * half[0] + ny * half[1] + nz * half[2], 0.0, 1.0)
    return (ambient + (1.0 - ambient) * ndl + spec * ndh**24).astype(np.float32)


def normals(z: np.ndarray, px: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unit normals (face frame) of a depth map ``z`` sampled every ``px`` face units."""
    gy, gx = np.gradient(z, px)
    gx = np.clip(gx, -6.0, 6.0)
    gy = np.clip(gy, -6.0, 6.0)
    inv = 1.0 / np.sqrt(gx * gx + gy * gy + 1.0)
    return (-gx * inv).astype(np.float32), (-gy * inv).astype(np.float32), inv.astype(np.float32)


def dome_shade(u: np.ndarray, v: np.ndarray, cu: float, cv: float, a: float, b: float,
               light: np.ndarray, ambient: float, spec: float) -> np.ndarray:
    """Shading of an ellipsoidal dome (hair, hat) centred at (cu, cv) with semi-axes a, b."""
    x = (u - cu) / a
    y = (v - cv) / b
    nz = np.sqrt(np.clip(1.0 - x * x - y * y, 0.02, 1.0))
    norm = np.sqrt(x * x + y * y + nz * nz)
    return shade_normals(x / norm, y / norm, nz / norm, light, ambient=ambient, spec=spec)


def skin_texture(u0: np.ndarray, v: np.ndarray, seed: int) -> np.ndarray:
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


def yaw_u(u0: float, z0: float, yaw: float) -> float:
    """Image-plane u of a head point at (u0, depth z0) after turning the head by ``yaw``."""
    return u0 * math.cos(yaw) + z0 * math.sin(yaw)


def foreshorten(u0: float, yaw: float) -> float:
    """Horizontal scale of a small feature at u0 (face units) after a yaw turn."""
    phi = math.asin(max(-0.95, min(0.95, u0)))
    return float(np.clip(math.cos(phi + yaw) / math.cos(phi), 0.3, 1.2))


class Canvas:
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

    def region(self, u0: float, u1: float, v0: float, v1: float) -> Region:
        """The pixel window (clipped to the image) covering face rectangle [u0, u1] x [v0, v1]."""
        us = np.array([u0, u1, u1, u0])
        vs = np.array([v0, v0, v1, v1])
        xs = self.cx + self.ppu * (us * self.cr - vs * self.sr)
        ys = self.cy + self.ppu * (us * self.sr + vs * self.cr)
        x0 = int(np.clip(math.floor(xs.min()) - 1, 0, self.size))
        x1 = int(np.clip(math.ceil(xs.max()) + 2, 0, self.size))
        y0 = int(np.clip(math.floor(ys.min()) - 1, 0, self.size))
        y1 = int(np.clip(math.ceil(ys.max()) + 2, 0, self.size))
        return Region(self, slice(y0, y1), slice(x0, x1))


class Region:
    """A pixel window of a :class:`Canvas` with face coordinates ``u``, ``v``."""

    def __init__(self, canvas: Canvas, sy: slice, sx: slice):
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
        """The face coverage mask in this window (a view)."""
        return self.c.face[self.sl]

    @property
    def shade(self) -> np.ndarray:
        """The face shading in this window (a view)."""
        return self.c.shade[self.sl]

    def soft(self, dist: np.ndarray) -> np.ndarray:
        """Anti-aliased coverage of ``dist < 0`` at this canvas's pixel size."""
        return soft(dist, self.c.px)

    def paint(self, alpha: np.ndarray, colour: np.ndarray | Sequence[float]) -> None:
        """Alpha-composite ``colour`` (RGB or window-sized HxWx3) into the window."""
        if self.empty:
            return
        a = np.asarray(alpha, np.float32)[..., None]
        target = self.c.img[self.sl]
        target += a * (np.asarray(colour, dtype=np.float32) - target)

