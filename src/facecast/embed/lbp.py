"""A classical, weight-free baseline: uniform LBP histograms + Hellinger + PCA whitening.

Features (batched numpy, no per-image Python loop): grey levels of the ArcFace crop;
for each radius ``r`` the 8-neighbour LBP code on the square ring at distance ``r``
(integer offsets, no interpolation: the original Ojala operator); codes mapped to the 59
non-rotation-invariant uniform labels (58 uniform patterns + one bin for the rest);
label histograms on a ``grid`` x ``grid`` cell grid, each L1-normalised and square-rooted
(Hellinger map, so the dot product of two features is the Bhattacharyya coefficient).

PCA whitening (:func:`fit_whitening`) is fitted on the training split in a separate job
and stored as an ``.npz`` (no pickles): ``mean``, ``projection`` (F x k whitening matrix),
``eigenvalues``, ``whitening`` (``pca`` or ``none``). Centring on the training mean makes
cosine scores zero-centred (impostor mean near 0); whitening gives every retained
direction unit variance. A whitening fitted on too few faces (no more than ``pca_dim``) or
on the evaluated images themselves collapses every score towards ``-1/(n-1)``; then the
fit file says ``whitening = none`` with the reason, and the embedder returns the raw
Hellinger features (see :func:`facecast.embed.stage.fit_lbp`).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from facecast.embed.base import Embedder, missing_weights
from facecast.io.atomic import atomic_path

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
    """Streaming mean and second moments (float64) of feature batches, for PCA on big splits.

    While fewer rows than dimensions have arrived the rows themselves are kept (n x d is
    smaller than the d x d scatter matrix) so :func:`fit_whitening` can use the Gram trick;
    past that point they are folded into the d x d scatter matrix. Memory and fit cost so
    follow the data: O(n d) and one n x n eigendecomposition for a small train split.
    """

    def __init__(self, dim: int) -> None:
        self.dim = int(dim)
        self.n = 0
        self.total = np.zeros(dim, np.float64)
        self.outer: np.ndarray | None = None
        self.rows: list[np.ndarray] | None = []

    def update(self, x: np.ndarray) -> None:
        x = np.asarray(x, np.float64)
        if not len(x):
            return
        self.n += len(x)
        self.total += x.sum(0)
        if self.rows is not None and self.n < self.dim:
            self.rows.append(x)
            return
        if self.outer is None:
            self.outer = np.zeros((self.dim, self.dim), np.float64)
            for kept in self.rows or []:
                self.outer += kept.T @ kept
            self.rows = None
        self.outer += x.T @ x

    def _check(self) -> None:
        if self.n < 2:
            raise ValueError(f"PCA whitening needs at least 2 training faces, got {self.n}")

    def centred_rows(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(mean, centred rows)`` while the rows are still kept (n < dim), else None."""
        self._check()
        if self.rows is None:
            return None
        mean = self.total / self.n
        return mean, np.concatenate(self.rows) - mean

    def mean_cov(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and (n - 1)-normalised covariance (builds the d x d matrix if needed)."""
        self._check()
        mean = self.total / self.n
        if self.rows is not None:
            xc = np.concatenate(self.rows) - mean
            return mean, xc.T @ xc / (self.n - 1)
        cov = (self.outer - self.n * np.outer(mean, mean)) / (self.n - 1)
        return mean, cov


def _leading_eigen(acc: CovarianceAccumulator, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean, the ``k`` largest covariance eigenvalues (descending) and their eigenvectors.

    With n < d rows kept, the eigenvectors come from the n x n Gram matrix
    ``G = Xc Xc^T / (n - 1)``: if ``G u = l u`` then ``v = Xc^T u / sqrt(l (n - 1))`` is a
    unit eigenvector of the covariance with the same eigenvalue ``l``.
    """
    kept = acc.centred_rows()
    if kept is None:
        mean, cov = acc.mean_cov()
        evals, evecs = np.linalg.eigh(cov)
        order = np.argsort(evals)[::-1][:k]
        return mean, np.clip(evals[order], 0.0, None), evecs[:, order]
    mean, xc = kept
    evals, u = np.linalg.eigh(xc @ xc.T / (acc.n - 1))
    order = np.argsort(evals)[::-1][:k]
    evals, u = np.clip(evals[order], 0.0, None), u[:, order]
    evecs = xc.T @ u / np.sqrt(np.maximum(evals, 1e-300) * (acc.n - 1))
    evecs /= np.maximum(np.linalg.norm(evecs, axis=0), 1e-300)
    return mean, evals, evecs


def fit_whitening(acc: CovarianceAccumulator, pca_dim: int = 128,
                  eps: float = 1e-3) -> dict[str, np.ndarray]:
    """PCA whitening from accumulated statistics.

    Keeps ``min(pca_dim, n - 1)`` leading directions; each is scaled by
    ``1 / sqrt(eigenvalue + eps * mean retained eigenvalue)`` (the floor keeps
    near-degenerate directions from being blown up). Eigenvector signs are fixed (largest
    entry positive) so the result is deterministic. With fewer training rows than feature
    dimensions the fit goes through the Gram matrix (same result, cost set by n).
    """
    acc._check()
    k = int(max(1, min(pca_dim, acc.n - 1, acc.dim)))
    mean, evals, evecs = _leading_eigen(acc, k)
    signs = np.sign(evecs[np.abs(evecs).argmax(0), np.arange(k)])
    evecs = evecs * np.where(signs == 0, 1.0, signs)
    floor = eps * float(evals.mean()) if evals.size else 0.0
    projection = evecs / np.sqrt(evals + floor + 1e-12)
    return {"mean": mean.astype(np.float32), "projection": projection.astype(np.float32),
            "eigenvalues": evals.astype(np.float32), "n_train": np.int64(acc.n),
            "whitening": np.array("pca")}


def unwhitened_fit(dim: int, n_train: int, reason: str) -> dict[str, np.ndarray]:
    """A fit file that says "no whitening" (raw Hellinger LBP features) and why."""
    return {"mean": np.zeros(dim, np.float32), "projection": np.zeros((dim, 0), np.float32),
            "eigenvalues": np.zeros(0, np.float32), "n_train": np.int64(n_train),
            "whitening": np.array("none"), "reason": np.array(reason)}


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
    per_crop = True  # histograms per crop; the whitening projects row by row (embed)

    def __init__(self, name: str, weights: str | None = None, radii: Iterable[int] = (1, 2),
                 grid: int = 7, device: torch.device | None = None, amp: str = "none",
                 **_fit_options: Any) -> None:
        super().__init__(name, torch.device("cpu"), "none")
        self.radii = [int(r) for r in radii]
        self.grid = int(grid)
        self.crop_column = "crop_arcface"
        self.fit: dict[str, np.ndarray] | None = None
        self.whitening, self.whitening_reason, self.n_train = "none", "no fit loaded", 0
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
            self.weights_path = str(weights)
            self.whitening = str(fit.get("whitening", "pca"))
            self.whitening_reason = str(fit.get("reason", ""))
            if self.whitening == "pca":
                self.fit = fit
                self.dim = int(fit["projection"].shape[1])
            self.n_train = int(fit["n_train"])

    def features(self, crops: torch.Tensor | np.ndarray) -> np.ndarray:
        """Un-whitened Hellinger LBP features (what the fit is computed on)."""
        arr = crops.numpy() if isinstance(crops, torch.Tensor) else np.asarray(crops)
        return lbp_features(arr, self.radii, self.grid)

    def embed(self, crops: torch.Tensor) -> np.ndarray:
        """Whitened features, each crop projected on its own (a vector-matrix product per
        row: one matrix product over the batch rounds differently for 1 and 64 rows, so a
        crop's features would depend on its batch)."""
        feats = self.features(crops)
        if self.fit is None:
            return feats
        centred = feats - self.fit["mean"]
        proj = self.fit["projection"]
        out = np.empty((len(centred), proj.shape[1]), np.result_type(centred, proj))
        for i, row in enumerate(centred):
            out[i] = row @ proj
        return out

    def provenance(self) -> dict[str, Any]:
        extra = {"radii": self.radii, "grid": self.grid, "whitening": self.whitening}
        if self.weights_path is not None:
            extra["n_train"] = self.n_train
        if self.whitening != "pca":
            extra["whitening_reason"] = self.whitening_reason
        return {**super().provenance(), **extra}
