"""dlib chips resampled on the embedder's device, equal to the CPU path's chips bit for bit.

The CPU path (:func:`facecast.embed.dlib_resnet.arcface_to_dlib_chips`) is PyTorch's CPU
``grid_sample`` (bilinear, border padding, ``align_corners=False``), rounded half to even
and clamped to uint8. That kernel fuses multiply-adds: per output pixel it computes

    x = fma(gx + 1, S / 2, -0.5), clamped to [0, S - 1] (same for y)
    w = x - floor(x), e = 1 - w, n = y - floor(y), s = 1 - n
    value = fma(v_se, n*w, fma(v_sw, n*e, fma(v_ne, s*w, v_nw * (s*e))))

(measured: this formula reproduces its float32 output exactly, and ``tests/test_embed_dlib_
chips.py`` keeps it so). That is ATen's vectorised CPU kernel (AVX2/AVX-512, any x86-64 CPU
since ~2013); forced to its scalar build (``ATEN_CPU_CAPABILITY=default``) the CPU kernel
does not fuse, its own chips move, and those tests fail and say so. A plain float32 ``a*b + c`` rounds twice where an FMA rounds once,
so a naive torch port differs from it by up to ~1e-4 and, once in a few thousand values, in
the uint8 chip. :func:`device_chips` therefore

1. precomputes the per-pixel corner indices and weights once (on the CPU, float64 with the
   FMA emulated exactly; :class:`ChipPlan`), for the one fixed grid every crop shares,
2. computes the sum in plain float32 on the device (fast, memory-bound: it reads the uint8
   corners and writes float32 once per term),
3. recomputes exactly (FMA emulated in float64 with round-to-odd, :func:`fma32`) only the
   values within :data:`TIE_BAND` of a rounding boundary ``k + 0.5``: outside it the plain
   and fused sums round to the same integer, because they differ by at most 7 roundings
   of half an ulp at 256 (7 x 2^-17 ~ 5.4e-5 each way, far inside ``TIE_BAND``).

The float64 operations are each one torch kernel (no contraction across them), so the
result is the same on any device with IEEE float64: CUDA equals CPU equals the CPU path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

#: plain-float32 sums this close to ``k + 0.5`` are recomputed with the exact fused formula
TIE_BAND = 2.0 ** -10


def fma32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``round_to_float32(a * b + c)`` with one rounding (a fused multiply-add), for float32
    tensors, on any device: the product is exact in float64, TwoSum gives the float64 sum's
    error, and rounding the sum to odd before float32 makes the double rounding exact."""
    p = a.double() * b.double()
    c = c.double()
    s = p + c
    z = s - p
    err = (p - (s - z)) + (c - z)  # s + err == p + c exactly (Knuth's TwoSum)
    toward = torch.where(err > 0, torch.inf, -torch.inf).to(s)
    other = torch.nextafter(s, toward)  # the other float64 neighbour of p + c
    even = (s.view(torch.int64) & 1) == 0
    return torch.where((err != 0) & even, other, s).float()


@dataclass(frozen=True)
class ChipPlan:
    """Where each chip pixel reads the crop: ``index`` (4, P) flat crop pixels of the nw,
    ne, sw, se corners and ``weight`` (4, P, 1) float32 weights, as the CPU kernel has them;
    ``size`` the crop side, ``chip`` the chip side."""

    index: torch.Tensor
    weight: torch.Tensor
    size: int
    chip: int

    def to(self, device: torch.device) -> ChipPlan:
        return ChipPlan(self.index.to(device), self.weight.to(device), self.size, self.chip)


def chip_plan(grid: torch.Tensor, size: int) -> ChipPlan:
    """The :class:`ChipPlan` of a ``grid_sample`` grid ``(1, chip, chip, 2)`` (float32) over
    ``size`` x ``size`` crops, computed on the CPU."""
    g = grid[0].double().numpy()
    chip = int(grid.shape[1])

    def unnormalize(coord: np.ndarray) -> np.ndarray:
        t = (coord.astype(np.float32) + np.float32(1)).astype(np.float64)
        # exact in float64 (t * size/2 has <= 30 significant bits), one rounding to float32
        return np.clip((t * (size / 2) - 0.5).astype(np.float32), 0, size - 1)

    x, y = unnormalize(g[..., 0]).ravel(), unnormalize(g[..., 1]).ravel()
    xw, yn = np.floor(x), np.floor(y)
    w, n = x - xw, y - yn  # exact (Sterbenz)
    e, s = np.float32(1) - w, np.float32(1) - n
    weight = np.stack([s * e, s * w, n * e, n * w]).astype(np.float32)[..., None]
    xi, yi = xw.astype(np.int64), yn.astype(np.int64)
    xe, ys = np.minimum(xi + 1, size - 1), np.minimum(yi + 1, size - 1)
    index = np.stack([yi * size + xi, yi * size + xe, ys * size + xi, ys * size + xe])
    return ChipPlan(torch.from_numpy(index), torch.from_numpy(weight), size, chip)


def _exact(values: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The CPU kernel's fused sum of ``values`` (4, M) float32 with ``weight`` (4, M)."""
    acc = values[0] * weight[0]
    for k in (1, 2, 3):
        acc = fma32(values[k], weight[k], acc)
    return acc


def device_chips(crops: torch.Tensor, plan: ChipPlan) -> torch.Tensor:
    """uint8 crops ``(N, S, S, 3)`` -> uint8 dlib chips ``(N, chip, chip, 3)`` on the crops'
    device, equal to :func:`~facecast.embed.dlib_resnet.arcface_to_dlib_chips` bit for bit
    (``plan`` on the same device, of the same grid)."""
    n, size = int(crops.shape[0]), plan.size
    if crops.shape[1:] != (size, size, 3) or crops.dtype != torch.uint8:
        raise ValueError(f"device_chips needs uint8 crops (N, {size}, {size}, 3), got "
                         f"{tuple(crops.shape)} {crops.dtype}")
    pixels = plan.index.shape[1]
    flat = crops.reshape(n, size * size, 3)
    # uint8 corners; each product promotes to float32 in its own kernel (uint8 -> float32
    # is exact), then one rounding per product and per sum, as written
    corner = flat.index_select(1, plan.index.reshape(-1)).view(n, 4, pixels, 3)
    weight = plan.weight
    acc = corner[:, 0] * weight[0] + corner[:, 1] * weight[1]
    acc += corner[:, 2] * weight[2]
    acc += corner[:, 3] * weight[3]
    tie = (acc.frac() - 0.5).abs_() < TIE_BAND  # acc >= 0: frac() is the part past floor
    img, pix, ch = tie.nonzero(as_tuple=True)
    if len(img):
        acc[img, pix, ch] = _exact(corner[img, :, pix, ch].T.float(), weight[:, pix, 0])
    out = acc.round_().clamp_(0, 255).to(torch.uint8)
    return out.view(n, plan.chip, plan.chip, 3)
