"""The identity-clustered bootstrap interval of a finding's error rate, streamed.

A replicate draws every identity's weight from Poisson(1) (the Poisson bootstrap: the
multinomial draw of identities with replacement, without its fixed total, so identities
are drawn independently and replicates can be made in chunks); a genuine pair weighs its
identity's weight, an impostor pair the product of its two identities' weights (pairs of
the same people move together, as :mod:`facecast.evaluate.resample` resamples). A slice's
pairs are first summed per resampling unit (identity, or identity pair), so a chunk of
``b`` replicates holds ``b x identities`` weights and ``b x units of the slice`` products,
never ``n_boot x units``: memory stays ``O(chunk x (identities + pairs of the slice))``.

It serves the few slices a user reads (the findings); the slice table's intervals come
from the analytic cluster-robust variance (:mod:`facecast.slices.testing`), which costs
no replicates.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from facecast.evaluate.bands import percentile_band
from facecast.slices.testing import Design

#: replicates per chunk
CHUNK = 32


def bootstrap_rates(design: Design, slices: Sequence[np.ndarray], n_boot: int, seed: int,
                    confidence: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval (``confidence``) of the error rate of each slice (design
    indices, sorted) over ``n_boot`` Poisson identity-bootstrap replicates; NaN where no
    replicate has a pair of the slice."""
    rng = np.random.default_rng(seed)
    units = [_units(design, idx) for idx in slices]
    reps = np.full((n_boot, len(slices)), np.nan)
    for start in range(0, n_boot, CHUNK):
        b = min(CHUNK, n_boot - start)
        w = rng.poisson(1.0, (b, design.n_identities)).astype(np.float64)
        for k, (ua, ub, dyad, size, errs) in enumerate(units):
            pw = w[:, ua] * np.where(dyad, w[:, ub], 1.0)
            n_r, e_r = np.einsum("bu,u->b", pw, size), np.einsum("bu,u->b", pw, errs)
            with np.errstate(divide="ignore", invalid="ignore"):
                reps[start:start + b, k] = np.where(n_r > 0, e_r / n_r, np.nan)
    return percentile_band(reps, confidence)


def _units(design: Design, idx: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The resampling units of a slice: identities, impostor flag, pairs and errors."""
    if len(idx) == 0:
        empty = np.zeros(0)
        return empty.astype(int), empty.astype(int), empty.astype(bool), empty, empty
    u = design.unit[idx]
    first = np.flatnonzero(np.r_[True, u[1:] != u[:-1]])
    size = np.diff(np.r_[first, len(idx)]).astype(np.float64)
    errs = np.add.reduceat(design.err[idx].astype(np.float64), first)
    at = idx[first]
    return design.ida[at], design.idb[at], design.dyad[at], size, errs
