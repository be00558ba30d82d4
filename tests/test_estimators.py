"""The estimator report (issues 42.2, 47): every figure against an independent computation.

A synthetic attribute table in the layout the estimator report reads (truth labels of a
UTKFace or FairFace dataset, faces statuses, the age_gender and fairface scorers'
columns) with known errors; the report's accuracies, intervals, tests, Holm adjustment,
MAE and confusion are recomputed here by other means (scipy's Wilson interval, Fisher's
test from the hypergeometric law, Welch's t by formula, Holm by hand per family, pandas
crosstabs). The stratified statistics themselves: tests/test_estimators_strata.py.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from facecast.attributes.estimates import (
    ESTIMATES,
    FAIRFACE_AGE_COLUMNS,
    FAIRFACE_RACE_COLUMNS,
    GENDER_CLASSES,
    TRAINED_ON,
    TRUTH_OF_COLUMN,
    Estimate,
    trained_splits,
)
from facecast.datasets.fairface import FAIRFACE_AGE_BINS, FAIRFACE_RACES, age_bin
from facecast.datasets.utkface import RACE_FROM_FAIRFACE, UTK_RACES
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.labels.estimators import COLUMNS, Settings, estimator_tables
from facecast.labels.estimators_checks import split_errors, split_plan
from facecast.labels.estimators_report import run_estimators
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


S = Settings(min_n=30, n_boot=400, seed=7, n_perm=199)


@pytest.fixture  # each test computes its own tables: mutmut credits a function only to
def utk():       # the tests during which it ran (docs/CONTRIBUTING.md, Mutation testing)
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


def _cmh(df: pd.DataFrame, race: str) -> float:
    """Mantel-Haenszel with continuity correction over the age bins, by hand."""
    dev = var = 0.0
    for _, s in df.groupby("label_age_bin"):
        mine = s["label_race"] == race
        big_n, n1, m1 = len(s), int(mine.sum()), int(s["right"].sum())
        if n1 and big_n > 1:
            dev += s.loc[mine, "right"].sum() - n1 * m1 / big_n
            var += n1 * (big_n - n1) * m1 * (big_n - m1) / (big_n ** 2 * (big_n - 1))
    return stats.chi2.sf(max(abs(dev) - 0.5, 0) ** 2 / var, 1)


def _standardised(df: pd.DataFrame, race: str) -> float:
    """The race's accuracy per age bin, weighted by the whole set's age mix."""
    w = df["label_age_bin"].value_counts(normalize=True)
    rate = df[df["label_race"] == race].groupby("label_age_bin")["right"].mean()
    return float((w * rate.reindex(w.index)).sum())


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
        assert r["p_raw"] == pytest.approx(p)
        assert r["p"] == pytest.approx(_cmh(df[df["detected"]], race), rel=1e-9)
        assert r["stratified_by"] == "age"
        assert r["accuracy_all"] == pytest.approx(det["right"].sum() / len(g))
        assert r["accuracy_std"] == pytest.approx(_standardised(df[df["detected"]], race))
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


def test_holm_within_each_estimate(utk):
    attrs, manifest, table, _ = utk
    for family, rows in table.groupby("family"):
        assert set(rows["estimator"] + " / " + rows["attribute"]) == {family}
        p = np.concatenate([rows["p"].to_numpy(), rows["p_mae"].to_numpy()])
        finite = np.flatnonzero(np.isfinite(p))
        order = finite[np.argsort(p[finite], kind="stable")]
        expected = np.full(p.shape, np.nan)
        running = 0.0
        for rank, i in enumerate(order):  # Holm step-down, written out
            running = max(running, p[i] * (len(order) - rank))
            expected[i] = min(running, 1.0)
        np.testing.assert_allclose(rows["p_adjusted"], expected[:len(rows)])
        np.testing.assert_allclose(rows["p_mae_adjusted"], expected[len(rows):])
    # another estimate's tests do not move this one's adjusted p
    alone, _ = estimator_tables(attrs.drop(columns=list(FAIRFACE_RACE_COLUMNS)), manifest, S)
    key = ["estimator", "attribute", "group_by", "group"]
    both = table.merge(alone, on=key, suffixes=("", "_alone"))
    assert len(both) == len(alone) < len(table)
    np.testing.assert_array_equal(both["p_adjusted"], both["p_adjusted_alone"])


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
    assert r["p_mae_raw"] == pytest.approx(stats.ttest_ind(
        mine, err[df["label_race"] != "Indian"], equal_var=False).pvalue)
    # the planted +5 years for Indian faces: significant within age bins too, at the
    # permutation test's floor
    assert r["p_mae"] == 1 / (S.n_perm + 1)
    w = df["label_age_bin"].value_counts(normalize=True)
    by_bin = err[df["label_race"] == "Indian"].groupby(df["label_age_bin"]).mean()
    assert r["mae_std"] == pytest.approx(float((w * by_bin.reindex(w.index)).sum()))
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


IMPORTED = (Estimate("imp", "gender", "probability", ("imp_male",), GENDER_CLASSES),
            Estimate("imp", "age", "years", ("imp_age",)))


def planted_age_only(n: int = 5000, seed: int = 11) -> pd.DataFrame:
    """White faces mostly old, Black faces mostly young; an imported estimator (no face
    detection) whose gender errors and age errors grow with age only."""
    rng = np.random.default_rng(seed)
    race = np.asarray(UTK_RACES, dtype=object)[rng.integers(0, 5, n)]
    old = rng.random(n) < np.select([race == "White", race == "Black"], [0.8, 0.2], 0.5)
    age = np.where(old, rng.integers(45, 90, n), rng.integers(1, 45, n)).astype(float)
    male = rng.integers(0, 2, n)
    wrong = rng.random(n) < 0.04 + 0.3 * (age >= 60)
    est_male = np.where(wrong, 1 - male, male)
    status = np.where(rng.random(n) < 0.1, "no_face", "ok")
    return pd.DataFrame({
        "image_id": [f"{i}.jpg" for i in range(n)], "status": status, "label_race": race,
        "label_gender": np.where(male == 1, "Male", "Female"), "label_age": age,
        "label_age_bin": age_bin(age), "imp_male": 0.1 + 0.8 * est_male,
        "imp_age": age + rng.normal(0, 1 + age / 8)})


def test_planted_age_only_errors_show_no_race_gap():
    attrs = planted_age_only()
    s = Settings(min_n=30, n_boot=50, seed=2, n_perm=999, group_by=("all", "race",
                                                                      "race x age"))
    table, _ = estimator_tables(attrs, manifest_of(attrs, 1), s, "utkface", extra=IMPORTED)
    imp = table[table["estimator"] == "imp"]
    gender = imp[imp["attribute"] == "gender"].set_index(["group_by", "group"])
    race = gender.loc["race"]
    # needs no detection: the no-face rows are scored
    assert (race["n_no_face"] == 0).all() and (race["n_scored"] == race["n"]).all()
    # raw: the old White faces look worse, the young Black faces better, "significantly"
    assert race.loc["White", "accuracy"] < race.loc["Black", "accuracy"] - 0.1
    assert race.loc["White", "p_raw"] < 1e-6 and race.loc["Black", "p_raw"] < 1e-6
    # standardised to one age mix: the races agree within their noise
    overall = gender.loc[("all", "all"), "accuracy"]
    se = np.sqrt(overall * (1 - overall) / race["n_scored"])
    assert (np.abs(race["accuracy_std"] - overall) < 3 * se).all()
    assert (race["p_adjusted"] >= 0.05).all() and (race["stratified_by"] == "age").all()
    cells = gender.loc["race x age"]
    assert (cells["p_adjusted"].dropna() >= 0.05).all()
    assert cells["p"].notna().sum() >= 20
    # the same for the age error in years
    age = imp[(imp["attribute"] == "age") & (imp["group_by"] == "race")].set_index("group")
    assert age.loc["White", "mae"] > age.loc["Black", "mae"] + 2
    assert age.loc["White", "p_mae_raw"] < 1e-10
    spread = age["mae_std"].max() - age["mae_std"].min()
    assert spread < 0.15 * age["mae_std"].mean()
    assert (age["p_mae_adjusted"] >= 0.05).all()


def fairface_table(n: int = 600, seed: int = 8) -> pd.DataFrame:
    """FairFace-like rows in two splits with the fairface head's gender and age columns:
    right on val except Black women (gender) and the 60-69 bin (read as 50-59); on train
    always right (as a head on its training images)."""
    rng = np.random.default_rng(seed)
    race = np.asarray(FAIRFACE_RACES[:2], dtype=object)[rng.integers(0, 2, n)]
    female = rng.integers(0, 2, n)
    bin_i = rng.integers(0, 9, n)
    split = np.where(np.arange(n) % 3 == 0, "train", "val")
    val = split == "val"
    wrong_g = val & (race == "Black") & (female == 1) & (rng.random(n) < 0.4)
    est_female = np.where(wrong_g, 1 - female, female)
    est_bin = np.where(val & (bin_i == 7), 6, bin_i)
    out = pd.DataFrame({
        "image_id": [f"{s}/{i}.jpg" for i, s in enumerate(split)], "split": split,
        "status": "ok", "label_race": race,
        "label_gender": np.where(female == 1, "Female", "Male"),
        "label_age_bin": np.asarray(FAIRFACE_AGE_BINS, dtype=object)[bin_i],
        "fairface_female": 0.2 + 0.6 * est_female, "fairface_male": 0.8 - 0.6 * est_female})
    for i, col in enumerate(FAIRFACE_AGE_COLUMNS):
        out[col] = np.where(est_bin == i, 0.6, 0.05)
    return out


def test_fairface_head_scored_off_its_training_split():
    attrs = fairface_table()
    manifest = manifest_of(attrs, 1)
    ok = attrs.iloc[:-1]
    val = ok[ok["split"] == "val"]
    # every split reported: the head's training rows are counted, not scored
    s = Settings(min_n=5, n_boot=20, n_perm=19, fairface_splits=())
    table, conf = estimator_tables(attrs, manifest, s, "fairface")
    g = table.query("estimator == 'fairface' and attribute == 'gender'").set_index(
        ["group_by", "group"])
    for race in FAIRFACE_RACES[:2]:
        r = g.loc[("race", race)]
        mine = val[val["label_race"] == race]
        right = np.where(mine["fairface_female"] > mine["fairface_male"], "Female", "Male")
        assert r["n"] == len(mine)
        assert r["n_train_excluded"] == (ok["label_race"] == race).sum() - len(mine)
        assert r["accuracy"] == pytest.approx((right == mine["label_gender"]).mean())
    assert g.loc[("race x gender", "Black / Female"), "accuracy"] < 0.8
    assert g.loc[("race x gender", "White / Female"), "accuracy"] == 1.0
    age = table.query("estimator == 'fairface' and attribute == 'age' and group_by == 'age'")
    age = age.set_index("group")
    assert age.loc["60-69", "accuracy"] == 0.0 and age.loc["50-59", "accuracy"] == 1.0
    assert age["n_train_excluded"].sum() == (ok["split"] == "train").sum()
    assert age["mae"].isna().all()
    cell = conf.query("estimator == 'fairface' and attribute == 'age' and group_by == 'all' "
                      "and true == '60-69'").set_index("predicted")["count"]
    assert cell["50-59"] == (val["label_age_bin"] == "60-69").sum() and cell.sum() == cell["50-59"]
    # the detector has no training split: every row is its
    det = table.query("estimator == 'detector' and group_by == 'all'").iloc[0]
    assert (det["n"], det["n_train_excluded"]) == (len(ok), 0)
    assert "upper bound" in det["note"]
    # the default: FairFace's val split only; a declared import is left out of its split
    s = Settings.from_config({"n_perm": 19, "min_n": 5,
                              "imports": {"fairface": {"trained_on": {"fairface": ["val"]}}}},
                             seed=0)
    assert s.fairface_splits == ("val",)
    table, _ = estimator_tables(attrs, manifest, s, "fairface")
    whole = table[table["group_by"] == "all"].set_index(["estimator", "attribute"])
    assert whole.loc[("detector", "face"), "n"] == len(val)
    assert whole.loc[("fairface", "gender"), "n"] == 0
    assert whole.loc[("fairface", "gender"), "n_train_excluded"] == len(val)


def test_a_fallback_crop_estimate_is_not_scored_and_counts_wrong_in_accuracy_all():
    attrs = utk_table(300, seed=4)
    attrs.loc[:19, "status"] = "fallback"  # a centre crop the scorer still read
    attrs.loc[:19, "age_gender_male"] = np.where(attrs.loc[:19, "label_male"] == 1, 0.9, 0.1)
    table, _ = estimator_tables(attrs, manifest_of(attrs, 1), Settings(min_n=5, n_perm=9,
                                                                         n_boot=10))
    r = table.query("estimator == 'age_gender' and attribute == 'gender' and "
                    "group_by == 'all'").iloc[0]
    ok = attrs.iloc[:-1]
    found = ok[ok["status"] == "ok"]
    right = (found["age_gender_male"] >= 0.5) == (found["label_male"] == 1)
    assert r["n_no_face"] == (ok["status"] != "ok").sum() >= 20
    assert r["n_scored"] == len(found)
    assert r["accuracy"] == pytest.approx(right.mean())
    assert r["accuracy_all"] == pytest.approx(right.sum() / len(ok))
    ci = stats.binomtest(int(right.sum()), len(ok)).proportion_ci(0.95, "wilson")
    assert (r["accuracy_all_lo"], r["accuracy_all_hi"]) == pytest.approx((ci.low, ci.high))


@pytest.mark.parametrize("rest", [29, 30])
def test_rest_of_exactly_min_n_is_tested(rest):
    attrs = utk_table(40 + rest, seed=5)
    attrs["label_race"] = np.where(np.arange(len(attrs)) < 40, "White", "Black")
    attrs["status"] = "ok"
    attrs["age_gender_male"] = np.where(attrs["label_male"] == 1, 0.9, 0.1)
    attrs.loc[::4, "age_gender_male"] = 0.5
    manifest = pd.DataFrame({"image_id": attrs["image_id"], "status": "ok"})
    table, _ = estimator_tables(attrs, manifest, Settings(min_n=30, n_perm=9, n_boot=10,
                                                          group_by=("race",)))
    white = table.query("estimator == 'age_gender' and attribute == 'gender' and "
                        "group == 'White'").iloc[0]
    if rest < 30:
        assert np.isnan(white["p_raw"]) and np.isnan(white["p"])
        assert f"p: n/a (the rest has {rest} scored faces < estimators.min_n 30)" in \
            white["note"]
    else:
        assert np.isfinite(white["p_raw"]) and "p: n/a (the rest has" not in white["note"]


def test_fairface_columns_pair_with_their_classes():
    def spelled(cls: str) -> str:
        return {"more than 70": "70+"}.get(cls, cls).lower().replace(" ", "_")

    heads = {e.attribute: e for e in ESTIMATES if e.estimator == "fairface"}
    assert set(heads) == {"gender", "age", "race"}
    for est in heads.values():
        assert len(est.columns) == len(est.classes)
        assert [c.removeprefix("fairface_") for c in est.columns] == \
            [spelled(c) for c in est.classes]


def test_plan_and_config_name_the_splits():
    cfg = {"datasets": {"ff": {"kind": "fairface", "root": "/ff"}},
           "attributes": {"scorers": ["fairface"]}}
    assert split_plan(cfg) == [
        "estimators: ff - FairFace split(s) val (estimators.fairface_splits); images of "
        "other splits are counted, in no group",
        "estimators: ff - fairface was trained on the train split of fairface: not among "
        "the splits reported"]
    cfg["estimators"] = {"fairface_splits": []}
    assert split_plan(cfg) == [
        "estimators: ff - fairface was trained on the train split of fairface: those images "
        "are left out of its figures (n_train_excluded)"]
    assert split_errors(cfg) == []
    cfg["estimators"] = {"fairface_splits": ["val"]}
    cfg["datasets"]["ff"]["splits"] = ["train"]
    [err] = split_errors(cfg)
    assert err.startswith("estimators.fairface_splits: ['val'] has no split of "
                          "datasets.ff.splits ['train']")


def test_report_page_counts_the_splits_left_out(tmp_path):
    attrs = fairface_table(200)
    manifest = manifest_of(attrs, 1).assign(split=attrs["split"])
    write_parquet(attrs, tmp_path / "attributes.parquet")
    write_parquet(manifest, tmp_path / "manifest.parquet")
    table = run_estimators(tmp_path / "attributes.parquet", tmp_path / "manifest.parquet",
                           tmp_path / "out", {"min_n": 5, "n_perm": 19, "n_boot": 20}, seed=1,
                           dataset="ff", kind="fairface")
    ok = attrs.iloc[:-1]
    assert table.query("estimator == 'detector' and group_by == 'all'")["n"].iloc[0] == (
        ok["split"] == "val").sum()
    md = (tmp_path / "out" / "estimators.md").read_text()
    assert f"| ok, split train (not in estimators.fairface_splits) | " \
           f"{(ok['split'] == 'train').sum()} |" in md
    assert "**accuracy_all** right / all labelled images of the group: a missed face" in md
    assert "fairface / gender: " in md and "| stratified_by |" in md
    written = read_parquet(tmp_path / "out" / "estimators.parquet")
    assert list(written.columns) == COLUMNS


def test_training_declarations_read_one_split_or_several():
    assert TRAINED_ON["fairface"] == {"fairface": ("train",)}
    assert trained_splits("fairface", "fairface") == ("train",)
    assert trained_splits("fairface", "utkface") == ()
    assert trained_splits("x", "fairface", {"x": {"fairface": "val"}}) == ("val",)
    s = Settings.from_config({"imports": {"x": {"trained_on": {"utkface": "all"}},
                                          "y": {"trained_on": {"fairface": ["train", "val"]}}}},
                             seed=0)
    assert s.trained_on == {"x": {"utkface": ("all",)}, "y": {"fairface": ("train", "val")}}
