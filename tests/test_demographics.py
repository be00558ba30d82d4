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


# ---------------------------------------------------------------- issue 46.2: BFW's rules


def _bfw_like():
    """Two subgroups X, Y: 5 impostors within each (X 0.1..0.5, Y 0.6..1.0), 5 impostors
    across them (all 0.0), genuines X 0.45, 0.95 and Y 0.85, 0.75, 0.95."""
    s = np.r_[[0.1, 0.2, 0.3, 0.4, 0.5], [0.6, 0.7, 0.8, 0.9, 1.0], np.zeros(5),
              [0.45, 0.95], [0.85, 0.75, 0.95]]
    y = np.r_[np.zeros(15, bool), np.ones(5, bool)]
    g = np.array(["X"] * 5 + ["Y"] * 5 + [None] * 5 + ["X"] * 2 + ["Y"] * 3, dtype=object)
    return s, y, g


def test_global_threshold_same_group_against_all_by_hand():
    """BFW's rule (a1 == a2) fits the global threshold on the 10 impostors within a
    subgroup; NIST's on all 15. At FMR 0.2: k = 2 of 10 -> just above 0.8; k = 3 of 15 ->
    just above 0.7."""
    s, y, g = _bfw_like()
    same = group_threshold_table(s, y, g, [0.2], global_mask=pd.notna(g)).set_index("group")
    every = group_threshold_table(s, y, g, [0.2]).set_index("group")
    assert same.loc["X", "n_impostor_global"] == 10 and every.loc["X", "n_impostor_global"] == 15
    assert same.loc["X", "global_threshold"] == np.nextafter(0.8, 1)
    assert every.loc["X", "global_threshold"] == np.nextafter(0.7, 1)
    assert same.loc["Y", "fmr_global"] == 0.4 and same.loc["Y", "deviation_global"] == 1.0
    assert every.loc["Y", "fmr_global"] == 0.6
    assert every.loc["Y", "deviation_global"] == pytest.approx(2.0)
    assert same.loc["X", "deviation_global"] == every.loc["X", "deviation_global"] == -1.0
    assert same.loc["Y", "tar_global"] == pytest.approx(2 / 3)
    assert every.loc["Y", "tar_global"] == 1.0
    # the subgroup's own threshold does not depend on the rule
    for t in (same, every):
        assert t.loc["X", "group_threshold"] == np.nextafter(0.4, 1)
        assert t.loc["Y", "group_threshold"] == np.nextafter(0.9, 1)
        assert (t.loc["X", "tar_group"], t.loc["Y", "tar_group"]) == (1.0, pytest.approx(1 / 3))
    # cross-validated and bootstrapped fits follow the same rule
    folds = np.r_[np.zeros(len(s)), np.ones(len(s))].astype(int).astype(str)
    ids = np.array([f"i{k}" for k in range(2 * len(s))])
    cv = group_threshold_table(np.r_[s, s], np.r_[y, y], np.r_[g, g], [0.2], folds=folds,
                               global_mask=pd.notna(np.r_[g, g]), identity_a=ids,
                               identity_b=ids[::-1], n_boot=40, seed=0).set_index("group")
    assert cv.loc["Y", "deviation_global_cv"] == 1.0 and cv.loc["Y", "tar_global_cv"] == \
        pytest.approx(2 / 3)
    assert cv.loc["Y", "deviation_global_lo"] <= 1.0 <= cv.loc["Y", "deviation_global_hi"]


def _write_bfw_like(root, failures=False):
    """The pairs of :func:`_bfw_like` as a scores file and an attribute table (one image per
    pair side; identity = image stem). With ``failures``: an X genuine pair and a Y impostor
    pair without a feature (status no_face, score NaN)."""
    s, y, g = _bfw_like()
    rows = []
    for k, (score, lab, grp) in enumerate(zip(s, y, g, strict=True)):
        ga, gb = (grp, grp) if grp else ("X", "Y")
        ia, ib = (f"{ga}{k}", f"{gb}{k}") if lab else (f"{ga}{k}a", f"{gb}{k}b")
        rows.append((f"{ia}/1", f"{ib}/2", ia, ib, int(lab), score, "ok"))
    if failures:
        rows += [("X90/1", "X90/2", "X90", "X90", 1, np.nan, "no_face"),
                 ("Y91a/1", "Y91b/2", "Y91a", "Y91b", 0, np.nan, "no_face")]
    pairs = pd.DataFrame(rows, columns=["image_a", "image_b", "identity_a", "identity_b",
                                       "label", "score", "status"])
    pairs.to_parquet(root / "pairs.parquet")
    img = pd.concat([pairs[["image_a", "identity_a"]].set_axis(["image_id", "identity"], axis=1),
                     pairs[["image_b", "identity_b"]].set_axis(["image_id", "identity"], axis=1)])
    img = img.drop_duplicates("image_id")
    img["label_sub"] = img["identity"].str[0]
    img.to_parquet(root / "attributes.parquet")
    return root


SUB = {"protected": {"sub": {"column": "label_sub"}}, "sync": "majority"}


def _demo(root, out, cfg, fairness=SUB):
    from facecast.fairness.demographics import run_demographics

    run_demographics(root / "pairs.parquet", root / "attributes.parquet", out,
                     {"n_boot": 0, "band_points": 5, "fmr_targets": [0.2], **cfg}, fairness,
                     model="m", protocol="p", seed=0)
    return (pd.read_parquet(out / "thresholds.parquet"),
            pd.read_parquet(out / "group_thresholds.parquet").set_index("group"),
            pd.read_parquet(out / "cross_fmr.parquet"))


def test_demographics_global_pairs_and_mixed_pairs_exclude(tmp_path):
    root = _write_bfw_like(tmp_path)
    thr, gt, cross = _demo(root, tmp_path / "same", {"global_pairs": "same_group"})
    assert thr["global_pairs"].tolist() == ["same_group"] and thr["n_impostor"].iat[0] == 10
    assert thr["threshold"].iat[0] == np.nextafter(0.8, 1)
    assert gt.loc["Y", "deviation_global"] == 1.0 and gt.loc["Y", "global_pairs"] == "same_group"
    assert "global_pairs: same_group" in (tmp_path / "same/tables.html").read_text()
    thr, gt, cross = _demo(root, tmp_path / "all", {"global_pairs": "all"})
    assert thr["n_impostor"].iat[0] == 15 and thr["threshold"].iat[0] == np.nextafter(0.7, 1)
    assert gt.loc["Y", "deviation_global"] == pytest.approx(2.0)
    xy = cross[(cross["attribute"] == "group") & (cross["value_i"] == "X")
               & (cross["value_j"] == "Y")]
    assert xy["n_impostor"].iat[0] == 5 and xy["false_matches"].iat[0] == 0
    # fairness.mixed_pairs: exclude holds here too: the 5 pairs across subgroups are gone
    thr, gt, cross = _demo(root, tmp_path / "ex", {"global_pairs": "all"},
                           {**SUB, "mixed_pairs": "exclude"})
    assert thr["n_impostor"].iat[0] == 10 and thr["threshold"].iat[0] == np.nextafter(0.8, 1)
    xy = cross[(cross["attribute"] == "group") & (cross["value_i"] == "X")
               & (cross["value_j"] == "Y")]
    assert xy["n_impostor"].iat[0] == 0 and xy["fmr_text"].iat[0] == "n/a (0 impostors)"


def test_demographics_failure_rule(tmp_path):
    """nonmatch: the failed X genuine pair is a false non-match (TAR_X 1/3), the failed Y
    impostor a correct reject (FMR_Y 2/6); no threshold is fitted on them. drop: both
    left out (TAR_X 1/2, FMR_Y 2/5). Either way n_failed and failed_rate per group."""
    root = _write_bfw_like(tmp_path, failures=True)
    thr, gt, _ = _demo(root, tmp_path / "n", {"global_pairs": "same_group",
                                              "failed": "nonmatch"})
    assert thr["n_impostor"].iat[0] == 10 and thr["threshold"].iat[0] == np.nextafter(0.8, 1)
    assert thr["n_failed"].iat[0] == 2
    assert gt.loc["X", "tar_global"] == pytest.approx(1 / 3)
    assert gt.loc["Y", "fmr_global"] == pytest.approx(2 / 6)
    assert gt.loc["Y", "deviation_global"] == pytest.approx((2 / 6 - 0.2) / 0.2)
    assert gt.loc["Y", "n_impostor"] == 6 and gt.loc["Y", "group_threshold"] == \
        np.nextafter(0.9, 1)
    assert (gt.loc["X", "n_failed"], gt.loc["Y", "n_failed"]) == (1, 1)
    assert gt.loc["X", "failed_rate"] == pytest.approx(1 / 8)
    assert gt.loc["Y", "failed_rate"] == pytest.approx(1 / 9)
    assert "count as non-matches" in (tmp_path / "n/tables.html").read_text()
    thr, gt, _ = _demo(root, tmp_path / "d", {"global_pairs": "same_group", "failed": "drop"})
    assert thr["n_failed"].iat[0] == 2 and thr["threshold"].iat[0] == np.nextafter(0.8, 1)
    assert gt.loc["X", "tar_global"] == 0.5 and gt.loc["Y", "fmr_global"] == 0.4
    assert gt.loc["Y", "n_impostor"] == 5 and gt.loc["X", "n_failed"] == 1
    assert gt.loc["X", "failed_rate"] == pytest.approx(1 / 8)


def test_demographics_config_by_dataset_kind():
    from facecast.fairness.targets import demographics_config

    cfg = {"datasets": {"b": {"kind": "bfw"}, "l": {"kind": "lfw"}},
           "fairness": {"thresholds": {"fmr_targets": [1e-3]}}, "demographics": {"n_boot": 3}}
    b, lfw = demographics_config(cfg, "b"), demographics_config(cfg, "l")
    assert b["global_pairs"] == "same_group" and b["fmr_targets"] == [0.3, 0.1, 0.01, 0.001,
                                                                       0.0001]
    assert lfw["global_pairs"] == "all" and lfw["fmr_targets"] == [1e-3]
    assert b["failed"] == lfw["failed"] == "nonmatch" and b["n_boot"] == 3
    cfg["demographics"] = {"global_pairs": "all", "fmr_targets": [0.05]}
    cfg["evaluate"] = {"failed": "drop"}
    assert demographics_config(cfg, "b") == {"global_pairs": "all", "fmr_targets": [0.05],
                                             "failed": "drop"}


def test_failed_pairs_count_in_rates_but_set_no_threshold():
    """X: impostors 0.1..0.5 and five without a feature (-inf), genuines 0.45 and one
    without a feature. At FMR 0.2 the thresholds are fitted on the five scored impostors
    (k = 1: just above 0.4; fitted on all ten it would be k = 2: just above 0.3), the rates
    count all: FMR 1/10, TAR 1/2."""
    s = np.r_[[0.1, 0.2, 0.3, 0.4, 0.5], np.full(5, -np.inf), [0.45, -np.inf]]
    y = np.r_[np.zeros(10, bool), [True, True]]
    g = np.array(["X"] * 12, dtype=object)
    bad = np.isinf(s)
    t = group_threshold_table(s, y, g, [0.2], failed=bad).iloc[0]
    assert t["group_threshold"] == t["global_threshold"] == np.nextafter(0.4, 1)
    assert t["n_impostor_global"] == 5 and t["n_impostor"] == 10
    assert t["fmr_group"] == 0.1 and t["deviation_group"] == pytest.approx(-0.5)
    assert t["tar_group"] == 0.5 and t["n_failed"] == 6 and t["failed_rate"] == 0.5
    folds = np.array(["a", "b"] * 6)
    cv = group_threshold_table(np.r_[s, s], np.r_[y, y], np.r_[g, g], [0.2],
                               failed=np.r_[bad, bad], folds=np.r_[folds, folds[::-1]])
    assert cv["fmr_group_cv"].iat[0] == 0.1  # the other fold's 5 scored impostors again
