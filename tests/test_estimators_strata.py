"""Age standardisation and stratified tests of the estimator report (issue 47.2), each
against an independent computation: direct standardisation by hand, the
Cochran-Mantel-Haenszel statistic from scipy's hypergeometric moments stratum by stratum,
the stratified permutation test against its exact law by enumeration, and the bootstrap
interval against its own draws.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy import stats

from facecast.labels.estimators_stats import bootstrap_mean_interval, row_seed
from facecast.labels.estimators_strata import (
    cmh_p,
    codes,
    standardised,
    stratified_permutation_p,
)


def test_codes_of_combinations():
    code, size = codes(np.array(["a", "b", None, "a"], dtype=object),
                       np.array(["x", "x", "y", "y"], dtype=object))
    assert size == 4
    assert code[2] == -1 and len({code[0], code[1], code[3]}) == 3


def test_direct_standardisation_by_hand():
    # strata (age bins) 0, 1, 2; group 0 and group 1; values 1 = right
    stratum = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 2])
    group = np.array([0, 0, 1, 1, 0, 1, 1, 1, 1, 1, 0, 1])
    right = np.array([1, 0, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1], float)
    valid = np.ones(12, bool)
    std, empty = standardised(right, group, stratum, valid, 2, 3)
    w = np.array([4, 6, 2]) / 12  # the whole set's mix
    g0 = np.array([0.5, 1.0, 0.0])  # group 0's rate per stratum
    g1 = np.array([1.0, 3 / 5, 1.0])
    assert std == pytest.approx([w @ g0, w @ g1])
    assert empty == [[], []]
    # group 0 has no row in stratum 2: no standardised figure, the stratum named
    valid[10] = False
    std, empty = standardised(right, group, stratum, valid, 2, 3)
    assert np.isnan(std[0]) and empty[0] == [2]
    w = np.array([4, 6, 1]) / 11
    assert std[1] == pytest.approx(w @ g1)


def _cmh_by_hand(right, group, stratum, g):
    """Mantel-Haenszel (1959) with continuity correction, one stratum at a time."""
    dev, var = 0.0, 0.0
    for k in np.unique(stratum):
        s = stratum == k
        big_n, n1, m1 = s.sum(), (s & (group == g)).sum(), right[s].sum()
        if n1 == 0 or big_n < 2:
            continue
        law = stats.hypergeom(big_n, m1, n1)  # right faces among the group's n1
        dev += right[s & (group == g)].sum() - law.mean()
        var += law.var()
    return stats.chi2.sf((abs(dev) - 0.5) ** 2 / var, 1)


def test_cmh_against_hypergeometric_moments():
    rng = np.random.default_rng(4)
    n = 600
    stratum = rng.integers(0, 4, n)
    group = rng.integers(0, 3, n)
    right = (rng.random(n) < 0.55 + 0.1 * stratum - 0.08 * (group == 1)).astype(float)
    p, rest = cmh_p(right, group, stratum, np.ones(n, bool), 3, 4)
    for g in range(3):
        assert p[g] == pytest.approx(_cmh_by_hand(right, group, stratum, g), rel=1e-9)
        assert rest[g] == (group != g).sum()
    # a group inside one stratum is compared with that stratum's rest only
    group2 = np.where(stratum == 2, group, -1)
    p2, rest2 = cmh_p(right, np.where(group2 == 0, 0, 1), stratum, np.ones(n, bool), 2, 4)
    inside = stratum == 2
    assert p2[0] == pytest.approx(_cmh_by_hand(right[inside], group2[inside], stratum[inside],
                                               0), rel=1e-9)
    assert rest2[0] == (inside & (group2 != 0)).sum()
    # nothing varies: no test
    p3, _ = cmh_p(np.ones(n), group, stratum, np.ones(n, bool), 3, 4)
    assert np.isnan(p3).all()


def test_stratified_permutation_against_its_exact_law():
    # two strata of five (young, old); the group holds the youngest of the young and the
    # three youngest of the old: small errors within their strata, large pooled
    x = np.array([1.0, 2.0, 4.0, 7.0, 11.0, 13.0, 14.5, 19.0, 20.0, 30.0])
    stratum = np.repeat([0, 1], 5)
    group = np.array([0, 1, 1, 1, 1, 0, 0, 0, 1, 1])
    obs = x[group == 0].sum()
    centre = 1 * x[:5].mean() + 3 * x[5:].mean()
    stat = [abs(x[list(a)].sum() + x[list(b)].sum() - centre)
            for a in itertools.combinations(range(5), 1)
            for b in itertools.combinations(range(5, 10), 3)]
    exact = np.mean(np.array(stat) >= abs(obs - centre) - 1e-9)
    assert exact == pytest.approx(0.04)  # 2 of the 50 arrangements
    [(p, rest)] = stratified_permutation_p(x, [group], stratum, np.ones(10, bool), [2], 2,
                                           20000, np.random.default_rng(0))
    assert p[0] == pytest.approx(exact, abs=0.006)
    assert rest[0] == 6
    # permuting across strata instead is another law (p 0.95: the confounded answer)
    pooled = [abs(x[list(a)].sum() - 4 * x.mean()) for a in itertools.combinations(range(10), 4)]
    assert np.mean(np.array(pooled) >= abs(obs - 4 * x.mean()) - 1e-9) > 0.9
    # the +1 correction: never below 1 / (n_perm + 1); same seed, same p
    big = np.random.default_rng(2).random(80)
    big_group = np.tile(np.repeat([0, 1], 20), 2)
    big[big_group == 0] += 100.0  # no other arrangement comes near (1 in C(40, 20) ** 2)
    [(pe, _)] = stratified_permutation_p(big, [big_group], np.repeat([0, 1], 40),
                                         np.ones(80, bool), [2], 2, 99,
                                         np.random.default_rng(1))
    assert pe[0] == 1 / 100
    [(again, _)] = stratified_permutation_p(x, [group], stratum, np.ones(10, bool), [2], 2,
                                            20000, np.random.default_rng(0))
    assert again[0] == p[0]


def test_bootstrap_interval_from_its_own_draws():
    x = np.random.default_rng(3).exponential(4.0, 57)
    lo, hi = bootstrap_mean_interval(x, 500, 0.9, row_seed(5, "row"))
    rng = row_seed(5, "row")
    means = x[rng.integers(0, x.size, size=(500, x.size))].mean(axis=1)
    assert (lo, hi) == pytest.approx(tuple(np.quantile(means, [0.05, 0.95])), rel=1e-12)
