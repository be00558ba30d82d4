"""Pointwise uncertainty bands on curves from the identity-clustered bootstrap.

Replicates are the weight rows of :func:`facecast.evaluate.resample.identity_weights`
(identities resampled with replacement; an impostor pair counts ``c_a * c_b`` times, a
genuine pair ``c_a`` times). Each curve is evaluated on a fixed grid for every replicate
(the scores are sorted once; replicates only change weights), and the band at a grid point
is the percentile interval of the replicate values there (pointwise, not simultaneous).

Decision rule everywhere: accept iff ``score >= threshold``.

* :func:`roc_band_table` - TAR at a grid of FARs (ROC and DET share it; FRR = 1 - TAR).
  A grid FAR below ``1 / n_impostors`` is flagged ``resolvable = False``.
* :func:`group_rate_band_table` - per-group FMR(t) and FNMR(t) on a threshold grid.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from facecast.evaluate.metrics import far_resolvable
from facecast.evaluate.resample import identity_weights


def percentile_band(values: np.ndarray, confidence: float = 0.95
                    ) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval over axis 0 (replicates), NaN-aware; NaN where no replicate.
    The numbers of ``np.nanquantile`` (linear interpolation), vectorised over columns."""
    v = np.asarray(values, dtype=np.float64)
    q = (1.0 - confidence) / 2.0
    if v.size == 0:
        return np.full(v.shape[1:], np.nan), np.full(v.shape[1:], np.nan)
    srt = np.sort(v, axis=0)  # NaN sorts last
    n = (~np.isnan(v)).sum(axis=0)
    some = np.isfinite(v).any(axis=0)

    def at(level: float) -> np.ndarray:
        pos = level * np.maximum(n - 1, 0)
        i0 = np.floor(pos).astype(np.int64)
        i1 = np.minimum(i0 + 1, np.maximum(n - 1, 0))
        frac = pos - i0
        a = np.take_along_axis(srt, i0[None], axis=0)[0]
        b = np.take_along_axis(srt, i1[None], axis=0)[0]
        with np.errstate(invalid="ignore"):
            return np.where(some, a + frac * (b - a), np.nan)

    return at(q), at(1 - q)


def replicate_weights(identity_a: np.ndarray, identity_b: np.ndarray, n_boot: int,
                      seed: int, chunk: int = 16) -> Iterable[np.ndarray]:
    """Identity-clustered bootstrap weight chunks ``(<=chunk, n)``, seeded."""
    rng = np.random.default_rng(seed)
    return identity_weights(identity_a, identity_b, n_boot, rng, chunk)


def tar_at_fars(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray,
                fars: Sequence[float]) -> np.ndarray:
    """Best TAR with weighted FAR <= each grid FAR, per weight row: ``(B, F)``."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    order = np.argsort(-s, kind="stable")
    ss, ys, ws = s[order], y[order], w[:, order]
    ends = np.r_[np.flatnonzero(ss[1:] != ss[:-1]), len(ss) - 1]  # -inf ties: equality
    cg = np.cumsum(ws * ys, axis=1)[:, ends]
    ci = np.cumsum(ws * ~ys, axis=1)[:, ends]
    tg, ti = cg[:, -1:], ci[:, -1:]
    with np.errstate(invalid="ignore", divide="ignore"):
        far = np.concatenate([np.zeros((w.shape[0], 1)), ci / ti], axis=1)
        tar = np.concatenate([np.zeros((w.shape[0], 1)), cg / tg], axis=1)
    grid = np.asarray(fars, dtype=np.float64)
    out = np.full((w.shape[0], grid.shape[0]), np.nan)
    for b in range(w.shape[0]):
        if not (ti[b, 0] > 0 and tg[b, 0] > 0):
            continue
        idx = np.searchsorted(far[b], grid + 1e-15, side="right") - 1
        # TAR is non-decreasing along the curve, so the last point with FAR <= f is best
        out[b] = tar[b, np.clip(idx, 0, far.shape[1] - 1)]
    return out


def far_grid(n_impostors: int, n_points: int = 41, low: float = 1e-5) -> np.ndarray:
    """Log-spaced FARs from ``low`` (or 1e-5) to 1."""
    return np.logspace(np.log10(low), 0.0, n_points)


def roc_band_table(scores: np.ndarray, labels: np.ndarray, identity_a: np.ndarray,
                   identity_b: np.ndarray, *, fars: Sequence[float], n_boot: int, seed: int,
                   confidence: float = 0.95) -> pd.DataFrame:
    """TAR at each grid FAR: estimate, pointwise band, and whether the FAR is resolvable.

    Columns: ``far``, ``tar``, ``tar_lo``, ``tar_hi``, ``frr``, ``frr_lo``, ``frr_hi``,
    ``n_impostor``, ``n_genuine``, ``resolvable`` (``n_impostor * far >= 1``), ``n_boot``.
    """
    y = np.asarray(labels).astype(bool)
    point = tar_at_fars(scores, y, np.ones((1, len(y))), fars)[0]
    reps = [tar_at_fars(scores, y, w, fars)
            for w in replicate_weights(identity_a, identity_b, n_boot, seed)]
    lo, hi = percentile_band(np.concatenate(reps) if reps else np.full((1, len(fars)), np.nan),
                             confidence)
    n_imp = int((~y).sum())
    return pd.DataFrame({
        "far": np.asarray(fars, dtype=np.float64), "tar": point, "tar_lo": lo, "tar_hi": hi,
        "frr": 1 - point, "frr_lo": 1 - hi, "frr_hi": 1 - lo, "n_impostor": n_imp,
        "n_genuine": int(y.sum()),
        "resolvable": far_resolvable(n_imp, np.asarray(fars, dtype=np.float64)),
        "n_boot": n_boot})


def group_rates_weighted(scores: np.ndarray, labels: np.ndarray, group_codes: np.ndarray,
                         n_groups: int, weights: np.ndarray, thresholds: np.ndarray
                         ) -> tuple[np.ndarray, np.ndarray]:
    """Per-group FMR and FNMR at each threshold for each weight row: ``(B, G, T)`` each."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(bool)
    w = np.atleast_2d(np.asarray(weights, dtype=np.float64))
    thr = np.asarray(thresholds, dtype=np.float64)
    fmr = np.full((w.shape[0], n_groups, thr.shape[0]), np.nan)
    fnmr = np.full_like(fmr, np.nan)
    for g in range(n_groups):
        for kind, out in ((False, fmr), (True, fnmr)):
            m = (group_codes == g) & (y == kind)
            if not m.any():
                continue
            order = np.argsort(s[m], kind="stable")
            ss, ws = s[m][order], w[:, m][:, order]
            cw = np.concatenate([np.zeros((w.shape[0], 1)), np.cumsum(ws, axis=1)], axis=1)
            below = cw[:, np.searchsorted(ss, thr, side="left")]  # weight of scores < t
            total = cw[:, -1:]
            with np.errstate(invalid="ignore", divide="ignore"):
                out[:, g] = (total - below) / total if not kind else below / total
    return fmr, fnmr


def group_rate_band_table(scores: np.ndarray, labels: np.ndarray, group: np.ndarray,
                          identity_a: np.ndarray, identity_b: np.ndarray, *,
                          thresholds: np.ndarray, n_boot: int, seed: int,
                          confidence: float = 0.95) -> pd.DataFrame:
    """Per-group FMR(t)/FNMR(t) with pointwise bands on a threshold grid.

    Pairs with group None are left out. Columns: ``group``, ``threshold``, ``fmr``,
    ``fmr_lo``, ``fmr_hi``, ``n_impostor``, ``fnmr``, ``fnmr_lo``, ``fnmr_hi``,
    ``n_genuine``, ``n_boot``.
    """
    g = np.asarray(group, dtype=object)
    keep = pd.notna(g)
    names = sorted({str(x) for x in g[keep]})
    codes = np.full(g.shape[0], -1)
    lookup = {n: i for i, n in enumerate(names)}
    codes[keep] = [lookup[str(x)] for x in g[keep]]
    y = np.asarray(labels).astype(bool)
    thr = np.asarray(thresholds, dtype=np.float64)
    pf, pn = group_rates_weighted(scores, y, codes, len(names), np.ones((1, len(y))), thr)
    rf, rn = [], []
    for w in replicate_weights(identity_a, identity_b, n_boot, seed):
        f, n = group_rates_weighted(scores, y, codes, len(names), w, thr)
        rf.append(f)
        rn.append(n)
    empty = np.full((1, len(names), len(thr)), np.nan)
    flo, fhi = percentile_band(np.concatenate(rf) if rf else empty, confidence)
    nlo, nhi = percentile_band(np.concatenate(rn) if rn else empty, confidence)
    rows = []
    for i, name in enumerate(names):
        m = codes == i
        rows.append(pd.DataFrame({
            "group": name, "threshold": thr, "fmr": pf[0, i], "fmr_lo": flo[i],
            "fmr_hi": fhi[i], "n_impostor": int((m & ~y).sum()), "fnmr": pn[0, i],
            "fnmr_lo": nlo[i], "fnmr_hi": nhi[i], "n_genuine": int((m & y).sum()),
            "n_boot": n_boot}))
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(
        columns=["group", "threshold", "fmr", "fmr_lo", "fmr_hi", "n_impostor", "fnmr",
                 "fnmr_lo", "fnmr_hi", "n_genuine", "n_boot"])
