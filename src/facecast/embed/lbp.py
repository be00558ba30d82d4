"""A classical, weight-free baseline: uniform LBP histograms + Hellinger + PCA whitening.

Features (batched numpy, no per-image Python loop): grey levels of the ArcFace crop;
for each radius ``r`` the 8-neighbour LBP code on the square ring at distance ``r``
(integer offsets, no interpolation: the original Ojala operator); codes mapped to the 59
non-rotation-invariant uniform labels (58 uniform patterns + one bin for the rest);
label histograms on a ``grid`` x ``grid`` cell grid, each L1-normalised and square-rooted
(Hellinger map, so the dot product of two features is the Bhattacharyya coefficient).

PCA whitening (:func:`fit_whitening`) is fitted on the training split in a separate job
and stored as an ``.npz`` (no pickles): ``mean``, ``projection`` (F x k whitening matrix),
``eigenvalues``. Centring on the training mean makes cosine scores zero-centred (impostor
mean near 0); whitening gives every retained direction unit variance.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from facecast.atomic import atomic_path
from facecast.embed.base import Embedder, missing_weights

N_LABELS = 59
#: 8 neighbour directions (dy, dx), counter-clockwise from the right
DIRECTIONS = ((0, 1), (-1, 1), (-1, 0), (-1, -1), (0, -1), (1, -1), (1, 0), (1, 1))


def _uniform_lut() -> np.ndarray:
    """256 -> 59 lookup: each uniform code (<= 2 circular 0/1 transitions) its own label."""
    lut = np.full(256, N_LABELS - 1, dtype=np.int64)
    label = 0
    for code in range(256):
        bits = [(code >> k) & 1 for k in range(8)]
        transitions = sum(bits[k] != bits[(k + 1) % 8] for k in range(8))
        if transitions <= 2:
            lut[code] = label
            label += 1
    assert label == N_LABELS - 1
    return lut


UNIFORM_LUT = _uniform_lut()


def to_gray(crops: np.ndarray) -> np.ndarray:
    """uint8 RGB ``(N, H, W, 3)`` -> float32 luma ``(N, H, W)`` (ITU-R 601 weights)."""
    w = np.array([0.299, 0.587, 0.114], np.float32)
    return np.asarray(crops, np.float32) @ w


def lbp_codes(gray: np.ndarray, radius: int) -> np.ndarray:
    """Uniform LBP labels ``(N, H - 2r, W - 2r)`` (0..58) of a batch of grey images."""
    r = int(radius)
    n, h, w = gray.shape
    centre = gray[:, r:h - r, r:w - r]
    code = np.zeros(centre.shape, np.uint8)
    for k, (dy, dx) in enumerate(DIRECTIONS):
        nb = gray[:, r + r * dy:h - r + r * dy, r + r * dx:w - r + r * dx]
        code |= (nb >= centre).astype(np.uint8) << k
    return UNIFORM_LUT[code]


def grid_histograms(labels: np.ndarray, grid: int) -> np.ndarray:
    """Per-cell label histograms ``(N, grid*grid*59)``, each cell L1-normalised, sqrt-mapped."""
    n, h, w = labels.shape
    cy = np.minimum(np.arange(h) * grid // h, grid - 1)
    cx = np.minimum(np.arange(w) * grid // w, grid - 1)
    cell = (cy[:, None] * grid + cx[None, :])  # (h, w)
    n_bins = grid * grid * N_LABELS
    flat = (np.arange(n)[:, None, None] * n_bins + cell[None] * N_LABELS + labels).ravel()
    hist = np.bincount(flat, minlength=n * n_bins).reshape(n, grid * grid, N_LABELS)
    hist = hist.astype(np.float32)
    hist /= np.maximum(hist.sum(axis=2, keepdims=True), 1.0)
    return np.sqrt(hist).reshape(n, n_bins)


def lbp_features(crops: np.ndarray, radii: Iterable[int] = (1, 2), grid: int = 7) -> np.ndarray:
    """Hellinger-mapped uniform-LBP grid histograms of uint8 RGB crops ``(N, H, W, 3)``."""
    gray = to_gray(crops)
    return np.concatenate([grid_histograms(lbp_codes(gray, r), grid) for r in radii], axis=1)


def feature_dim(radii: Iterable[int], grid: int) -> int:
    """Length of :func:`lbp_features` vectors."""
    return len(list(radii)) * grid * grid * N_LABELS


class CovarianceAccumulator:
    """Streaming mean and covariance (float64) of feature batches, for PCA on big splits."""

    def __init__(self, dim: int) -> None:
        self.n = 0
        self.total = np.zeros(dim, np.float64)
        self.outer = np.zeros((dim, dim), np.float64)

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x, np.float64)
        self.n += len(x)
        self.total += x.sum(0)
        self.outer += x.T @ x

    def mean_cov(self) -> tuple[np.ndarray, np.ndarray]:
        if self.n < 2:
            raise ValueError(f"PCA whitening needs at least 2 training faces, got {self.n}")
        mean = self.total / self.n
        cov = (self.outer - self.n * np.outer(mean, mean)) / (self.n - 1)
        return mean, cov


def fit_whitening(acc: CovarianceAccumulator, pca_dim: int = 128,
                  eps: float = 1e-3) -> dict[str, np.ndarray]:
    """PCA whitening from accumulated statistics.

    Keeps ``min(pca_dim, n - 1)`` leading directions; each is scaled by
    ``1 / sqrt(eigenvalue + eps * mean retained eigenvalue)`` (the floor keeps
    near-degenerate directions from being blown up). Eigenvector signs are fixed (largest
    entry positive) so the result is deterministic.
    """
    mean, cov = acc.mean_cov()
    evals, evecs = np.linalg.eigh(cov)
    order = np.argsort(evals)[::-1]
    k = int(max(1, min(pca_dim, acc.n - 1, len(evals))))
    evals = np.clip(evals[order[:k]], 0.0, None)
    evecs = evecs[:, order[:k]]
    signs = np.sign(evecs[np.abs(evecs).argmax(0), np.arange(k)])
    evecs = evecs * np.where(signs == 0, 1.0, signs)
    floor = eps * float(evals.mean()) if evals.size else 0.0
    projection = evecs / np.sqrt(evals + floor + 1e-12)
    return {"mean": mean.astype(np.float32), "projection": projection.astype(np.float32),
            "eigenvalues": evals.astype(np.float32), "n_train": np.int64(acc.n)}


def save_fit(path: str | os.PathLike, fit: dict[str, np.ndarray], radii: Iterable[int],
             grid: int) -> Path:
    """Write a whitening fit (plus the feature settings it belongs to) as a plain ``.npz``."""
    path = Path(path)
    with atomic_path(path) as tmp:
        np.savez(tmp, radii=np.asarray(list(radii), np.int64), grid=np.int64(grid), **fit)
    return path


def load_fit(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read a whitening fit written by :func:`save_fit` (``allow_pickle=False``)."""
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


class LBPEmbedder(Embedder):
    """LBP baseline; ``weights`` is the whitening fit (``fit.npz``) of the dataset."""

    backend = "lbp"

    def __init__(self, name: str, weights: str | None = None, radii: Iterable[int] = (1, 2),
                 grid: int = 7, device: torch.device | None = None, amp: str = "none",
                 **_fit_options: Any) -> None:
        super().__init__(name, torch.device("cpu"), "none")
        self.radii = [int(r) for r in radii]
        self.grid = int(grid)
        self.crop_column = "crop_arcface"
        self.fit: dict[str, np.ndarray] | None = None
        self.dim = feature_dim(self.radii, self.grid)
        if weights is not None:
            if not Path(weights).is_file():
                raise missing_weights(weights, name, "The LBP whitening is fitted by the "
                                      "pipeline (rule embed_fit); run it first, or point "
                                      "weights at a fit.npz.")
            fit = load_fit(weights)
            if list(fit["radii"]) != self.radii or int(fit["grid"]) != self.grid:
                raise ValueError(f"{weights} was fitted for radii {list(fit['radii'])}, grid "
                                 f"{int(fit['grid'])}; the config says {self.radii}, {self.grid}")
            self.fit = fit
            self.weights_path = str(weights)
            self.dim = int(fit["projection"].shape[1])

    def features(self, crops: torch.Tensor | np.ndarray) -> np.ndarray:
        """Un-whitened Hellinger LBP features (what the fit is computed on)."""
        arr = crops.numpy() if isinstance(crops, torch.Tensor) else np.asarray(crops)
        return lbp_features(arr, self.radii, self.grid)

    def embed(self, crops: torch.Tensor) -> np.ndarray:
        feats = self.features(crops)
        if self.fit is None:
            return feats
        return (feats - self.fit["mean"]) @ self.fit["projection"]

    def provenance(self) -> dict[str, Any]:
        extra = {"radii": self.radii, "grid": self.grid}
        if self.fit is not None:
            extra["n_train"] = int(self.fit["n_train"])
        return {**super().provenance(), **extra}
