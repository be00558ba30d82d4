"""Issue 51: the statistics of the estimator report (facecast.labels.estimators_stats)
against independent computations (scipy's tests, Holm by its definition, the bootstrap
redrawn from the same generator), at the boundaries a mutant moves: two values a side,
equal spreads, one trial a side, a probability sum that rounds above 1, chunked draws."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import facecast.labels.estimators_stats as es


def _holm_by_definition(p: list[float]) -> list[float]:
    """Holm: the i-th smallest of m finite p times (m - i), running maximum, capped at 1."""
    finite = sorted((v, i) for i, v in enumerate(p) if math.isfinite(v))
    m, out, run = len(finite), [math.nan] * len(p), 0.0
    for rank, (v, i) in enumerate(finite):
        run = max(run, v * (m - rank))
        out[i] = min(run, 1.0)
    return out


@pytest.mark.parametrize("p", [[0.01, 0.04, 0.03, 0.2], [0.3, np.nan, 0.01],
                               [0.02], [0.5, 0.4, np.inf, 0.6], [np.nan]])
def test_holm_is_its_definition(p):
    assert np.array_equal(es.holm(np.array(p)), _holm_by_definition(p), equal_nan=True)


def test_holm_of_one_p_is_that_p():
    assert es.holm(np.array([0.03])).tolist() == [0.03]
    assert es.holm(np.array([0.03, np.nan])).tolist()[0] == 0.03


@pytest.mark.parametrize("table", [(0, 1, 1, 4), (1, 1, 3, 4), (3, 7, 4, 9), (9, 10, 2, 10),
                                   (10, 10, 0, 5), (1, 1, 0, 1), (2, 12, 11, 12)])
def test_fisher_p_is_scipys_and_never_above_one(table):
    kg, ng, kr, nr = table
    want = stats.fisher_exact([[kg, ng - kg], [kr, nr - kr]]).pvalue
    got = es.fisher_p(kg, ng, kr, nr)
    assert got == pytest.approx(min(want, 1.0), rel=1e-9) and got <= 1.0
    if table in ((0, 1, 1, 4), (1, 1, 3, 4)):  # the sum of probabilities rounds above 1
        assert got == 1.0


def test_fisher_p_without_trials_is_nan():
    assert math.isnan(es.fisher_p(0, 0, 3, 5)) and math.isnan(es.fisher_p(2, 5, 0, 0))
    assert not math.isnan(es.fisher_p(1, 1, 1, 1))


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # scipy, b constant
@pytest.mark.parametrize("a,b", [([1.0, 2.0], [3.0, 5.0]), ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0]),
                                 ([0.0, 2.0], [5.0, 5.0, 5.0]), ([1.0, 4.0, 2.0], [2.5, 9.0])])
def test_welch_p_is_scipys_welch_test(a, b):
    """Two values a side are enough; equal spreads (va == vb) and va + vb == 1 are not
    special cases."""
    want = stats.ttest_ind(a, b, equal_var=False).pvalue
    assert es.welch_p(np.array(a), np.array(b)) == pytest.approx(want, rel=1e-9, abs=0)


def test_welch_p_is_nan_without_two_values_or_spread():
    assert math.isnan(es.welch_p(np.array([1.0]), np.array([2.0, 3.0])))
    assert math.isnan(es.welch_p(np.array([1.0, 2.0]), np.array([3.0])))
    assert math.isnan(es.welch_p(np.array([1.0, 1.0]), np.array([2.0, 2.0])))


def _means_by_hand(v: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return v[rng.integers(0, v.size, size=(n_boot, v.size))].mean(axis=1)


@pytest.mark.parametrize("confidence", [0.95, 0.8])
def test_bootstrap_interval_recomputed_from_its_draws(confidence):
    v = np.array([3.0, 7.5, 1.0, 4.0, 9.0, 2.5, 6.0])
    lo, hi = es.bootstrap_mean_interval(v, 200, confidence, np.random.default_rng(4))
    means = _means_by_hand(v, 200, 4)
    q = (1 - confidence) / 2
    assert (lo, hi) == tuple(np.quantile(means, [q, 1 - q]))
    assert lo < v.mean() < hi


def test_bootstrap_draws_in_chunks_are_the_same_draws(monkeypatch):
    """At most _CHUNK numbers per draw: 10 replicates of 10 values in chunks of 3, 3, 3
    and 1 replicates; the interval is that of one draw of all 10."""
    monkeypatch.setattr(es, "_CHUNK", 30)
    v = np.arange(10, dtype=np.float64) ** 1.5
    got = es.bootstrap_mean_interval(v, 10, 0.9, np.random.default_rng(8))
    assert got == tuple(np.quantile(_means_by_hand(v, 10, 8), [0.05, 0.95]))


def test_bootstrap_boundaries():
    nan = es.bootstrap_mean_interval(np.array([]), 100, 0.95, np.random.default_rng(0))
    assert all(math.isnan(x) for x in nan)
    assert all(math.isnan(x) for x in es.bootstrap_mean_interval(
        np.array([1.0, 2.0]), 0, 0.95, np.random.default_rng(0)))
    # one value: every resample's mean is it; one replicate: its mean is both ends
    assert es.bootstrap_mean_interval(np.array([4.0]), 50, 0.95,
                                      np.random.default_rng(0)) == (4.0, 4.0)
    one = es.bootstrap_mean_interval(np.array([1.0, 5.0, 9.0]), 1, 0.95,
                                     np.random.default_rng(2))
    assert one[0] == one[1] == _means_by_hand(np.array([1.0, 5.0, 9.0]), 1, 2)[0]


def test_row_seed_depends_on_the_seed_and_the_key_only():
    draw = es.row_seed(7, "AF|age").integers(0, 1 << 30, 3).tolist()
    assert draw == es.row_seed(7, "AF|age").integers(0, 1 << 30, 3).tolist()
    assert draw != es.row_seed(8, "AF|age").integers(0, 1 << 30, 3).tolist()
    assert draw != es.row_seed(7, "AM|age").integers(0, 1 << 30, 3).tolist()
