"""Cross-demographic FMR matrices, per-group thresholds and bootstrap bands: small cases
worked by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facecast.evaluate.bands import (
    group_rate_band_table,
    group_rates_weighted,
    roc_band_table,
    tar_at_fars,
)
from facecast.evaluate.metrics import roc_points, tar_at_far
from facecast.fairness.cross_matrix import fmr_matrix
from facecast.fairness.group_thresholds import (
    group_threshold_table,
    threshold_at_fmr,
    weighted_threshold,
)
from facecast.fairness.threshold import group_rates


def test_three_group_fmr_matrix_by_hand():
    cells = {("A", "A"): [0.9, 0.1], ("A", "B"): [0.6, 0.2, 0.3], ("B", "A"): [0.7],
             ("B", "B"): [0.4], ("B", "C"): [0.55], ("C", "C"): [0.2, 0.8, 0.1, 0.05]}
    va, vb, s = [], [], []
    for (a, b), scores in cells.items():
        va += [a] * len(scores)
        vb += [b] * len(scores)
        s += scores
    va.append(None)  # a pair with a missing value is left out
    vb.append("A")
    s.append(0.99)
    t = fmr_matrix(np.array(s), np.array(va, dtype=object), np.array(vb, dtype=object),
                   [0.5], ["t=0.5"], order=["A", "B", "C"])
    assert len(t) == 9
    cell = t.set_index(["value_i", "value_j"])
    assert (cell.loc[("A", "A"), "false_matches"], cell.loc[("A", "A"), "n_impostor"]) == (1, 2)
    # A-B and B-A are the same unordered cell: 4 impostors, 0.6 and 0.7 match
    for key in (("A", "B"), ("B", "A")):
        assert cell.loc[key, "n_impostor"] == 4 and cell.loc[key, "fmr"] == 0.5
    assert cell.loc[("B", "B"), "fmr"] == 0.0
    assert cell.loc[("B", "C"), "fmr"] == 1.0 and cell.loc[("C", "B"), "n_impostor"] == 1
    assert cell.loc[("C", "C"), "fmr"] == 0.25
    assert np.isnan(cell.loc[("A", "C"), "fmr"])
    assert cell.loc[("A", "C"), "fmr_text"] == "n/a (0 impostors)"
    assert cell.loc[("C", "C"), "fmr_text"] == "1/4"
    assert cell.loc[("C", "C"), "fmr_lo"] < 0.25 < cell.loc[("C", "C"), "fmr_hi"]
    # accept iff score >= t: a score equal to the threshold is a false match
    t2 = fmr_matrix(np.array([0.5]), np.array(["A"], object), np.array(["A"], object),
                    [0.5], ["t"])
    assert t2["false_matches"].iloc[0] == 1


def _toy():
    # group X impostors 0.1..0.4, genuines 0.35, 0.5; group Y impostors 0.5..0.8,
    # genuines 0.65, 0.9; one mixed impostor (group None) at 0.0
    s = np.array([0.1, 0.2, 0.3, 0.4, 0.35, 0.5, 0.5, 0.6, 0.7, 0.8, 0.65, 0.9, 0.0])
    y = np.array([0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0], bool)
    g = np.array(["X"] * 6 + ["Y"] * 6 + [None], dtype=object)
    return s, y, g


def test_per_group_thresholds_by_hand():
    s, y, g = _toy()
    t = group_threshold_table(s, y, g, [0.25, 0.1]).set_index(["target_fmr", "group"])
    # global over 9 impostors, k = floor(0.25 * 9) = 2: t just above 0.6
    x, yy = t.loc[(0.25, "X")], t.loc[(0.25, "Y")]
    assert x["global_threshold"] == pytest.approx(0.6) and x["global_threshold"] > 0.6
    assert x["group_threshold"] == pytest.approx(0.3) and x["group_threshold"] > 0.3
    assert yy["group_threshold"] == pytest.approx(0.7) and yy["group_threshold"] > 0.7
    assert x["fmr_global"] == 0.0 and yy["fmr_global"] == 0.5
    assert x["deviation_global"] == -1.0 and yy["deviation_global"] == pytest.approx(1.0)
    assert x["deviation_group"] == 0.0 and yy["deviation_group"] == 0.0
    assert x["tar_global"] == 0.0 and x["tar_group"] == 1.0
    assert yy["tar_global"] == 1.0 and yy["tar_group"] == 0.5
    assert bool(x["resolvable"])
    assert not bool(t.loc[(0.1, "X"), "resolvable"])  # 4 impostors cannot resolve 0.1


def test_cross_validated_thresholds_on_duplicated_folds_equal_in_sample():
    s, y, g = _toy()
    s2, y2, g2 = np.r_[s, s], np.r_[y, y], np.r_[g, g]
    folds = np.array(["0"] * len(s) + ["1"] * len(s))
    t = group_threshold_table(s2, y2, g2, [0.25], folds=folds)
    for col in ("fmr_global", "fmr_group", "tar_global", "tar_group"):
        np.testing.assert_allclose(t[f"{col}_cv"], t[col])


def test_threshold_helpers_agree_and_bootstrap_brackets():
    rng = np.random.default_rng(0)
    imp = rng.random(50)
    for target in (0.02, 0.1, 0.5, 1.0):
        assert weighted_threshold(imp, np.ones((1, 50)), target)[0] == threshold_at_fmr(
            imp, target)
    s = np.r_[rng.normal(0.7, 0.1, 300), rng.normal(0.3, 0.1, 300)]
    y = np.r_[np.ones(300, bool), np.zeros(300, bool)]
    g = np.where(np.arange(600) % 2 == 0, "X", "Y").astype(object)
    ida = np.r_[np.arange(300) % 30, np.arange(300) % 30].astype(str)
    idb = np.r_[np.arange(300) % 30, (np.arange(300) % 30 + 7) % 30].astype(str)
    t = group_threshold_table(s, y, g, [0.05], identity_a=ida, identity_b=idb, n_boot=20,
                              seed=1)
    assert (t["deviation_group_lo"] <= t["deviation_group_hi"]).all()
    assert t["n_boot"].iloc[0] == 20


def test_roc_band_unit_weights_equal_tar_at_far():
    rng = np.random.default_rng(2)
    s = np.round(np.r_[rng.normal(0.6, 0.2, 200), rng.normal(0.2, 0.2, 400)], 2)  # ties
    y = np.r_[np.ones(200, bool), np.zeros(400, bool)]
    far, tar, thr = roc_points(s, y)
    fars = [1e-3, 0.01, 0.05, 0.2, 1.0]
    got = tar_at_fars(s, y, np.ones((1, 600)), fars)[0]
    want = [tar_at_far(far, tar, thr, f, 400)["tar"] for f in fars]
    np.testing.assert_allclose(got, want)
    ida = np.r_[np.arange(200) % 20, np.arange(400) % 20].astype(str)
    idb = np.r_[np.arange(200) % 20, (np.arange(400) + 3) % 20].astype(str)
    band = roc_band_table(s, y, ida, idb, fars=fars, n_boot=30, seed=3)
    assert band["resolvable"].tolist() == [False, True, True, True, True]
    ok = band["far"] >= 0.01
    assert (band.loc[ok, "tar_lo"] <= band.loc[ok, "tar"] + 1e-12).all()
    assert (band.loc[ok, "tar"] <= band.loc[ok, "tar_hi"] + 1e-12).all()


def test_group_rate_bands_unit_weights_equal_group_rates():
    s, y, g = _toy()
    thr = np.array([0.3, 0.5, 0.65])
    ref = group_rates(s, y, g, thr)
    codes = np.array([0 if v == "X" else 1 if v == "Y" else -1 for v in g])
    fmr, fnmr = group_rates_weighted(s, y, codes, 2, np.ones((1, len(s))), thr)
    for gi, name in enumerate(["X", "Y"]):
        r = ref[ref["group"] == name].sort_values("threshold_index")
        np.testing.assert_allclose(fmr[0, gi], r["fmr"])
        np.testing.assert_allclose(fnmr[0, gi], r["fnmr"])
    ids = np.array([f"i{k}" for k in range(len(s))])
    table = group_rate_band_table(s, y, g, ids, ids[::-1], thresholds=thr, n_boot=5, seed=0)
    assert set(table["group"]) == {"X", "Y"} and len(table) == 6
    assert isinstance(table, pd.DataFrame)
