"""Verification metrics per posterior draw, at covariate points, and their summaries.

With the match model M and non-match model N at covariates x (one posterior draw each, drawn
independently since the two classes are fitted independently), at a target FMR f:
threshold t(x) = S_N^{-1}(f | x), TAR(x) = S_M(t(x) | x) = TPR(f | x) (the conditional ROC),
FNMR(x) = 1 - TAR(x). Summaries over draws: mean, median and the 90 % and 95 % equal-tailed
intervals. Expected performance over a covariate population: the threshold t* with
E_x S_N(t* | x) = f, and TAR = E_x S_M(t* | x), per draw.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from facecast.covariates.mixture import mixture_cdf, mixture_quantile, mixture_sf
from facecast.covariates.model import ClassFit

#: quantiles stored with every summary
QUANTILES = {"q025": 0.025, "q05": 0.05, "q50": 0.5, "q95": 0.95, "q975": 0.975}


def summarise(draws: np.ndarray) -> dict[str, np.ndarray]:
    """Mean and the :data:`QUANTILES` over axis 0 (the draws)."""
    out = {"mean": draws.mean(axis=0)}
    for name, q in QUANTILES.items():
        out[name] = np.quantile(draws, q, axis=0)
    return out


def conditional_metrics(match: ClassFit, nonmatch: ClassFit, x: np.ndarray, fmr: float,
                        chunk: int = 512) -> dict[str, np.ndarray]:
    """Per draw and point (S, P): threshold, TAR and FNMR at target ``fmr``, and FMR/FNMR at it."""
    if match.n_draws != nonmatch.n_draws:
        raise ValueError("match and non-match fits need the same number of draws")
    x = np.asarray(x, float)
    ts, tars = [], []
    for start in range(0, len(x), chunk):
        xb = x[start:start + chunk]
        mn = nonmatch.mixture_at(xb)
        mm = match.mixture_at(xb)
        t = mixture_quantile(fmr, *mn, upper=True)
        ts.append(t)
        tars.append(mixture_sf(t, *mm))
    t = np.concatenate(ts, axis=1)
    tar = np.concatenate(tars, axis=1)
    return {"threshold": t, "tar": tar, "fnmr": 1.0 - tar}


def rates_at(match: ClassFit, nonmatch: ClassFit, x: np.ndarray, t: float | np.ndarray
             ) -> dict[str, np.ndarray]:
    """FMR(t | x) and FNMR(t | x) per draw and point (S, P)."""
    return {"fmr": mixture_sf(t, *nonmatch.mixture_at(x)),
            "fnmr": mixture_cdf(t, *match.mixture_at(x))}


def population_metrics(match: ClassFit, nonmatch: ClassFit, x_pop: np.ndarray, fmr: float
                       ) -> dict[str, np.ndarray]:
    """Per draw (S,): the threshold giving population FMR ``fmr`` and the population TAR."""
    w, mu, sd = nonmatch.mixture_at(x_pop)
    lo = np.min(mu - 40 * sd, axis=(1, 2))
    hi = np.max(mu + 40 * sd, axis=(1, 2))
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        val = mixture_sf(mid[:, None], w, mu, sd).mean(axis=1)
        lo, hi = np.where(val > fmr, mid, lo), np.where(val > fmr, hi, mid)
        if np.all(hi - lo <= 1e-13 * np.maximum(1.0, np.abs(mid))):
            break
    t = 0.5 * (lo + hi)
    tar = mixture_sf(t[:, None], *match.mixture_at(x_pop)).mean(axis=1)
    return {"threshold": t, "tar": tar, "fnmr": 1.0 - tar}


def binned_tar(scores: np.ndarray, labels: np.ndarray, values: np.ndarray,
               edges: Sequence[float], fmr: float, n_boot: int, seed: int,
               level: float = 0.95) -> list[dict]:
    """The binned estimate: per bin of ``values``, empirical TAR at ``fmr`` + bootstrap interval.

    Within a bin the threshold is the empirical (1 - fmr) quantile of its non-match scores; a
    bin with fewer than 1 / fmr non-match pairs (or no match pairs) gets NaN and a reason.
    """
    rng = np.random.default_rng(seed)
    scores, labels, values = (np.asarray(a) for a in (scores, labels, values))
    rows = []
    for i in range(len(edges) - 1):
        last = i == len(edges) - 2
        inb = (values >= edges[i]) & ((values <= edges[i + 1]) if last else
                                      (values < edges[i + 1]))
        s, lab = scores[inb], labels[inb].astype(bool)
        gen, imp = s[lab], s[~lab]
        row = {"bin": i, "low": float(edges[i]), "high": float(edges[i + 1]),
               "center": float(np.median(values[inb])) if inb.any() else np.nan,
               "n_match": int(len(gen)), "n_nonmatch": int(len(imp)), "tar": np.nan,
               "tar_low": np.nan, "tar_high": np.nan, "note": ""}
        if len(gen) == 0 or len(imp) * fmr < 1:
            row["note"] = f"n/a ({len(imp)} non-match, {len(gen)} match pairs)"
            rows.append(row)
            continue

        def est(g: np.ndarray, m: np.ndarray) -> float:
            return float(np.mean(g > np.quantile(m, 1 - fmr)))

        row["tar"] = est(gen, imp)
        if n_boot:
            boots = [est(gen[rng.integers(0, len(gen), len(gen))],
                         imp[rng.integers(0, len(imp), len(imp))]) for _ in range(n_boot)]
            row["tar_low"], row["tar_high"] = np.quantile(boots, [(1 - level) / 2,
                                                                  (1 + level) / 2])
        rows.append(row)
    return rows
