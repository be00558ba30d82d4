"""Agreement statistics for binary labels: Fleiss, Cohen, Krippendorff (vectorised).

Fleiss' kappa here follows Lingenfelter (UNR 2021): for one attribute the *identities*
are the items and their *images* are the raters, with a varying number of raters per
item (identities with fewer than two labelled images are left out). A kappa computed per
identity and then averaged is degenerate (one item has no chance agreement); not offered.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

__all__ = ["cohen_kappa", "fleiss_kappa_by_group", "krippendorff_alpha_nominal",
           "leave_one_out_disagreement"]


def fleiss_kappa_by_group(labels: np.ndarray, groups: np.ndarray,
                          min_raters: int = 2) -> tuple[float, int, int]:
    """Fleiss' kappa of 0/1 ``labels`` with ``groups`` (identities) as items.

    Returns (kappa, n_items, n_ratings) over items with at least ``min_raters`` non-missing
    labels. kappa is NaN when fewer than two items qualify or when every rating is the same
    category (chance agreement 1: kappa undefined).
    """
    y = np.asarray(labels, dtype=float)
    ok = np.isfinite(y)
    df = pd.DataFrame({"g": np.asarray(groups)[ok], "y": (y[ok] >= 0.5).astype(float)})
    agg = df.groupby("g", sort=False)["y"].agg(["sum", "count"])
    agg = agg[agg["count"] >= min_raters]
    if len(agg) < 2:
        return float("nan"), int(len(agg)), int(agg["count"].sum())
    n1 = agg["sum"].to_numpy()
    n = agg["count"].to_numpy()
    n0 = n - n1
    p_i = (n1 * (n1 - 1) + n0 * (n0 - 1)) / (n * (n - 1))
    p_bar = float(p_i.mean())
    p1 = float(n1.sum() / n.sum())
    p_e = p1**2 + (1 - p1) ** 2
    if p_e >= 1.0 - 1e-12:
        return float("nan"), int(len(agg)), int(n.sum())
    return (p_bar - p_e) / (1.0 - p_e), int(len(agg)), int(n.sum())


def cohen_kappa(a: np.ndarray, b: np.ndarray) -> float:
    """Cohen's kappa of two 0/1 raters over the items both labelled (NaN if undefined)."""
    a = np.asarray(a, dtype=float)
    b = np.asarray(b, dtype=float)
    ok = np.isfinite(a) & np.isfinite(b)
    if ok.sum() < 2:
        return float("nan")
    x = a[ok] >= 0.5
    y = b[ok] >= 0.5
    p_o = float(np.mean(x == y))
    pa, pb = float(x.mean()), float(y.mean())
    p_e = pa * pb + (1 - pa) * (1 - pb)
    if p_e >= 1.0 - 1e-12:
        return float("nan")
    return (p_o - p_e) / (1.0 - p_e)


def krippendorff_alpha_nominal(ratings: np.ndarray) -> float:
    """Krippendorff's alpha (nominal, binary) of an (items x sources) 0/1 matrix, NaN = missing.

    Units with fewer than two values are not pairable and are left out. NaN when undefined.
    """
    r = np.asarray(ratings, dtype=float)
    ok = np.isfinite(r)
    ones = np.where(ok, r >= 0.5, False).sum(axis=1).astype(float)
    m = ok.sum(axis=1).astype(float)
    pair = m >= 2
    ones, m = ones[pair], m[pair]
    zeros = m - ones
    n = m.sum()
    n1, n0 = ones.sum(), zeros.sum()
    if n < 2 or n1 == 0 or n0 == 0:
        return float("nan")
    d_o = float(np.sum(2.0 * ones * zeros / (m - 1.0)))
    return 1.0 - (n - 1.0) * d_o / (2.0 * n0 * n1)


def leave_one_out_disagreement(labels: np.ndarray, groups: np.ndarray) -> tuple[np.ndarray,
                                                                             np.ndarray]:
    """Per image: share of the *other* images of its identity whose label differs.

    Returns (share, n_others); share is NaN where the identity has no other labelled image.
    """
    y = np.asarray(labels, dtype=float)
    ok = np.isfinite(y)
    yb = np.where(ok, (y >= 0.5).astype(float), 0.0)
    df = pd.DataFrame({"g": np.asarray(groups), "y": yb, "ok": ok.astype(float)})
    s = df.groupby("g", sort=False)["y"].transform("sum").to_numpy()
    c = df.groupby("g", sort=False)["ok"].transform("sum").to_numpy()
    others = c - ok
    ones_others = s - yb
    with np.errstate(invalid="ignore", divide="ignore"):
        agree = np.where(yb == 1, ones_others, others - ones_others)
        share = np.where((others > 0) & ok, 1.0 - agree / others, np.nan)
    return share, others.astype(int)
