"""Identity-clustered significance of slice effects and false-discovery control.

Pairs of the same people are not independent, so every replicate resamples identities
(:func:`facecast.evaluate.resample.identity_weights`: a genuine pair weighs its identity's
count, an impostor pair the product of its two identities' counts). The relevant pairs are
first summed per resampling unit (an identity for genuine pairs, an identity pair for
impostor pairs), so a replicate costs ``units x slices``, not ``pairs x slices``.

The effect of a slice is ``err(S) - err(rest)`` (error rate of its relevant pairs minus
that of every other relevant pair). It is tested with the score statistic of "no
difference", ``T = sum_j (m_j - pi) (e_j - p)`` over the relevant pairs (``m_j``: in the
slice, ``pi`` the slice's share, ``e_j`` the 0/1 error, ``p`` the overall error rate):
its contributions are summed per resampling unit and the identity-clustered bootstrap
gives its standard deviation (the cluster-robust variance of the score, computed around
the null rate, so a slice whose few identities happen to agree cannot fake a tiny
variance, as a Wald test's own-slice standard error can). The p-value is one-sided (the
slice is worse): ``p = F(-T / sd)`` with ``F`` Student's t with (identities in the
slice - 1) degrees of freedom, a small-cluster correction (normal beyond 30).

A variance estimated per slice is itself noisy, and a search over thousands of slices
finds the ones where it came out too small. So the reported p is the larger of that
clustered p and the exact binomial tail ``P(Bin(|S|, p) >= err(S))`` - the p-value if
every pair were independent, which clustering can only make larger: a slice must pass
both. The exact tail also keeps rare errors (FMR) honest, where a normal approximation
is far too optimistic. The p-values are continuous, so a family of thousands of slices
can reach the Benjamini-Hochberg thresholds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.special import bdtrc, stdtr

from facecast.evaluate.bands import percentile_band
from facecast.evaluate.resample import identity_weights


@dataclass
class TestResult:
    """Per tested slice: observed effect and rate, bootstrap SE, p, interval of the rate."""

    effect: np.ndarray
    rate: np.ndarray
    rest_rate: np.ndarray
    z: np.ndarray
    p: np.ndarray
    rate_lo: np.ndarray
    rate_hi: np.ndarray


@dataclass
class Units:
    """Resampling units of the relevant pairs: ``codes[j]`` is pair j's unit; ``ua``/``ub``
    the unit's identities (identities of the protocol without a relevant pair are added
    as empty units, so a replicate draws over every identity); ``ind`` sums pairs into
    units."""

    codes: np.ndarray
    ua: np.ndarray
    ub: np.ndarray
    ind: sparse.csr_matrix


def make_units(identity_a: np.ndarray, identity_b: np.ndarray,
               all_identities: np.ndarray) -> Units:
    """The units of pairs with identities ``identity_a``/``identity_b``."""
    ida = np.asarray(identity_a, dtype=object)
    idb = np.asarray(identity_b, dtype=object)
    codes, uniq = pd.factorize(pd.MultiIndex.from_arrays([ida, idb]))
    ua = np.asarray(uniq.get_level_values(0), dtype=object)
    ub = np.asarray(uniq.get_level_values(1), dtype=object)
    present = pd.Index(np.concatenate([ua, ub])).unique()
    pad = np.asarray(pd.Index(all_identities).difference(present), dtype=object)
    n_units = len(uniq) + len(pad)
    ind = sparse.csr_matrix((np.ones(len(codes)), (codes, np.arange(len(codes)))),
                            shape=(n_units, len(codes)))
    return Units(codes, np.concatenate([ua, pad]), np.concatenate([ub, pad]), ind)


def replicate_weights(units: Units, n_boot: int, seed: int) -> list[np.ndarray]:
    """Identity-clustered replicate weights of every unit, in chunks ``(<=64, U)``
    (:func:`facecast.evaluate.resample.identity_weights`, seeded)."""
    rng = np.random.default_rng(seed)
    return list(identity_weights(units.ua, units.ub, n_boot, rng, chunk=64))


def _effect(size: np.ndarray, errs: np.ndarray, total: np.ndarray, total_err: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = errs / size
        rest = (total_err[..., None] - errs) / (total[..., None] - size)
    return rate - rest, rate, rest


def clustered_test(units: Units, weights: list[np.ndarray], member: np.ndarray,
                   error: np.ndarray, *, confidence: float = 0.95,
                   n_identities: np.ndarray | None = None) -> TestResult:
    """Test every slice (column of ``member`` over the relevant pairs) against the rest
    with the identity-clustered replicate ``weights``; see the module docstring."""
    err = np.asarray(error, bool)
    m = np.asarray(member, np.float64)
    size = np.asarray(units.ind @ m)
    errs = np.asarray(units.ind @ (m * err[:, None]))
    total = np.asarray(units.ind.sum(1)).ravel()
    total_err = np.asarray(units.ind @ err.astype(np.float64)).ravel()
    n_all, e_all = total.sum(), total_err.sum()
    d_obs, rate_obs, rest_obs = _effect(size.sum(0), errs.sum(0), np.float64(n_all),
                                        np.float64(e_all))
    share = size.sum(0) / n_all                       # pi per slice
    p0 = e_all / n_all                                # the overall error rate
    # score contributions per unit: sum (m - pi)(e - p0)
    contrib = errs - p0 * size - share[None, :] * total_err[:, None] + (
        share[None, :] * p0 * total[:, None])
    t_obs = contrib.sum(0)
    k = size.shape[1]
    n_boot = sum(w.shape[0] for w in weights)
    reps_t = np.empty((n_boot, k))
    reps_r = np.empty((n_boot, k))
    stacked = np.hstack([contrib, errs, size])
    done = 0
    for w in weights:
        b = w.shape[0]
        prod = w @ stacked
        reps_t[done:done + b] = prod[:, :k]
        with np.errstate(divide="ignore", invalid="ignore"):
            reps_r[done:done + b] = prod[:, k:2 * k] / prod[:, 2 * k:]
        done += b
    sd = np.std(reps_t, axis=0, ddof=1) if n_boot > 1 else np.zeros(k)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sd > 0, t_obs / np.where(sd > 0, sd, 1.0), np.nan)
    df = (np.full(k, np.inf) if n_identities is None
          else np.clip(np.asarray(n_identities, np.float64) - 1, 1, None))
    df = np.where(df > 30, np.inf, df)
    p_cluster = np.where(np.isfinite(z), stdtr(df, -np.nan_to_num(z)), 1.0)
    n_s = np.rint(size.sum(0)).astype(np.int64)
    e_s = np.rint(errs.sum(0)).astype(np.int64)
    p_binom = np.where(e_s >= 1, bdtrc(np.maximum(e_s - 1, 0), n_s, p0), 1.0)
    p = np.maximum(p_cluster, p_binom)
    lo, hi = percentile_band(reps_r, confidence)
    return TestResult(d_obs, rate_obs, rest_obs, z, p, lo, hi)


def adjust(p: np.ndarray, method: str = "bh") -> np.ndarray:
    """Benjamini-Hochberg (``bh``) or Benjamini-Yekutieli (``by``: valid under any
    dependence, BH times ``sum_{i<=m} 1/i``) adjusted p-values (q-values), capped at 1."""
    p = np.asarray(p, np.float64)
    m = len(p)
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    ranked = p[order] * m / np.arange(1, m + 1)
    if method == "by":
        ranked *= np.sum(1.0 / np.arange(1, m + 1))
    elif method != "bh":
        raise ValueError(f"unknown FDR method {method!r} (bh | by)")
    q = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(q, 1.0)
    return out
