"""Issue 51: survivors of `make mutate MODULES=fairness.threshold` - the binomial intervals
against scipy's, the per-group rates and failures of a small table counted by hand (ties
on the threshold, a group without genuine pairs, pairs without a group), the zero-rate
groups and the threshold rule at its ends."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binomtest

from facecast.fairness.threshold import (
    binomial_interval,
    disparity,
    disparity_arrays,
    group_failures,
    group_rates,
    threshold_at,
    thresholds_at_fmr,
    zero_rate_groups,
)

K = np.array([0, 1, 3, 7, 10, 0, 5])
N = np.array([10, 10, 10, 10, 10, 1, 7])


@pytest.mark.parametrize("confidence", [0.95, 0.8])
@pytest.mark.parametrize("method,scipy_name", [("wilson", "wilson"),
                                               ("clopper-pearson", "exact")])
def test_binomial_interval_is_scipys(method, scipy_name, confidence):
    lo, hi = binomial_interval(K, N, confidence, method)
    for k, n, a, b in zip(K, N, lo, hi, strict=True):
        ci = binomtest(int(k), int(n)).proportion_ci(confidence_level=confidence,
                                                     method=scipy_name)
        assert a == pytest.approx(ci.low, abs=1e-12) and b == pytest.approx(ci.high, abs=1e-12)
    # the exact ends: 0 successes start at 0, n successes end at 1, nothing else does
    assert lo[K == 0].tolist() == [0.0, 0.0] and hi[K == N].tolist() == [1.0]
    assert (lo[K > 0] > 0).all() and (hi[K < N] < 1).all()


def test_binomial_interval_defaults_and_no_trials():
    lo, hi = binomial_interval(np.array([3, 2]), np.array([10, 0]))
    ci = binomtest(3, 10).proportion_ci(confidence_level=0.95, method="wilson")
    assert lo[0] == pytest.approx(ci.low, abs=1e-12) and hi[0] == pytest.approx(ci.high,
                                                                               abs=1e-12)
    assert np.isnan(lo[1]) and np.isnan(hi[1])
    with pytest.raises(ValueError, match="interval method must be 'wilson' or "
                                         "'clopper-pearson', got 'wald'"):
        binomial_interval(np.array([1]), np.array([2]), method="wald")


def _pairs():
    """Group A: impostors 0.2, 0.5, 0.5, 0.9 and genuines 0.4, 0.5, 0.8; group B:
    impostors 0.1, 0.7 and no genuine pair; two pairs without a group."""
    scores = np.array([0.2, 0.5, 0.5, 0.9, 0.4, 0.5, 0.8, 0.1, 0.7, 0.95, 0.05])
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 0, 0, 1, 0], bool)
    group = np.array(["A"] * 7 + ["B"] * 2 + [None, None], dtype=object)
    return scores, labels, group


def test_group_rates_counted_by_hand():
    s, y, g = _pairs()
    t = group_rates(s, y, g, [0.5, 0.75], confidence=0.9, method="clopper-pearson")
    assert t["group"].tolist() == ["A", "B", "A", "B"]
    assert t["threshold_index"].tolist() == [0, 0, 1, 1]
    assert t["threshold"].tolist() == [0.5, 0.5, 0.75, 0.75]
    assert t["n_impostor"].tolist() == [4, 2, 4, 2]
    # accept iff score >= t: A's impostors at 0.5 are false matches at 0.5
    assert t["false_matches"].tolist() == [3, 1, 1, 0]
    assert t["n_genuine"].tolist() == [3, 0, 3, 0]
    assert t["false_non_matches"].tolist() == [1, 0, 2, 0]
    assert t["fmr"].tolist() == [0.75, 0.5, 0.25, 0.0]
    assert t["fnmr"].tolist()[0::2] == [1 / 3, 2 / 3] and t["fnmr"].isna().tolist()[1::2] \
        == [True, True]
    lo, hi = binomial_interval(np.array([3, 1, 1, 0]), np.array([4, 2, 4, 2]), 0.9,
                               "clopper-pearson")
    assert np.allclose(t["fmr_lo"], lo, rtol=0, atol=0) and np.allclose(t["fmr_hi"], hi,
                                                                        rtol=0, atol=0)
    lo, hi = binomial_interval(np.array([1, 2]), np.array([3, 3]), 0.9, "clopper-pearson")
    assert t["fnmr_lo"].tolist()[0::2] == lo.tolist()
    assert t["fnmr_hi"].tolist()[0::2] == hi.tolist()
    assert t["fnmr_lo"].isna().tolist()[1::2] == [True, True]
    # defaults: Wilson at 95 %
    d = group_rates(s, y, g, [0.5])
    lo, hi = binomial_interval(np.array([3, 1]), np.array([4, 2]), 0.95, "wilson")
    assert d["fmr_lo"].tolist() == lo.tolist() and d["fmr_hi"].tolist() == hi.tolist()
    assert list(d.columns) == ["threshold_index", "threshold", "group", "n_impostor",
                               "false_matches", "fmr", "fmr_lo", "fmr_hi", "n_genuine",
                               "false_non_matches", "fnmr", "fnmr_lo", "fnmr_hi"]


def test_group_rates_without_a_group_is_an_empty_table_with_the_columns():
    s, y, _ = _pairs()
    t = group_rates(s, y, np.full(len(s), None, dtype=object), [0.5])
    assert t.empty and list(t.columns)[:3] == ["threshold_index", "threshold", "group"]
    assert len(t.columns) == 13


def test_group_failures_counted_by_hand():
    g = np.array(["B", "A", None, "A", "B", "B", None], dtype=object)
    f = np.array([True, False, True, True, True, False, False])
    t = group_failures(g, f)
    assert t["group"].tolist() == ["A", "B"]
    assert t["n_pairs"].tolist() == [2, 3] and t["n_failed"].tolist() == [1, 2]
    assert t["fte"].tolist() == [0.5, 2 / 3]
    assert t["n_pairs"].dtype == np.int64 and t["n_failed"].dtype == np.int64
    assert list(t.columns) == ["group", "n_pairs", "n_failed", "fte"]


def test_zero_rate_groups():
    assert zero_rate_groups(["a", "b", "c"], np.array([0.0, 0.2, 0.0])) == ["a", "c"]
    assert zero_rate_groups(["a", "b"], np.array([0.0, 0.0])) == []
    assert zero_rate_groups(["a", "b"], np.array([0.0, np.nan])) == []
    assert zero_rate_groups(["a", "b"], np.array([np.nan, 0.1])) == []


def test_threshold_rule_at_its_ends():
    desc = np.array([0.9, 0.7, 0.7, 0.2])
    assert threshold_at(desc, 0) == np.nextafter(0.9, np.inf)
    assert threshold_at(desc, 2) == np.nextafter(0.7, np.inf)
    assert threshold_at(desc, 3) == np.nextafter(0.2, np.inf)
    assert threshold_at(desc, 4) == 0.2  # every impostor allowed: the lowest score
    got = thresholds_at_fmr(np.array([0.2, 0.9, 0.7, 0.7]), [0.0, 0.25, 0.5, 1.0])
    assert got.tolist() == [np.nextafter(0.9, np.inf), np.nextafter(0.7, np.inf),
                            np.nextafter(0.7, np.inf), 0.2]
    assert np.isnan(thresholds_at_fmr(np.array([]), [0.1])).all()
    assert pd.isna(thresholds_at_fmr(np.array([]), [0.1, 0.2])).tolist() == [True, True]


def _gini_by_definition(row: list[float]) -> float:
    """n/(n-1) * sum_ij |x_i - x_j| / (2 n^2 mean) over the finite rates; 0 for < 2 groups
    or a zero mean."""
    x = [v for v in row if np.isfinite(v)]
    n = len(x)
    if n < 2 or sum(x) == 0:
        return 0.0
    mean = sum(x) / n
    return n / (n - 1) * sum(abs(a - b) for a in x for b in x) / (2 * n * n * mean)


FMR = np.array([[0.01, 0.04, np.nan, 0.02], [0.3, 0.0, 0.1, 0.2], [0.2, 0.2, 0.2, np.nan]])
FNMR = np.array([[0.1, 0.05, 0.2, np.nan], [0.4, 0.1, 0.1, 0.2], [0.0, 0.0, np.nan, 0.0]])


def test_disparity_over_a_batch_is_each_rows_definition():
    """Rows of groups with NaN (no pairs), a zero rate and all-equal rates: each summary of
    each row recomputed from its own rates, with the default alpha 0.5."""
    out = disparity_arrays(FMR, FNMR)
    for b in range(3):
        f, n = FMR[b][np.isfinite(FMR[b])], FNMR[b][np.isfinite(FNMR[b])]
        a_gap, b_gap = f.max() - f.min(), n.max() - n.min()
        assert out["fmr_gap"][b] == pytest.approx(a_gap, abs=1e-15)
        assert out["fnmr_gap"][b] == pytest.approx(b_gap, abs=1e-15)
        assert out["fdr"][b] == pytest.approx(1 - (0.5 * a_gap + 0.5 * b_gap), abs=1e-15)
        for key, r in (("fmr", f), ("fnmr", n)):
            mm = np.inf if r.min() == 0 < r.max() else (1.0 if r.max() == 0 else
                                                        r.max() / r.min())
            gm = float(np.exp(np.log(r).mean())) if r.min() > 0 else 0.0
            mg = np.inf if gm == 0 < r.max() else (1.0 if r.max() == 0 else r.max() / gm)
            assert out[f"{key}_max_min"][b] == pytest.approx(mm, rel=1e-12)
            assert out[f"{key}_max_geomean"][b] == pytest.approx(mg, rel=1e-12)
            assert out[f"gini_{key}"][b] == pytest.approx(_gini_by_definition(list(r)),
                                                          rel=1e-12)
        assert out["garbe"][b] == pytest.approx(
            0.5 * _gini_by_definition(list(f)) + 0.5 * _gini_by_definition(list(n)),
            rel=1e-12)
    assert out["inequity_rate"].tolist()[2] == 1.0  # equal FMRs, all-zero FNMRs
    assert out["inequity_rate"][1] == np.inf
    assert out["inequity_rate"][0] == pytest.approx(np.sqrt(4.0 * 4.0), rel=1e-12)
    one = disparity(FMR[1], FNMR[1], alpha=0.3)
    assert one["fdr"] == pytest.approx(1 - (0.3 * 0.3 + 0.7 * 0.3), abs=1e-15)
    assert isinstance(one["gini_fmr"], float)


def test_scalar_summaries_are_floats_and_rows_stay_rows():
    from facecast.fairness.threshold import gini as gini_of
    from facecast.fairness.threshold import max_geomean_ratio, max_min_ratio

    for fn in (max_min_ratio, max_geomean_ratio, gini_of):
        v = fn(np.array([0.1, 0.4, 0.2]))
        assert type(v) is float
        rows = fn(FMR[1:])
        assert isinstance(rows, np.ndarray) and rows.shape == (2,)
    assert max_min_ratio(np.array([0.1, 0.4, 0.2])) == pytest.approx(4.0)
    assert max_min_ratio(FMR[1:]).tolist() == [np.inf, 1.0]
    assert max_geomean_ratio(np.array([0.1, 0.4])) == pytest.approx(2.0)
    assert max_geomean_ratio(np.array([0.0, 0.0])) == 1.0


def test_sweep_rates_global_fmr_counted_by_hand():
    from facecast.fairness.threshold import sweep_rates

    s, y, g = _pairs()
    t = sweep_rates(s, y, g, np.array([0.5, 0.75, 0.95]))
    # every impostor with or without a group: 0.2 0.5 0.5 0.9 0.1 0.7 0.05
    assert t["global_fmr"].tolist() == [4 / 7, 4 / 7, 1 / 7, 1 / 7, 0.0, 0.0]
    assert t["false_matches"].tolist() == [3, 1, 1, 0, 0, 0]
    assert t["false_non_matches"].tolist() == [1, 0, 2, 0, 3, 0]
    none = sweep_rates(np.array([0.9]), np.array([True]), np.array(["A"], dtype=object),
                       np.array([0.5]))
    assert none["global_fmr"].tolist() == [0.0]


def test_wilson_lower_end_at_zero_successes_is_exactly_zero():
    """Wilson's lower bound at k = 0 is 0 in exact arithmetic; in floats it leaves a residue
    (5.6e-17 at n = 3, 95 %) that the exact end removes."""
    lo, hi = binomial_interval(np.array([0, 3]), np.array([3, 3]))
    assert lo[0] == 0.0 and hi[1] == 1.0


def test_one_pair_is_enough_for_a_rate():
    s = np.array([0.6, 0.4, 0.3, 0.8])
    y = np.array([0, 1, 0, 1], bool)
    g = np.array(["A", "A", "B", "B"], dtype=object)
    t = group_rates(s, y, g, [0.5])
    assert t["fmr"].tolist() == [1.0, 0.0] and t["fnmr"].tolist() == [1.0, 0.0]
    assert t.index.tolist() == [0, 1]
    from facecast.fairness.threshold import sweep_rates

    one = sweep_rates(np.array([0.9, 0.2]), np.array([False, True]),
                      np.array(["A", "A"], dtype=object), np.array([0.5]))
    assert one["global_fmr"].tolist() == [1.0]


def test_rows_come_back_indexed_from_zero():
    s, y, g = _pairs()
    t = group_rates(s, y, g, [0.75, 0.5])
    assert t.index.tolist() == [0, 1, 2, 3]
    assert t["threshold"].tolist() == [0.75, 0.75, 0.5, 0.5]


def test_rates_of_one_are_not_unequal():
    from facecast.fairness.threshold import max_geomean_ratio, max_min_ratio

    assert max_min_ratio(np.array([1.0, 1.0])) == 1.0
    assert max_geomean_ratio(np.array([1.0, 1.0])) == 1.0
    assert max_min_ratio(np.array([0.0, 1.0])) == np.inf


def test_zero_rate_groups_need_one_rate_per_group():
    with pytest.raises(ValueError):
        zero_rate_groups(["a", "b", "c"], np.array([0.0, 0.5]))
