"""Like-with-like comparisons of the estimator report (issue 47.2): a group's figure
standardised to the dataset's age mix and its tests stratified, so that an estimator whose
errors depend on age only shows no race gap where the races differ in age mix.

Every function works on one ``group_by`` at once: ``group`` holds each row's group code
(``-1``: in no group, e.g. a missing label), ``stratum`` each row's stratum code (``-1``:
unknown; such rows enter neither the weights, the rates nor the tests), and ``valid`` the
rows that enter the figure (the scored faces for ``accuracy``, the rows with an age error
for ``mae``).

- :func:`standardised`: direct standardisation. The standard population is the dataset's
  own mix of the valid rows over the strata (FairFace's age bins): weight ``w_k`` = valid
  rows of stratum k / valid rows. A group's standardised figure is ``sum_k w_k x_gk`` with
  ``x_gk`` its mean in stratum k. A group with no valid row in a stratum of positive weight
  has no standardised figure (NaN, the empty strata named): renormalising over the strata
  it has would standardise it to another mix than the others.
- :func:`cmh_p`: the Cochran-Mantel-Haenszel test of "group vs the rest" on the 2 x 2
  tables (group, rest) x (right, wrong) of every stratum, with the continuity correction
  of Mantel and Haenszel (1959): ``(max(|sum(a_k - E a_k)| - 1/2, 0))^2 / sum Var a_k``
  (hypergeometric mean and variance, margins fixed per stratum), chi-square with one
  degree of freedom (as R's ``mantelhaen.test(correct = TRUE)`` and statsmodels'
  ``StratifiedTable.test_null_odds(correction=True)``). A stratum without the group adds
  nothing, so a group inside one age bin (``race x age``) is tested within its bin. NaN
  where no stratum varies (every variance zero).
- :func:`stratified_permutation_p`: the MAE test. The group labels are permuted within
  each stratum ``n_perm`` times (a group keeps its count per stratum; done as permuting
  the values within each stratum, which is the same law); the statistic is the
  group's sum of absolute errors centred on its expectation under that permutation
  (``sum_k n_gk * mean_k``), two-sided, ``p = (1 + #{|T*| >= |T|}) / (n_perm + 1)``
  (Phipson and Smyth 2010): the smallest p is ``1 / (n_perm + 1)``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import chdtrc

#: most permuted labels one chunk of :func:`stratified_permutation_p` holds
_CHUNK = 4_000_000


def codes(*columns: np.ndarray) -> tuple[np.ndarray, int]:
    """One integer code per row for the combination of ``columns`` (-1 where any value is
    missing) and the number of codes."""
    n = len(columns[0]) if columns else 0
    if not columns:
        return np.zeros(n, np.int64), 1
    out = np.zeros(n, np.int64)
    known = np.ones(n, bool)
    size = 1
    for col in columns:
        c = np.asarray(col, dtype=object)
        ok = np.array([v is not None and v == v for v in c], dtype=bool)
        uniq, inv = np.unique(c[ok].astype(str), return_inverse=True)
        code = np.full(n, -1, np.int64)
        code[ok] = inv
        known &= code >= 0
        out = out * max(len(uniq), 1) + np.maximum(code, 0)
        size *= max(len(uniq), 1)
    out[~known] = -1
    return out, size


def _cells(values: np.ndarray, group: np.ndarray, stratum: np.ndarray, valid: np.ndarray,
           n_groups: int, n_strata: int) -> tuple[np.ndarray, np.ndarray]:
    """(count, sum) per (group, stratum) of the valid rows in a group and a stratum."""
    use = valid & (group >= 0) & (stratum >= 0)
    idx = group[use] * n_strata + stratum[use]
    size = n_groups * n_strata
    count = np.bincount(idx, minlength=size).reshape(n_groups, n_strata)
    total = np.bincount(idx, weights=values[use], minlength=size).reshape(n_groups, n_strata)
    return count.astype(np.float64), total


def _strata_totals(values: np.ndarray, stratum: np.ndarray, valid: np.ndarray,
                   n_strata: int) -> tuple[np.ndarray, np.ndarray]:
    """(count, sum) per stratum of the valid rows (every group and none)."""
    use = valid & (stratum >= 0)
    return (np.bincount(stratum[use], minlength=n_strata).astype(np.float64),
            np.bincount(stratum[use], weights=values[use], minlength=n_strata))


def standardised(values: np.ndarray, group: np.ndarray, stratum: np.ndarray,
                 valid: np.ndarray, n_groups: int, n_strata: int
                 ) -> tuple[np.ndarray, list[list[int]]]:
    """Each group's directly standardised mean of ``values`` (see the module docstring)
    and, per group, the strata of positive weight it has no valid row in (its figure NaN
    when any)."""
    values = np.asarray(values, np.float64)
    count, total = _cells(values, group, stratum, valid, n_groups, n_strata)
    n_k, _ = _strata_totals(values, stratum, valid, n_strata)
    w = n_k / n_k.sum() if n_k.sum() > 0 else np.zeros(n_strata)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
    empty = (count == 0) & (w > 0)[None, :]
    out = np.where(empty.any(axis=1), np.nan,
                   np.where(count > 0, mean, 0.0) @ w)
    out[w.sum() == 0] = np.nan
    return out, [list(np.flatnonzero(e)) for e in empty]


def cmh_p(right: np.ndarray, group: np.ndarray, stratum: np.ndarray, valid: np.ndarray,
          n_groups: int, n_strata: int) -> tuple[np.ndarray, np.ndarray]:
    """Each group's CMH p against the rest (see the module docstring) and the rest's size
    in the strata the group has rows in."""
    r = np.asarray(right, np.float64)
    n1, a = _cells(r, group, stratum, valid, n_groups, n_strata)
    big_n, m1 = _strata_totals(r, stratum, valid, n_strata)
    with np.errstate(invalid="ignore", divide="ignore"):
        expect = n1 * m1 / np.where(big_n > 0, big_n, 1.0)
        var = np.where(big_n > 1, n1 * (big_n - n1) * m1 * (big_n - m1)
                       / (big_n ** 2 * (big_n - 1)), 0.0)
    v = var.sum(axis=1)
    dev = np.maximum(np.abs((a - expect).sum(axis=1)) - 0.5, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        stat = np.where(v > 0, dev ** 2 / np.where(v > 0, v, 1.0), np.nan)
    p = np.where(v > 0, chdtrc(1.0, stat), np.nan)
    rest = ((big_n[None, :] - n1) * (n1 > 0)).sum(axis=1)
    return p, rest


def stratified_permutation_p(values: np.ndarray, groups: list[np.ndarray],
                             stratum: np.ndarray, valid: np.ndarray, n_groups: list[int],
                             n_strata: int, n_perm: int, rng: np.random.Generator
                             ) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per grouping of ``groups`` (each a group-code array with ``n_groups`` codes; all
    tested within the same strata, on the same permutations): each group's two-sided
    stratified permutation p of its mean ``values`` against the rest (see the module
    docstring) and the rest's size in the strata the group has rows in. NaN for a group
    with no valid row or without any rest in its strata."""
    use = np.flatnonzero(valid & (stratum >= 0))
    order = use[np.argsort(stratum[use], kind="stable")]
    s = stratum[order]
    x = np.asarray(values, np.float64)[order]
    n_k = np.bincount(s, minlength=n_strata).astype(np.float64)
    mean_k = np.bincount(s, weights=x, minlength=n_strata) / np.where(n_k > 0, n_k, 1.0)
    offsets = np.concatenate([[0], np.cumsum(n_groups)]).astype(np.int64)
    member = np.zeros((len(s), int(offsets[-1])))
    n_gk = np.zeros((int(offsets[-1]), n_strata))
    for j, grp in enumerate(groups):
        g = np.asarray(grp)[order]
        inside = np.flatnonzero(g >= 0)
        member[inside, offsets[j] + g[inside]] = 1.0
        n_gk[offsets[j]:offsets[j + 1]] = _cells(x, g, s, np.ones(len(s), bool),
                                                 n_groups[j], n_strata)[0]
    centre = n_gk @ mean_k
    observed = np.abs(x @ member - centre)
    rest = ((n_k[None, :] - n_gk) * (n_gk > 0)).sum(axis=1)
    exceed = np.zeros(len(centre), np.int64)
    bounds = np.concatenate([[0], np.cumsum(n_k).astype(np.int64)])
    step = max(1, _CHUNK // max(len(s), 1))
    for start in range(0, n_perm, step):
        b = min(step, n_perm - start)
        perm = np.empty((b, len(s)))
        for k in range(n_strata):
            lo, hi = bounds[k], bounds[k + 1]
            if hi > lo:
                perm[:, lo:hi] = rng.permuted(np.broadcast_to(x[lo:hi], (b, hi - lo)), axis=1)
        sums = perm @ member
        exceed += (np.abs(sums - centre) >= observed * (1 - 1e-12) - 1e-12).sum(axis=0)
    p = (1.0 + exceed) / (n_perm + 1.0)
    p[(n_gk.sum(axis=1) == 0) | (rest == 0)] = np.nan
    return [(p[offsets[j]:offsets[j + 1]], rest[offsets[j]:offsets[j + 1]])
            for j in range(len(groups))]
