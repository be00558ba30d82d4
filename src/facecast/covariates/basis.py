"""Local radial basis functions on a grid of centres over z-scored covariates.

Covariates are z-scored with the data's mean and SD. Centres form a regular grid of
``grid`` points per dimension spanning the data's range; a centre farther than one SD
(distance 1 in z units) from every data point is pruned, so no basis function lives where
there are no data. phi_k(x) = exp(-|z - c_k|^2 / (2 h^2)), with the width h = ``width`` x
the grid spacing: the paper's local basis, the default. ``linear`` (``covariates.linear:
true``, an option, not the paper) also puts the z-scores themselves in the design, ahead of
the RBF columns: local bumps alone shrink back to the intercept where data thin out, so a
global trend can be carried by the linear part instead.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch

#: data points used to decide which centres are near data (a seeded subsample beyond this)
_PRUNE_SAMPLE = 50_000


@dataclass
class RBFBasis:
    """A fitted basis: standardisation, kept centres (z units) and width."""

    mean: np.ndarray
    sd: np.ndarray
    centres: np.ndarray   # (K, d)
    width: float          # h in z units
    linear: bool = False  # prepend the z-scores (a global linear term) to the RBF columns

    @property
    def n_linear(self) -> int:
        return int(len(self.mean)) if self.linear else 0

    @property
    def n_basis(self) -> int:
        """Columns of the design: the linear z columns (if any) plus the kept centres."""
        return int(len(self.centres)) + self.n_linear

    def zscore(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, float) - self.mean) / self.sd

    def features(self, x: np.ndarray | torch.Tensor) -> torch.Tensor:
        """phi(x) as a float32 tensor (n, K); ``x`` in raw covariate units."""
        z = torch.as_tensor(self.zscore(np.asarray(x)), dtype=torch.float32) \
            if not isinstance(x, torch.Tensor) else x
        return self.features_z(z)

    def features_z(self, z: torch.Tensor) -> torch.Tensor:
        """phi from z-scored covariates (a tensor)."""
        c = torch.as_tensor(self.centres, dtype=z.dtype, device=z.device)
        d2 = torch.cdist(z, c).pow(2)
        rbf = torch.exp(-0.5 * d2 / self.width ** 2)
        return torch.cat([z, rbf], dim=1) if self.linear else rbf

    def to_dict(self) -> dict:
        return {"mean": self.mean.tolist(), "sd": self.sd.tolist(),
                "centres": self.centres.tolist(), "width": self.width, "linear": self.linear}

    @classmethod
    def from_dict(cls, d: dict) -> RBFBasis:
        return cls(np.asarray(d["mean"], float), np.asarray(d["sd"], float),
                   np.asarray(d["centres"], float).reshape(-1, len(d["mean"])),
                   float(d["width"]), bool(d.get("linear", False)))


def build_basis(x: np.ndarray, grid: int, width: float, seed: int = 0,
                linear: bool = False) -> RBFBasis:
    """Grid of ``grid``^d centres over z-scored ``x`` (n, d), pruned to within 1 SD of data."""
    x = np.asarray(x, float)
    if x.ndim != 2 or x.shape[1] == 0:
        raise ValueError("the covariate model needs at least one covariate")
    mean = x.mean(axis=0)
    sd = x.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    z = (x - mean) / sd
    if grid < 2:
        raise ValueError("grid needs at least 2 points per dimension")
    axes = [np.linspace(z[:, j].min(), z[:, j].max(), grid) for j in range(z.shape[1])]
    spacing = float(np.mean([(a[-1] - a[0]) / (grid - 1) for a in axes]) or 1.0)
    centres = np.array(list(itertools.product(*axes)), float)
    sample = z
    if len(z) > _PRUNE_SAMPLE:
        sample = z[np.random.default_rng(seed).choice(len(z), _PRUNE_SAMPLE, replace=False)]
    zt = torch.as_tensor(sample, dtype=torch.float64)
    near = np.zeros(len(centres), bool)
    for start in range(0, len(centres), 256):
        c = torch.as_tensor(centres[start:start + 256], dtype=torch.float64)
        near[start:start + 256] = (torch.cdist(c, zt).min(dim=1).values <= 1.0).numpy()
    return RBFBasis(mean, sd, centres[near], width * spacing, linear)
