"""Tests and intervals on the replicates of an identity-clustered paired bootstrap (Holm's
correction over a table: :func:`facecast.labels.estimators_stats.holm`, the one Holm, in
the earliest stage that needs it).

:func:`clustered_test` turns the observed difference ``d`` and its bootstrap replicates
into a two-sided p-value and an interval. The default (``method="t"``) is a Wald test on
the identity-clustered bootstrap standard error, with the small-cluster corrections of
cluster-robust inference (Cameron, Gelbach & Miller 2008; Cameron & Miller 2015): the
standard error times ``sqrt(G / (G - 1))`` and Student's t with ``G - 1`` degrees of
freedom, ``G`` the number of identities. The interval is ``d +- t * se``, so it excludes 0
exactly when the raw p is below ``1 - confidence``. Why this one and not the percentile
bootstrap: benchmarks/compare_null.py and docs/stages/compare.md (level and coverage on
simulated benchmarks whose errors cluster by identity).

No test (``note`` says why, ``p`` is NaN): fewer than :data:`MIN_IDENTITIES` identities,
no finite difference, or a bootstrap without spread around a non-zero difference (a
difference of exactly 0 in every replicate and observed gives ``p = 1``).
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr, ndtri, stdtr, stdtrit

__all__ = ["MIN_IDENTITIES", "METHODS", "clustered_test", "method_label"]

#: fewer identities than this: no clustered test (the bootstrap cannot see the spread)
MIN_IDENTITIES = 3
#: the p-value/interval methods (``t`` is the one the stage uses)
METHODS = ("t", "normal", "percentile")


def method_label(method: str, n_identities: int) -> str:
    """The ``test`` column: what produced a row's p."""
    if method == "t":
        return f"identity-clustered paired bootstrap, t({max(n_identities - 1, 1)})"
    return f"identity-clustered paired bootstrap, {method}"


def _na(note: str, method: str, n_ids: int, n: int) -> dict[str, object]:
    return {"ci_lo": np.nan, "ci_hi": np.nan, "test": method_label(method, n_ids), "p": np.nan,
            "n_boot": n, "note": note}


def clustered_test(diff: float, reps: np.ndarray, n_identities: int,
                   confidence: float = 0.95, method: str = "t") -> dict[str, object]:
    """``ci_lo``, ``ci_hi``, ``test``, raw two-sided ``p``, ``n_boot`` (finite replicates)
    and ``note`` (``""``, or ``n/a (...)`` with NaN p and interval) for the observed
    difference ``diff`` and its replicates ``reps``. ``method``: ``t`` (Wald, clustered
    SE with the G/(G-1) correction, t(G-1)), ``normal`` (Wald, bootstrap SE, normal) or
    ``percentile`` (interval: the replicates' quantiles; p = twice the smaller share of
    replicates on either side of 0, with the +1 correction)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r} ({' | '.join(METHODS)})")
    col = np.asarray(reps, np.float64)
    col = col[np.isfinite(col)]
    g, n = int(n_identities), len(col)
    if g < MIN_IDENTITIES:
        return _na(f"n/a ({g} identities)", method, g, n)
    if not np.isfinite(diff):
        return _na("n/a (no value)", method, g, n)
    if n < 2:
        return _na("n/a (no bootstrap replicates)", method, g, n)
    sd = float(np.std(col, ddof=1))
    if sd <= 1e-12 * max(1.0, abs(diff)):
        if diff == 0 and np.all(col == 0):
            return {"ci_lo": 0.0, "ci_hi": 0.0, "test": method_label(method, g), "p": 1.0,
                    "n_boot": n, "note": ""}
        return _na("n/a (no bootstrap spread)", method, g, n)
    q = (1.0 - confidence) / 2.0
    if method == "percentile":
        lo, hi = np.quantile(col, [q, 1.0 - q])
        p = min(1.0, 2.0 * (min((col <= 0).sum(), (col >= 0).sum()) + 1) / (n + 1))
    elif method == "normal":
        z = float(ndtri(1.0 - q))
        lo, hi, p = diff - z * sd, diff + z * sd, float(2.0 * ndtr(-abs(diff) / sd))
    else:
        se, df = sd * np.sqrt(g / (g - 1.0)), g - 1.0
        t = float(stdtrit(df, 1.0 - q))
        lo, hi, p = diff - t * se, diff + t * se, float(2.0 * stdtr(df, -abs(diff) / se))
    return {"ci_lo": float(lo), "ci_hi": float(hi), "test": method_label(method, g),
            "p": float(p), "n_boot": n, "note": ""}
