"""Error-versus-discard characteristic (EDC) of quality measures (ISO/IEC 29794-1:2024).

Follows Schlett et al., "Considerations on the evaluation of biometric quality assessment
algorithms" (arXiv 2303.13294), literally:

* a comparison's pair quality is ``min(q(a), q(b))`` (``mean`` and ``product`` are
  options);
* the decision threshold ``tau`` is fixed **once** on all comparisons (accept iff
  ``score >= tau``) and never re-fitted while discarding;
* comparisons are sorted by pair quality, ascending, and discarded lowest first; the
  discard count only takes the values where the pair quality changes (ties are discarded
  together);
* ``EDC(d) = errors among the kept / kept``: FNM-EDC on mated comparisons (error =
  ``score < tau``), FM-EDC on non-mated comparisons (error = ``score >= tau``); the
  discard fraction counts comparisons of that kind; the point ``(1, 0)`` is appended;
* pAUC to the discard limit ``L`` with stepwise interpolation, and pAUC minus the
  theoretical best area ``e0^2 / 2 - max(0, e0 - L)^2 / 2`` (``e0`` = the error at 0 %
  discard).

Weights generalise counts (identity-clustered bootstrap replicates reuse the one sort).
The re-fitted-threshold variant of some FIQA repositories (tau recomputed on the kept
comparisons at every step) is :func:`refit_edc`, labelled non-standard.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from facecast.fairness.threshold import thresholds_at_fmr
from facecast.quality.columns import PAIR_QUALITY


def pair_quality(qa: np.ndarray, qb: np.ndarray, how: str = "min") -> np.ndarray:
    """Pair quality of two images' quality values (``min`` | ``mean`` | ``product``).

    NaN when either value is missing.
    """
    qa = np.asarray(qa, dtype=np.float64)
    qb = np.asarray(qb, dtype=np.float64)
    if how == "min":
        return np.minimum(qa, qb)  # propagates NaN
    if how == "mean":
        return (qa + qb) / 2.0
    if how == "product":
        return qa * qb
    raise ValueError(f"pair quality must be one of {PAIR_QUALITY}, got {how!r}")


def errors(scores: np.ndarray, labels: np.ndarray, tau: float) -> np.ndarray:
    """Per-comparison error at threshold ``tau`` (accept iff ``score >= tau``): a mated
    comparison below tau is a false non-match, a non-mated one at or above tau a false
    match."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    return np.where(y, s < tau, s >= tau)


@dataclass
class EdcCurve:
    """One EDC: ``discard`` and ``error`` fractions (the last point is ``(1, 0)``), the
    discard ``counts`` and kept errors at each step, and the comparisons behind it."""

    discard: np.ndarray
    error: np.ndarray
    counts: np.ndarray
    kept_errors: np.ndarray
    n: int

    @property
    def start_error(self) -> float:
        return float(self.error[0]) if self.n else float("nan")


def edc_curve(quality: np.ndarray, error: np.ndarray) -> EdcCurve:
    """The EDC of comparisons with pair quality ``quality`` and binary ``error``.

    Discards lowest quality first, ties together; NaN qualities must be removed first.
    """
    q = np.asarray(quality, dtype=np.float64)
    e = np.asarray(error).astype(np.int64)
    if np.isnan(q).any():
        raise ValueError("pair qualities contain NaN; drop comparisons without quality first")
    n = q.shape[0]
    if n == 0:
        return EdcCurve(np.array([0.0, 1.0]), np.array([np.nan, 0.0]), np.array([0, 0]),
                        np.array([0, 0]), 0)
    order = np.argsort(q, kind="stable")
    qs, es = q[order], e[order]
    # kept errors when the first i comparisons are discarded: suffix sums
    suffix = np.concatenate([np.cumsum(es[::-1])[::-1], [0]])
    starts = np.concatenate([[0], np.flatnonzero(qs[1:] != qs[:-1]) + 1])
    kept = n - starts
    err = suffix[starts] / kept
    disc = starts / n
    counts = starts
    kept_err = suffix[starts]
    if disc[-1] != 1.0:
        disc = np.concatenate([disc, [1.0]])
        err = np.concatenate([err, [0.0]])
        counts = np.concatenate([counts, [n]])
        kept_err = np.concatenate([kept_err, [0]])
    return EdcCurve(disc, err.astype(np.float64), counts, kept_err, n)


def image_levels(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Dense ranks of per-image qualities (ties share a level; NaN -> -1) and the number of
    levels. The pair quality ``min`` of two images is then the min of their levels, so an
    EDC needs one sort of the images instead of one of the comparisons."""
    v = np.asarray(values, dtype=np.float64)
    ok = np.isfinite(v)
    levels = np.full(v.shape[0], -1, dtype=np.int64)
    u, inv = np.unique(v[ok], return_inverse=True)
    levels[ok] = inv
    return levels, int(u.shape[0])


def edc_from_levels(level: np.ndarray, error: np.ndarray, n_levels: int) -> EdcCurve:
    """:func:`edc_curve` for comparisons given by integer quality levels (higher = better;
    all >= 0): a counting sort (``bincount``) replaces the comparison sort."""
    lv = np.asarray(level, dtype=np.int64)
    n = lv.shape[0]
    if n == 0:
        return edc_curve(np.zeros(0), np.zeros(0))
    counts = np.bincount(lv, minlength=n_levels)
    errs = np.bincount(lv, weights=np.asarray(error, dtype=np.float64), minlength=n_levels)
    present = counts > 0
    before = np.concatenate([[0], np.cumsum(counts)[:-1]])[present]
    err_before = np.concatenate([[0.0], np.cumsum(errs)[:-1]])[present]
    total_e = errs.sum()
    kept_err = np.rint(total_e - err_before).astype(np.int64)
    disc = before / n
    err = kept_err / (n - before)
    counts_out = before
    if disc[-1] != 1.0:
        disc = np.concatenate([disc, [1.0]])
        err = np.concatenate([err, [0.0]])
        counts_out = np.concatenate([counts_out, [n]])
        kept_err = np.concatenate([kept_err, [0]])
    return EdcCurve(disc, err.astype(np.float64), counts_out, kept_err, n)


def pauc(discard: np.ndarray, error: np.ndarray, limit: float) -> np.ndarray | float:
    """Stepwise area under the EDC from discard 0 to ``limit`` (vectorised over rows).

    ``discard`` and ``error`` are (..., P) with non-decreasing discard fractions; each
    error value holds from its discard fraction to the next one.
    """
    if not 0.0 <= limit <= 1.0:
        raise ValueError(f"discard limit must lie in [0, 1], got {limit}")
    d = np.asarray(discard, dtype=np.float64)
    e = np.asarray(error, dtype=np.float64)
    nxt = np.concatenate([d[..., 1:], np.full(d.shape[:-1] + (1,), np.inf)], axis=-1)
    width = np.clip(np.minimum(nxt, limit) - np.minimum(d, limit), 0.0, None)
    out = np.nansum(np.where(width > 0, e * width, 0.0), axis=-1)
    return float(out) if np.ndim(out) == 0 else out


def theoretical_best(start_error: np.ndarray | float, limit: float) -> np.ndarray | float:
    """Area under the theoretical best EDC (error falls by one per discarded fraction) up
    to ``limit``: ``e0^2/2 - max(0, e0 - L)^2 / 2``."""
    e0 = np.asarray(start_error, dtype=np.float64)
    out = e0 ** 2 / 2.0 - np.maximum(0.0, e0 - limit) ** 2 / 2.0
    return float(out) if np.ndim(out) == 0 else out


def threshold_from_fmr(nonmated_scores: np.ndarray, target: float) -> float:
    """Lowest tau with ``#{non-mated >= tau} / n <= target`` (accept iff score >= tau; the
    convention of :func:`facecast.fairness.threshold.thresholds_at_fmr`)."""
    return float(thresholds_at_fmr(nonmated_scores, [float(target)])[0])


def threshold_from_fnmr(mated_scores: np.ndarray, start_error: float) -> float:
    """Highest tau with ``#{mated < tau} / n <= start_error`` (the FNMR starting error)."""
    s = np.sort(np.asarray(mated_scores, dtype=np.float64))
    n = s.shape[0]
    if n == 0:
        return float("nan")
    k = int(np.floor(float(start_error) * n + 1e-9))
    return float(s[k]) if k < n else float(np.nextafter(s[-1], np.inf))


def weighted_edc_on_grid(quality: np.ndarray, error: np.ndarray, weights: np.ndarray,
                         grid: np.ndarray, limit: float) -> tuple[np.ndarray, np.ndarray]:
    """EDC values at discard fractions ``grid`` and pAUC to ``limit`` per weight row.

    ``weights`` is (B, n) (bootstrap multiplicities); the sort happens once. A row's
    discard fraction at a tie-block start is the weight discarded before it / total.
    Returns ``(error (B, G), pauc (B,))``.
    """
    q = np.asarray(quality, dtype=np.float64)
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    order = np.argsort(q, kind="stable")
    qs, es, ws = q[order], np.asarray(error, dtype=np.float64)[order], w[:, order]
    starts = np.concatenate([[0], np.flatnonzero(qs[1:] != qs[:-1]) + 1])
    cw = np.concatenate([np.zeros((w.shape[0], 1)), np.cumsum(ws, axis=1)], axis=1)
    ce = np.concatenate([np.zeros((w.shape[0], 1)), np.cumsum(ws * es, axis=1)], axis=1)
    total, total_e = cw[:, -1:], ce[:, -1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        disc = cw[:, starts] / total
        err = (total_e - ce[:, starts]) / (total - cw[:, starts])
    # blocks of zero weight repeat the previous fraction; (1, 0) closes every row
    err = np.where(np.isfinite(err), err, 0.0)
    disc = np.concatenate([disc, np.ones((w.shape[0], 1))], axis=1)
    err = np.concatenate([err, np.zeros((w.shape[0], 1))], axis=1)
    out = np.empty((w.shape[0], len(grid)))
    g = np.asarray(grid, dtype=np.float64)
    for b in range(w.shape[0]):
        idx = np.searchsorted(disc[b], g, side="right") - 1
        out[b] = err[b, np.clip(idx, 0, disc.shape[1] - 1)]
    areas = pauc(disc, err, limit)
    bad = total[:, 0] <= 0
    out[bad] = np.nan
    areas = np.where(bad, np.nan, areas)
    return out, np.atleast_1d(areas)


def refit_edc(quality: np.ndarray, scores: np.ndarray, labels: np.ndarray, *,
              target_fmr: float, steps: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """NOT the standard EDC: FNMR among the kept mated comparisons at a threshold
    re-fitted on the kept non-mated comparisons after each discard fraction in ``steps``
    (as some FIQA repositories plot). Returns ``(discard, fnmr)``."""
    q = np.asarray(quality, dtype=np.float64)
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    order = np.argsort(q, kind="stable")
    q, s, y = q[order], s[order], y[order]
    n = q.shape[0]
    disc, fnmr = [], []
    for d in steps:
        cut = int(np.floor(d * n))
        if cut > 0 and cut < n:  # keep ties together: discard the whole tie block
            cut = int(np.searchsorted(q, q[cut - 1], side="right"))
        ks, ky = s[cut:], y[cut:]
        if not ky.any() or ky.all():
            break
        tau = threshold_from_fmr(ks[~ky], target_fmr)
        disc.append(cut / n)
        fnmr.append(float((ks[ky] < tau).mean()))
    return np.asarray(disc), np.asarray(fnmr)
