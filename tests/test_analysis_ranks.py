"""facecast.analysis.ranks: scipy's average ranks without importing scipy.stats, and the
binomial intervals / probits that moved to scipy.special give the same numbers."""

import numpy as np
from scipy.stats import beta, norm, rankdata

from facecast.analysis.ranks import average_ranks
from facecast.fairness.threshold import binomial_interval


def test_average_ranks_equal_scipys_for_ties_and_continuous_values():
    rng = np.random.default_rng(0)
    for trial in range(200):
        n = int(rng.integers(0, 300))
        x = rng.integers(0, 20, n).astype(float) if trial % 2 else rng.normal(size=n)
        assert np.array_equal(average_ranks(x), rankdata(x)), trial
    assert average_ranks(np.array([3.0, 1.0, 3.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]


def test_binomial_intervals_match_scipy_stats():
    k, n = np.arange(0, 41, dtype=float), 40.0
    lo, hi = binomial_interval(k, np.full_like(k, n), method="clopper-pearson",
                               confidence=0.95)
    with np.errstate(invalid="ignore"):
        ref_lo = np.where(k > 0, beta.ppf(0.025, k, n - k + 1), 0.0)
        ref_hi = np.where(k < n, beta.ppf(0.975, k + 1, n - k), 1.0)
    np.testing.assert_allclose(lo, ref_lo, rtol=0, atol=1e-15)
    np.testing.assert_allclose(hi, ref_hi, rtol=0, atol=1e-15)
    lo, hi = binomial_interval(k, np.full_like(k, n), method="wilson", confidence=0.95)
    z = norm.ppf(0.975)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    np.testing.assert_allclose((lo + hi) / 2, centre, atol=1e-12)
