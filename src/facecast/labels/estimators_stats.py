"""The statistics of the estimator report (:mod:`facecast.labels.estimators`): a group
against the rest, and Holm over a table.

- accuracy: Wilson interval (:func:`facecast.fairness.threshold.binomial_interval`) and
  Fisher's exact two-sided test of the 2 x 2 table (group, rest) x (right, wrong), from
  the hypergeometric law in log space (vectorised: a FairFace-sized group is one sum);
- age MAE: percentile bootstrap interval of the mean absolute error (images resampled
  with replacement, seeded per row) and Welch's t-test of the absolute errors against the
  rest's;
- :func:`holm`: Holm's step-down adjustment over every finite p of a table (the one
  facecast uses; :mod:`facecast.compare.inference` takes it from here).
"""

from __future__ import annotations

import zlib

import numpy as np
from scipy.special import gammaln, stdtr

#: most random draws one bootstrap chunk holds (bounds memory for large groups)
_CHUNK = 2_000_000


def holm(p: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values (family-wise error over the finite entries),
    capped at 1; NaN stays NaN (not part of the family)."""
    p = np.asarray(p, np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adj = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    out[order] = np.minimum(adj, 1.0)
    return out


def fisher_p(k_group: int, n_group: int, k_rest: int, n_rest: int) -> float:
    """Two-sided p of Fisher's exact test: is the group's success share k/n the rest's?
    The sum of the hypergeometric probabilities (margins fixed) no larger than the
    observed table's (relative tolerance 1e-7, as R and scipy). NaN when either side has
    no trial."""
    if n_group <= 0 or n_rest <= 0:
        return float("nan")
    total, succ = n_group + n_rest, k_group + k_rest
    x = np.arange(max(0, n_group - (total - succ)), min(n_group, succ) + 1)
    logp = _lchoose(succ, x) + _lchoose(total - succ, n_group - x) - _lchoose(total, n_group)
    obs = logp[k_group - x[0]]
    return float(min(1.0, np.exp(logp[logp <= obs + np.log1p(1e-7)]).sum()))


def _lchoose(n: float | np.ndarray, k: float | np.ndarray) -> np.ndarray:
    return gammaln(np.asarray(n, np.float64) + 1) - gammaln(np.asarray(k, np.float64) + 1) \
        - gammaln(np.asarray(n, np.float64) - k + 1)


def welch_p(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sided p of Welch's t-test of mean(a) = mean(b) (t on the Welch-Satterthwaite
    degrees of freedom); NaN with < 2 values a side or no spread on either."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.size < 2 or b.size < 2:
        return float("nan")
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    if va + vb == 0:
        return float("nan")
    t = (a.mean() - b.mean()) / np.sqrt(va + vb)
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    return float(2.0 * stdtr(df, -abs(t)))


def row_seed(seed: int, key: str) -> np.random.Generator:
    """A generator seeded by ``seed`` and a row's key (independent of row order)."""
    return np.random.default_rng([int(seed), zlib.crc32(key.encode("utf-8"))])


def bootstrap_mean_interval(values: np.ndarray, n_boot: int, confidence: float,
                            rng: np.random.Generator) -> tuple[float, float]:
    """Percentile interval of the mean of ``values`` over ``n_boot`` resamples with
    replacement (draws in chunks of at most :data:`_CHUNK` numbers)."""
    v = np.asarray(values, np.float64)
    m = v.size
    if m == 0 or n_boot < 1:
        return float("nan"), float("nan")
    means = np.empty(n_boot)
    step = max(1, _CHUNK // m)
    for start in range(0, n_boot, step):
        b = min(step, n_boot - start)
        means[start:start + b] = v[rng.integers(0, m, size=(b, m))].mean(axis=1)
    q = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [q, 1.0 - q])
    return float(lo), float(hi)
