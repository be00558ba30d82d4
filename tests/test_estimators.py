"""The estimator report (issue 42.2): every figure against an independent computation.

A synthetic attribute table in the layout the estimator report reads (truth labels of a
UTKFace or FairFace dataset, faces statuses, the age_gender and fairface scorers'
columns) with known errors; the report's accuracies, intervals, tests, Holm adjustment,
MAE and confusion are recomputed here by other means (scipy's Wilson interval, Fisher's
test from the hypergeometric law, Welch's t by formula, Holm by hand, pandas crosstabs).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from facecast.attributes.estimates import FAIRFACE_RACE_COLUMNS, TRUTH_OF_COLUMN
from facecast.datasets.fairface import FAIRFACE_RACES, age_bin
from facecast.datasets.utkface import RACE_FROM_FAIRFACE, UTK_RACES
from facecast.labels.estimators import Settings, estimator_tables
from facecast.labels.estimators_stats import (
    bootstrap_mean_interval,
    fisher_p,
    holm,
    row_seed,
    welch_p,
)


def utk_table(n: int = 900, seed: int = 3) -> pd.DataFrame:
    """UTKFace-like rows: gender errors planted for Black women, 6 % missed faces."""
    rng = np.random.default_rng(seed)
    race = np.asarray(UTK_RACES, dtype=object)[rng.integers(0, 5, n)]
    male = rng.integers(0, 2, n).astype(float)
    age = rng.integers(1, 90, n).astype(float)
    p_male = np.where(male == 1, 0.9, 0.1)
    flip = (race == "Black") & (male == 0) & (rng.random(n) < 0.35)
    p_male = np.where(flip, 0.8, p_male)
    p_male[:7] = 0.5  # exactly 0.5 counts as male (argmax of a two-class output)
    status = np.where(rng.random(n) < 0.06, "no_face", "ok").astype(object)
    est_age = age + rng.normal(0, 6, n) + np.where(race == "Indian", 5.0, 0.0)
    ff_race = rng.random((n, 7))
    return pd.DataFrame({
        "image_id": [f"{i}.jpg" for i in range(n)], "identity": [f"{i}.jpg" for i in range(n)],
        "status": status, "label_race": race,
        "label_gender": np.where(male == 1, "Male", "Female"), "label_male": male,
        "label_age": age, "label_age_bin": age_bin(age),
        "age_gender_male": np.where(status == "ok", p_male, np.nan),
        "age_gender_age": np.where(status == "ok", est_age, np.nan),
        **{c: np.where(status == "ok", ff_race[:, i], np.nan)
           for i, c in enumerate(FAIRFACE_RACE_COLUMNS)}})


def manifest_of(attrs: pd.DataFrame, bad: int = 5) -> pd.DataFrame:
    status = np.array(["ok"] * len(attrs), dtype=object)
    status[-bad:] = "bad_label"
    return pd.DataFrame({"image_id": attrs["image_id"], "status": status})


S = Settings(min_n=30, n_boot=400, seed=7)


@pytest.fixture(scope="module")
def utk():
    attrs = utk_table()
    manifest = manifest_of(attrs)
    return attrs, manifest, *estimator_tables(attrs, manifest, S)


def test_holm_by_hand():
    p = np.array([0.01, 0.04, 0.03, np.nan, 0.005])
    # sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 = 0.02, 0.03, 0.06, 0.04 -> running max
    np.testing.assert_allclose(holm(p), [0.03, 0.06, 0.06, np.nan, 0.02])
    assert np.isnan(holm(np.array([np.nan]))).all()


def test_fisher_welch_and_bootstrap_against_formulas():
    for k, n1, kr, n2 in ((14, 40, 35, 60), (0, 5, 9, 9), (5, 5, 0, 7), (120, 4000, 31, 900),
                          (3, 3, 3, 3)):
        assert fisher_p(k, n1, kr, n2) == pytest.approx(
            stats.fisher_exact([[k, n1 - k], [kr, n2 - kr]])[1], rel=1e-9)
    a = np.array([3.0, 5.5, 2.0, 8.0, 4.0, 6.5])
    b = np.array([1.0, 2.0, 2.5, 1.5, 3.0, 2.0, 1.0, 2.2])
    assert welch_p(a, b) == pytest.approx(stats.ttest_ind(a, b, equal_var=False).pvalue)
    assert np.isnan(fisher_p(3, 0, 2, 5)) and np.isnan(welch_p(a[:1], b))
    x = np.random.default_rng(1).exponential(5.0, 400)
    lo, hi = bootstrap_mean_interval(x, 2000, 0.95, row_seed(1, "k"))
    half = 1.96 * x.std(ddof=1) / np.sqrt(x.size)  # the normal approximation
    assert lo == pytest.approx(x.mean() - half, rel=0.04)
    assert hi == pytest.approx(x.mean() + half, rel=0.04)
    assert (lo, hi) == bootstrap_mean_interval(x, 2000, 0.95, row_seed(1, "k"))


def _independent(attrs: pd.DataFrame, manifest: pd.DataFrame) -> pd.DataFrame:
    """Per-image truth and the age_gender gender estimate, computed here."""
    ok = manifest.loc[manifest["status"] == "ok", "image_id"]
    df = attrs[attrs["image_id"].isin(ok)].copy()
    df["detected"] = df["status"] == "ok"
    df["pred"] = np.where(df["age_gender_male"] >= 0.5, "Male", "Female")
    df["right"] = df["detected"] & (df["pred"] == df["label_gender"])
    return df


def test_gender_accuracy_intervals_and_tests(utk):
    attrs, manifest, table, _ = utk
    df = _independent(attrs, manifest)
    rows = table[(table["estimator"] == "age_gender") & (table["attribute"] == "gender")]
    by_race = rows[rows["group_by"] == "race"].set_index("group")
    for race, g in df.groupby("label_race"):
        r = by_race.loc[race]
        det = g[g["detected"]]
        assert (r["n"], r["n_no_face"], r["n_scored"]) == (len(g), (~g["detected"]).sum(),
                                                           len(det))
        assert r["accuracy"] == pytest.approx(det["right"].mean())
        ci = stats.binomtest(int(det["right"].sum()), len(det)).proportion_ci(0.95, "wilson")
        assert (r["accuracy_lo"], r["accuracy_hi"]) == pytest.approx((ci.low, ci.high))
        rest = df[df["detected"] & (df["label_race"] != race)]
        p = stats.fisher_exact([[det["right"].sum(), (~det["right"]).sum()],
                                [rest["right"].sum(), (~rest["right"]).sum()]])[1]
        assert r["p"] == pytest.approx(p)
    # the planted errors: Black women are the worst gender group, significantly
    inter = rows[rows["group_by"] == "race x gender"].set_index("group")
    assert inter["accuracy"].idxmin() == "Black / Female"
    assert inter.loc["Black / Female", "p_adjusted"] < 0.05
    # the whole dataset has no rest: no test, said so
    whole = rows[rows["group_by"] == "all"].iloc[0]
    assert np.isnan(whole["p"]) and "no rest to compare" in whole["note"]


def test_detector_rows_count_missed_faces(utk):
    attrs, manifest, table, _ = utk
    df = _independent(attrs, manifest)
    det = table[table["estimator"] == "detector"].query("group_by == 'gender'").set_index(
        "group")
    for gender, g in df.groupby("label_gender"):
        assert det.loc[gender, "n_no_face"] == (~g["detected"]).sum()
        assert det.loc[gender, "accuracy"] == pytest.approx(g["detected"].mean())
    # images whose labels are bad are in no group
    assert table.query("group_by == 'all'")["n"].iloc[0] == len(attrs) - 5


def test_holm_over_the_whole_table(utk):
    _, _, table, _ = utk
    family = np.concatenate([table["p"].to_numpy(), table["p_mae"].to_numpy()])
    finite = np.flatnonzero(np.isfinite(family))
    order = finite[np.argsort(family[finite], kind="stable")]
    expected = np.full(family.shape, np.nan)
    running = 0.0
    for rank, i in enumerate(order):  # Holm step-down, written out
        running = max(running, family[i] * (len(order) - rank))
        expected[i] = min(running, 1.0)
    np.testing.assert_allclose(table["p_adjusted"], expected[:len(table)])
    np.testing.assert_allclose(table["p_mae_adjusted"], expected[len(table):])


def test_age_mae_and_bins(utk):
    attrs, manifest, table, _ = utk
    df = _independent(attrs, manifest)
    df = df[df["detected"]]
    rows = table.query("estimator == 'age_gender' and attribute == 'age'")
    err = (df["age_gender_age"] - df["label_age"]).abs()
    r = rows.query("group_by == 'race' and group == 'Indian'").iloc[0]
    mine = err[df["label_race"] == "Indian"]
    assert r["mae"] == pytest.approx(mine.mean())
    assert r["mae_lo"] < r["mae"] < r["mae_hi"]
    assert r["p_mae"] == pytest.approx(stats.ttest_ind(mine, err[df["label_race"] != "Indian"],
                                                       equal_var=False).pvalue)
    right = age_bin(df["age_gender_age"].to_numpy()) == df["label_age_bin"].to_numpy()
    assert rows.query("group_by == 'all'")["accuracy"].iloc[0] == pytest.approx(right.mean())


def test_small_groups_read_na_with_the_reason(utk):
    _, _, table, _ = utk
    small = table[(table["estimator"] == "age_gender") & (table["n_scored"] < S.min_n)]
    assert len(small) and small["accuracy"].isna().all() and small["p"].isna().all()
    assert small["note"].str.contains(r"accuracy: n/a \(\d+ scored faces < estimators.min_n "
                                      r"30\)").all()


def test_race_head_on_utkface_is_collapsed(utk):
    attrs, manifest, table, utk_conf = utk
    df = _independent(attrs, manifest)
    df = df[df["detected"]]
    seven = np.asarray(FAIRFACE_RACES, dtype=object)[
        df[list(FAIRFACE_RACE_COLUMNS)].to_numpy().argmax(axis=1)]
    five = np.array([RACE_FROM_FAIRFACE[r] for r in seven])
    rows = table.query("estimator == 'fairface' and attribute == 'race'")
    assert rows.query("group_by == 'all'")["accuracy"].iloc[0] == pytest.approx(
        (five == df["label_race"].to_numpy()).mean())
    conf = utk_conf.query("estimator == 'fairface' and group_by == 'all'")
    cross = pd.crosstab(df["label_race"], five)
    for _, c in conf.iterrows():
        expected = cross.loc[c["true"], c["predicted"]] if c["predicted"] in cross else 0
        assert c["count"] == expected
        assert c["rate"] == pytest.approx(expected / cross.loc[c["true"]].sum())
    assert set(conf["predicted"]) == set(UTK_RACES)


def test_fairface_truth_has_no_years():
    attrs = utk_table(200).drop(columns=["label_age"])
    table, _ = estimator_tables(attrs, manifest_of(attrs), Settings(min_n=5, n_boot=50))
    age = table.query("estimator == 'age_gender' and attribute == 'age'")
    assert age["mae"].isna().all()
    assert age["note"].str.contains(r"mae: n/a \(the truth is an age bin").all()
    assert age["accuracy"].notna().any()


def test_truth_of_estimate_columns():
    assert TRUTH_OF_COLUMN["age_gender_male"] == "label_male"
    assert TRUTH_OF_COLUMN["age_gender_age"] == "label_age"
