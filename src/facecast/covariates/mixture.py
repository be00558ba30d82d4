"""Normal-mixture CDF, survival and quantile, vectorised over draws and covariate points.

A mixture is three arrays ``w, mu, sd`` of shape ``(..., H)`` (weights summing to one over the
last axis). Scores follow the similarity convention of the evaluation stage: a pair is
accepted when ``score > t``, so FMR(t) is the non-match survival S_N(t) and FNMR(t) the match
CDF F_M(t). Quantiles are found by bisection on the mixture CDF (or survival for upper tails,
which keeps small FMRs exact), to float64 resolution.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr

#: bisection steps; 200 halvings shrink any finite bracket below float64 spacing
_BISECT_STEPS = 200


def mixture_cdf(t: np.ndarray | float, w: np.ndarray, mu: np.ndarray, sd: np.ndarray
                ) -> np.ndarray:
    """P(y <= t) of the mixture; ``t`` broadcasts against the mixture's leading axes."""
    t = np.asarray(t, dtype=float)[..., None]
    return np.sum(w * ndtr((t - mu) / sd), axis=-1)


def mixture_sf(t: np.ndarray | float, w: np.ndarray, mu: np.ndarray, sd: np.ndarray
               ) -> np.ndarray:
    """P(y > t) of the mixture, computed from the upper tail (exact for tiny values)."""
    t = np.asarray(t, dtype=float)[..., None]
    return np.sum(w * ndtr((mu - t) / sd), axis=-1)


def mixture_quantile(p: np.ndarray | float, w: np.ndarray, mu: np.ndarray, sd: np.ndarray,
                     *, upper: bool = False) -> np.ndarray:
    """The t with F(t) = p (or, ``upper=True``, with S(t) = p), by bisection.

    ``p`` broadcasts against the mixture's leading axes. The bracket
    [min(mu - 40 sd), max(mu + 40 sd)] holds every p in [1e-300, 1 - 1e-16].
    """
    w, mu, sd = (np.asarray(a, dtype=float) for a in (w, mu, sd))
    p = np.asarray(p, dtype=float)
    if np.any((p <= 0) | (p >= 1)):
        raise ValueError("mixture_quantile needs 0 < p < 1")
    shape = np.broadcast_shapes(p.shape, mu.shape[:-1])
    lo = np.broadcast_to(np.min(mu - 40 * sd, axis=-1), shape).copy()
    hi = np.broadcast_to(np.max(mu + 40 * sd, axis=-1), shape).copy()
    p = np.broadcast_to(p, shape)
    fn = mixture_sf if upper else mixture_cdf
    for _ in range(_BISECT_STEPS):
        mid = 0.5 * (lo + hi)
        val = fn(mid, w, mu, sd)
        # CDF rises with t, survival falls: move the side that keeps the root bracketed
        go_right = (val > p) if upper else (val < p)
        lo = np.where(go_right, mid, lo)
        hi = np.where(go_right, hi, mid)
        if np.all(hi - lo <= 4 * np.finfo(float).eps * np.maximum(1.0, np.abs(mid))):
            break
    return 0.5 * (lo + hi)


def destandardise(mu: np.ndarray, sd: np.ndarray, center: float, scale: float
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Map mixture locations/scales fitted on (y - center) / scale back to score units.

    Exact: if z = (y - center) / scale has the mixture (w, mu, sd) then y has
    (w, center + scale * mu, scale * sd).
    """
    return center + scale * np.asarray(mu, float), scale * np.asarray(sd, float)


def tar_at_fmr(fmr: float | np.ndarray, match: tuple[np.ndarray, ...],
               nonmatch: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """(TAR, threshold) at target FMR: t = S_N^{-1}(fmr), TAR = S_M(t) (the conditional ROC)."""
    t = mixture_quantile(fmr, *nonmatch, upper=True)
    return mixture_sf(t, *match), t
