"""Global-threshold fairness: thresholds, intervals, ratios, FDR, GARBE, inequity rate."""

import logging
import math

import numpy as np
import pandas as pd
import pytest

from facecast.fairness.assess import _thresholds_and_rates
from facecast.fairness.tables import (
    mark_zero_rates,
    report_views,
    to_markdown,
    zero_rate_notes,
)
from facecast.fairness.threshold import (
    binomial_interval,
    disparity,
    gini,
    group_rates,
    max_geomean_ratio,
    max_min_ratio,
    thresholds_at_fmr,
)


def test_hand_worked_rates():
    d = disparity([0.01, 0.02, 0.04], [0.1, 0.1, 0.2], alpha=0.5)
    assert d["fmr_gap"] == pytest.approx(0.03)
    assert d["fnmr_gap"] == pytest.approx(0.1)
    assert d["fdr"] == pytest.approx(1 - (0.5 * 0.03 + 0.5 * 0.1))
    # Gini with n/(n-1): FMR sum|xi-xj| = 0.12, mean 0.07/3 -> 1.5 * 0.12 / 0.42
    assert d["gini_fmr"] == pytest.approx(1.5 * 0.12 / 0.42)
    assert d["gini_fnmr"] == pytest.approx(0.25)
    assert d["garbe"] == pytest.approx(0.5 * 1.5 * 0.12 / 0.42 + 0.5 * 0.25)
    assert d["fmr_max_min"] == pytest.approx(4.0)
    assert d["fmr_max_geomean"] == pytest.approx(2.0)  # geomean = (8e-6)^(1/3) = 0.02
    assert d["fnmr_max_min"] == pytest.approx(2.0)
    assert d["fnmr_max_geomean"] == pytest.approx(0.2 / 0.002 ** (1 / 3))
    assert d["inequity_rate"] == pytest.approx(math.sqrt(4.0) * math.sqrt(2.0))


def test_alpha_weights_fmr_against_fnmr():
    d = disparity([0.0, 0.1], [0.2, 0.2], alpha=1.0)
    assert d["fdr"] == pytest.approx(0.9)
    assert d["garbe"] == pytest.approx(gini(np.array([0.0, 0.1])))


def test_equal_rates_are_fair():
    d = disparity([0.01, 0.01, 0.01], [0.2, 0.2, 0.2])
    assert d["fdr"] == 1.0 and d["garbe"] == 0.0 and d["inequity_rate"] == 1.0
    assert d["fmr_max_min"] == 1.0 and d["fnmr_max_geomean"] == pytest.approx(1.0)


def test_zero_rates_have_defined_values():
    d = disparity([0.0, 0.01], [0.0, 0.0])
    assert d["fmr_max_min"] == math.inf and d["fmr_max_geomean"] == math.inf
    assert d["fnmr_max_min"] == 1.0 and d["fnmr_max_geomean"] == 1.0
    assert d["gini_fmr"] == pytest.approx(1.0)  # n=2: 2 * 0.02 / (2 * 4 * 0.005)
    assert d["gini_fnmr"] == 0.0
    assert d["garbe"] == pytest.approx(0.5)
    assert d["fdr"] == pytest.approx(0.995)
    assert d["inequity_rate"] == math.inf
    allzero = disparity([0.0, 0.0], [0.0, 0.0])
    assert allzero["fdr"] == 1.0 and allzero["garbe"] == 0.0
    assert allzero["inequity_rate"] == 1.0


def test_single_group_and_missing_rates():
    assert gini(np.array([0.3])) == 0.0
    assert max_min_ratio(np.array([0.1, np.nan, 0.2])) == pytest.approx(2.0)
    assert max_geomean_ratio(np.array([0.5, 0.5])) == pytest.approx(1.0)
    d = disparity([0.1], [0.2])
    assert d["fdr"] == 1.0 and d["garbe"] == 0.0


def test_threshold_at_fmr_never_exceeds_target():
    imp = np.arange(1000) / 1000.0  # 0.000 .. 0.999
    t = thresholds_at_fmr(imp, [1e-2, 1e-3, 1e-4])
    assert t[0] == pytest.approx(0.989)  # 10 impostors above
    assert t[1] == pytest.approx(0.998)  # 1 above
    assert t[2] == pytest.approx(0.999)  # none above
    for target, thr in zip([1e-2, 1e-3, 1e-4], t, strict=True):
        assert (imp >= thr).mean() <= target  # accept iff score >= t
    # ties: with a block of equal scores the reached FMR stays below the target
    tied = np.r_[np.zeros(90), np.ones(10)]
    assert (tied >= thresholds_at_fmr(tied, [0.05])[0]).mean() == 0.0
    assert np.isnan(thresholds_at_fmr(np.array([]), [0.1])[0])


def test_binomial_intervals_known_values():
    lo, hi = binomial_interval(np.array([0]), np.array([10]), 0.95, "wilson")
    assert lo[0] == 0.0 and hi[0] == pytest.approx(3.8415 / 13.8415, abs=1e-4)
    lo, hi = binomial_interval(np.array([0, 10]), np.array([10, 10]), 0.95, "clopper-pearson")
    assert hi[0] == pytest.approx(1 - 0.025 ** 0.1, abs=1e-9)
    assert lo[1] == pytest.approx(0.025 ** 0.1, abs=1e-9) and hi[1] == 1.0
    lo, hi = binomial_interval(np.array([0]), np.array([0]))
    assert np.isnan(lo[0]) and np.isnan(hi[0])
    with pytest.raises(ValueError):
        binomial_interval(np.array([1]), np.array([2]), method="bogus")


def test_group_rates_counts():
    scores = np.array([0.9, 0.2, 0.8, 0.1, 0.6, 0.7, 0.3, 0.95])
    labels = np.array([1, 1, 0, 0, 1, 0, 0, 1])
    group = np.array(["a", "a", "a", "a", "b", "b", "b", None], dtype=object)
    r = group_rates(scores, labels, group, [0.5]).set_index("group")
    assert r.loc["a", "false_matches"] == 1 and r.loc["a", "n_impostor"] == 2
    assert r.loc["a", "false_non_matches"] == 1 and r.loc["a", "fnmr"] == 0.5
    assert r.loc["b", "fmr"] == 0.5 and r.loc["b", "fnmr"] == 0.0
    assert list(r.index) == ["a", "b"]
    assert (r["fmr_lo"] <= r["fmr"]).all() and (r["fmr"] <= r["fmr_hi"]).all()


def _two_groups() -> pd.DataFrame:
    """Groups a and b at one fixed threshold 0.5: a's impostors match once in two, b's
    never; every genuine pair of either group matches (FNMR 0 and 0)."""
    return pd.DataFrame({
        "score": [0.6, 0.1, 0.1, 0.2, 0.9, 0.8, 0.9, 0.7],
        "label": [0, 0, 0, 0, 1, 1, 1, 1],
        "group": ["a", "a", "b", "b", "a", "a", "b", "b"],
        "status": "ok", "in_reference": True, "in_cells": True})


def test_ratio_over_a_group_without_false_matches_reads_na_with_the_group(caplog):
    """fmr_max_min, fmr_max_geomean and the inequity rate are inf in the file (b has no
    false match); the report's table says n/a and names b, the log says the same, and the
    FNMR ratios (0 and 0: no differential) stay 1."""
    cfg = {"thresholds": {"fixed": [0.5]}, "alpha": 0.5}
    with caplog.at_level(logging.WARNING, logger="facecast.fairness.assess"):
        thr, rates = _thresholds_and_rates(_two_groups(), cfg, None)
    row = thr.iloc[0]
    assert row["fmr_max_min"] == row["fmr_max_geomean"] == row["inequity_rate"] == math.inf
    assert row["fnmr_max_min"] == 1.0
    view, _, _ = report_views(thr, rates, pd.DataFrame())
    note = "n/a (0 false matches in b)"
    assert view.loc[0, "fmr_max_min"] == view.loc[0, "fmr_max_geomean"] == note
    assert view.loc[0, "inequity_rate"] == note and view.loc[0, "fnmr_max_min"] == 1.0
    table = to_markdown(view, ["name", "fmr_max_min", "fnmr_max_min", "inequity_rate"])
    assert "inf" not in table and note in table
    assert "fmr_max_min, fmr_max_geomean, inequity_rate infinite" in caplog.text
    assert note in caplog.text


def test_zero_rate_notes_name_every_group_at_zero_and_both_rates():
    thr = pd.DataFrame({"fmr_max_min": [math.inf, 2.0, 1.0], "fnmr_max_min": [math.inf] * 2
                        + [1.0], "inequity_rate": [math.inf, math.inf, 1.0]})
    rates = pd.DataFrame({"threshold_index": [0, 0, 0, 1, 1, 1, 2, 2, 2],
                          "group": ["a", "b", "c"] * 3,
                          "fmr": [0.1, 0.0, 0.0, 0.2, 0.1, 0.1, 0.0, 0.0, 0.0],
                          "fnmr": [0.0, 0.3, np.nan, 0.0, 0.3, 0.1, 0.0, 0.0, 0.0]})
    notes = zero_rate_notes(thr, rates)
    assert notes[0] == {"fmr_max_min": "n/a (0 false matches in b, c)",
                        "fnmr_max_min": "n/a (0 false non-matches in a)",
                        "inequity_rate": "n/a (0 false matches in b, c; "
                                         "0 false non-matches in a)"}
    assert notes[1] == {"fnmr_max_min": "n/a (0 false non-matches in a)",
                        "inequity_rate": "n/a (0 false non-matches in a)"}
    assert notes[2] == {}  # all rates 0: no differential, ratio 1
    shown = mark_zero_rates(thr, rates)
    assert shown.loc[1, "fmr_max_min"] == 2.0 and shown.loc[2, "inequity_rate"] == 1.0
