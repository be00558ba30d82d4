"""Issue 51: the estimator report's own code (facecast.labels.estimators) on small tables
counted by hand: which images enter groups and with which split, the race classes, every
estimate kind's class (0.5 exactly, ties, NaN, a class the estimator does not know), the
group labels and codes of every group_by, what an estimate did per row (a missed face
with a right estimate, a training image), the rows of one estimate, the Holm families and
the confusion table cell by cell (counts, n_true, rate, Wilson interval at 90 %, a true
class at exactly min_n). Every test calls the code itself (no shared fixture: mutmut
credits a function only to the tests during which it ran)."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import facecast.labels.estimators as E
from facecast.attributes.estimates import (
    FAIRFACE_RACE_COLUMNS,
    GENDER_CLASSES,
    Estimate,
)
from facecast.datasets.fairface import FAIRFACE_AGE_BINS, FAIRFACE_RACES
from facecast.datasets.utkface import RACE_FROM_FAIRFACE, UTK_RACES
from facecast.labels.estimators_rows import Settings
from facecast.labels.estimators_stats import bootstrap_mean_interval, row_seed

CLASSES = {"race": FAIRFACE_RACES, "gender": GENDER_CLASSES, "age": FAIRFACE_AGE_BINS}
CONF_COLUMNS = ["estimator", "attribute", "group_by", "group", "true", "predicted", "count",
                "n_true", "rate", "rate_lo", "rate_hi", "note"]


def _wilson(k: int, n: int, confidence: float) -> tuple[float, float]:
    ci = stats.binomtest(k, n).proportion_ci(confidence, "wilson")
    return ci.low, ci.high


# --- split_column ------------------------------------------------------------------------

def test_split_column_is_the_attribute_tables_own_as_text():
    attrs = pd.DataFrame({"image_id": [1, 2, 3], "split": [0, 1, 0]}, index=[10, 11, 12])
    # the manifest's split is not read when the attribute table has one
    out = E.split_column(attrs, pd.DataFrame({"image_id": [1, 2, 3], "split": [9, 9, 9]}))
    assert out.tolist() == ["0", "1", "0"] and out.index.tolist() == [10, 11, 12]


def test_split_column_from_the_manifest_by_image_id_else_all():
    attrs = pd.DataFrame({"image_id": [1, 2, 3]}, index=[10, 11, 12])
    # integer ids on both sides and integer splits: matched and written as text;
    # image 2 is not in the manifest: "all"
    manifest = pd.DataFrame({"image_id": [3, 1], "split": [7, 8]})
    out = E.split_column(attrs, manifest)
    assert out.tolist() == ["8", "all", "7"] and out.index.tolist() == [10, 11, 12]


def test_split_column_without_any_split_is_all_on_the_tables_index():
    attrs = pd.DataFrame({"image_id": [1, 2, 3]}, index=[10, 11, 12])
    out = E.split_column(attrs, pd.DataFrame({"image_id": [1, 2, 3], "status": "ok"}))
    assert out.tolist() == ["all", "all", "all"] and out.index.tolist() == [10, 11, 12]


# --- truth_frame ---------------------------------------------------------------------------

def _attrs_for_truth() -> pd.DataFrame:
    return pd.DataFrame({
        "image_id": [1, 2, 3, 4, 5, 6],
        "split": ["val", "val", "train", "val", "val", "test"],
        "status": ["ok", "no_face", "ok", "aligned_input", "landmarks_given", "fallback"],
        "label_race": pd.Categorical(["White", "Black", "White", None, "Black", "White"]),
        "label_gender": pd.Categorical(["Male", "Female", "Male", "Female", None, "Male"]),
        "label_age_bin": pd.Categorical(["20-29", "0-2", "20-29", "3-9", "more than 70",
                                         None]),
        "label_age": np.array([25, "x", 21, 5, 80, None], dtype=object),
        "foo": [1.5, 2.5, 3.5, 4.5, 5.5, 6.5]}, index=[100, 101, 102, 103, 104, 105])


def _manifest_for_truth() -> pd.DataFrame:
    # integer ids (as the attribute table's): image 5 has a bad label, in no group
    return pd.DataFrame({"image_id": [1, 2, 3, 4, 5, 6],
                         "status": ["ok", "ok", "ok", "ok", "bad_label", "ok"]})


def test_truth_frame_keeps_ok_images_of_the_splits_in_table_order():
    out = E.truth_frame(_attrs_for_truth(), _manifest_for_truth(), ("val", "test"))
    # ok: 1, 2, 3, 4, 6; of val or test: 1, 2, 4, 6 (3 is train), on a fresh index
    assert out.index.tolist() == [0, 1, 2, 3]
    assert list(out.columns) == ["image_id", "split", "status", "label_race", "label_gender",
                                 "label_age_bin", "label_age", "foo", "race", "gender", "age",
                                 "age_years", "detected"]
    assert out["image_id"].tolist() == [1, 2, 4, 6]
    assert out["foo"].tolist() == [1.5, 2.5, 4.5, 6.5]
    assert out["split"].tolist() == ["val", "val", "val", "test"]
    assert out["race"].tolist()[:2] == ["White", "Black"] and pd.isna(out["race"][2])
    assert out["gender"].tolist() == ["Male", "Female", "Female", "Male"]
    assert out["age"].tolist()[:3] == ["20-29", "0-2", "3-9"] and pd.isna(out["age"][3])
    for col in ("race", "gender", "age"):  # plain objects, not the table's categoricals
        assert out[col].dtype == object
    # "x" and None are no years
    np.testing.assert_array_equal(out["age_years"].to_numpy(np.float64),
                                  [25.0, np.nan, 5.0, np.nan])
    # ok and aligned_input are detected faces; no_face and a fallback crop are not
    assert out["detected"].tolist() == [True, False, True, False]


@pytest.mark.parametrize("splits", [None, ()])
def test_truth_frame_without_splits_keeps_every_split(splits):
    out = E.truth_frame(_attrs_for_truth(), _manifest_for_truth(), splits)
    assert out["image_id"].tolist() == [1, 2, 3, 4, 6]
    assert out["split"].tolist() == ["val", "val", "train", "val", "test"]
    assert out["detected"].tolist() == [True, False, True, True, False]


def test_truth_frame_split_from_the_manifest_and_no_years_column():
    attrs = _attrs_for_truth().drop(columns=["split", "label_age"])
    manifest = _manifest_for_truth().assign(split=["a", "b", "a", "b", "a", "b"])
    out = E.truth_frame(attrs, manifest, ["b"])
    # ok and of split b: 2, 4, 6
    assert out["image_id"].tolist() == [2, 4, 6]
    assert out["split"].tolist() == ["b", "b", "b"]
    assert np.isnan(out["age_years"].to_numpy(np.float64)).all()


@pytest.mark.parametrize("col", ["label_race", "label_gender", "label_age_bin"])
def test_truth_frame_needs_the_three_labels(col):
    attrs = _attrs_for_truth().drop(columns=[col])
    with pytest.raises(KeyError, match=re.escape(
            f"the attribute table lacks {col}: the estimator report needs a dataset of kind "
            "fairface or utkface")):
        E.truth_frame(attrs, _manifest_for_truth())


# --- race_classes --------------------------------------------------------------------------

def test_race_classes_fairface_utkface_or_neither():
    both = pd.DataFrame({"race": ["White", "Black", None, np.nan]})
    # White and Black are both datasets' classes: FairFace's own, no map (NaN ignored)
    assert E.race_classes(both) == (FAIRFACE_RACES, None)
    assert E.race_classes(pd.DataFrame({"race": ["Latino_Hispanic", None]})) == (
        FAIRFACE_RACES, None)
    # all seven of FairFace's classes (not only a proper subset of them)
    assert E.race_classes(pd.DataFrame({"race": list(FAIRFACE_RACES)})) == (FAIRFACE_RACES,
                                                                             None)
    assert E.race_classes(pd.DataFrame({"race": list(UTK_RACES)}))[0] == UTK_RACES
    races, race_map = E.race_classes(pd.DataFrame({"race": ["Asian", "White", None]}))
    assert races == UTK_RACES and race_map == RACE_FROM_FAIRFACE
    assert isinstance(race_map, dict)
    with pytest.raises(ValueError, match=re.escape(
            "race labels ['Asian', 'Martian'] are neither FairFace's nor UTKFace's classes")):
        E.race_classes(pd.DataFrame({"race": ["Asian", "White", "Martian"]}))


# --- predict -------------------------------------------------------------------------------

def _is_none(a: np.ndarray) -> list[bool]:
    return [v is None for v in a]


def test_predict_probability_half_is_the_second_class():
    est = Estimate("e", "gender", "probability", ("pm",), GENDER_CLASSES)
    attrs = pd.DataFrame({"pm": pd.Series([0.5, 0.49, 0.51, np.nan, "x", 1.0], dtype=object)})
    cls, years = E.predict(attrs, est)
    assert cls.tolist() == ["Male", "Female", "Male", None, None, "Male"]
    assert _is_none(cls) == [False, False, False, True, True, False]
    assert years.shape == (6,) and np.isnan(years).all()


def test_predict_argmax_first_of_a_tie_none_without_every_value():
    est = Estimate("e", "gender", "argmax", ("a", "b", "c"), ("White", "Black", "Indian"))
    attrs = pd.DataFrame({"a": pd.Series([0.2, 0.5, np.nan, -1.0, "x"], dtype=object),
                          "b": [0.7, 0.5, 0.9, -3.0, 0.9],
                          "c": [0.1, 0.0, 0.1, -2.0, 0.0]})
    # race map given, but this is not a race estimate: not mapped
    cls, years = E.predict(attrs, est, {"White": "W"})
    assert cls.tolist() == ["Black", "White", None, "White", None]
    assert _is_none(cls) == [False, False, True, False, True]
    assert years.shape == (5,) and np.isnan(years).all()


def test_predict_years_binned_right_open():
    est = Estimate("e", "age", "years", ("y",))
    attrs = pd.DataFrame({"y": pd.Series([2.7, 69.9, np.nan, 70, "x", 3], dtype=object)})
    cls, years = E.predict(attrs, est)
    assert cls.tolist() == ["0-2", "60-69", None, "more than 70", None, "3-9"]
    np.testing.assert_array_equal(years, [2.7, 69.9, np.nan, 70.0, np.nan, 3.0])
    # whole years in an integer column: still years in float64
    cls, years = E.predict(pd.DataFrame({"y": [3, 70]}), est)
    assert cls.tolist() == ["3-9", "more than 70"]
    assert years.dtype == np.float64 and years.tolist() == [3.0, 70.0]


def test_predict_label_keeps_its_own_classes_unmapped():
    est = Estimate("imp", "race", "label", ("lab",), UTK_RACES)
    attrs = pd.DataFrame({"lab": ["Asian", "White", "East Asian", None]})
    cls, years = E.predict(attrs, est, dict(RACE_FROM_FAIRFACE))
    # already UTKFace's spelling: "Asian" is not mapped (it is no FairFace class);
    # "East Asian" is none of the estimate's classes
    assert cls.tolist() == ["Asian", "White", None, None]
    assert _is_none(cls) == [False, False, True, True]
    assert isinstance(years, np.ndarray) and years.shape == (4,) and np.isnan(years).all()


def test_predict_race_argmax_collapsed_onto_the_datasets_classes():
    est = Estimate("fairface", "race", "argmax", FAIRFACE_RACE_COLUMNS, FAIRFACE_RACES)
    m = np.full((5, 7), 0.1)
    for row, col in enumerate([2, 3, 0, 6]):  # Latino_Hispanic, East Asian, White, Mid. E.
        m[row, col] = 0.9
    m[4, 1] = np.nan
    attrs = pd.DataFrame(m, columns=list(FAIRFACE_RACE_COLUMNS))
    cls, _ = E.predict(attrs, est, RACE_FROM_FAIRFACE)
    assert cls.tolist() == ["Others", "Asian", "White", "Others", None]
    # a map without a class: that estimate has no value
    cls, _ = E.predict(attrs, est, {"White": "W"})
    assert cls.tolist() == [None, None, "W", None, None]
    assert _is_none(cls) == [True, True, False, True, True]
    # a map that none of the classes is in: no value at all (None, not NaN)
    cls, _ = E.predict(attrs, est, {"Nobody": "N"})
    assert _is_none(cls) == [True] * 5
    # no map: FairFace's own classes
    cls, _ = E.predict(attrs, est, None)
    assert cls.tolist() == ["Latino_Hispanic", "East Asian", "White", "Middle Eastern", None]


def test_predict_unknown_kind():
    with pytest.raises(ValueError, match=re.escape("unknown estimate kind 'odd'")):
        E.predict(pd.DataFrame({"c": [1.0]}), Estimate("e", "gender", "odd", ("c",)))


# --- group_labels, groupings ---------------------------------------------------------------

def test_group_labels_join_values_none_where_one_is_missing():
    truth = pd.DataFrame({"race": ["White", "Black", "White", None, "Black", "White"],
                          "gender": ["Female", "Male", "Male", "Female", None, "Female"],
                          "age": ["0-2"] * 6})
    # codes: race White 0 Black 1; gender Female 0 Male 1; flat = 2 race + gender: 0, 3,
    # 1, -, -, 0; the rows without a value are None (not the label of flat code 1)
    assert E.group_labels(truth, "race x gender").tolist() == [
        "White / Female", "Black / Male", "White / Male", None, None, "White / Female"]
    assert E.group_labels(truth, "gender").tolist() == [
        "Female", "Male", "Male", "Female", None, "Female"]
    out = E.group_labels(truth, "all")
    assert out.dtype == object and out.tolist() == ["all"] * 6
    # a dimension without any value: no image is in a group
    empty = truth.assign(gender=[None] * 6)
    assert E.group_labels(empty, "race x gender").tolist() == [None] * 6


def _grouping_truth() -> pd.DataFrame:
    return pd.DataFrame({"race": ["Black", "White", "Black", None, "White"],
                         "gender": ["Male", "Female", "Female", "Male", "Male"],
                         "age": ["20-29", "20-29", "0-2", "3-9", None]})


def test_groupings_codes_names_and_strata():
    truth = _grouping_truth()
    gbs = ("all", "race", "age", "race x age")
    labels = {gb: E.group_labels(truth, gb) for gb in gbs}
    g = E.groupings(truth, labels, CLASSES, gbs)
    assert list(g) == list(gbs)
    a = g["all"]
    assert (a.name, a.names, a.code.tolist(), a.stratum.tolist(), a.n_strata, a.strata,
            a.by_age) == ("all", ["all"], [0] * 5, [0] * 5, 1, "", False)
    assert a.code.dtype == a.stratum.dtype == np.int64  # codes, not floats
    # race: names in FairFace's order (White before Black); strata: the age bins present,
    # coded in sorted text order 0-2 (0), 20-29 (1), 3-9 (2); no age: -1
    r = g["race"]
    assert (r.name, r.names, r.code.tolist(), r.stratum.tolist(), r.n_strata, r.strata,
            r.by_age) == ("race", ["White", "Black"], [1, 0, 1, -1, 0], [1, 1, 0, 2, -1], 3,
                          "age", False)
    assert r.code.dtype == np.int64
    # age: bins in FairFace's order; strata race x gender: 2 race code + gender code
    # (Black 0 White 1, Female 0 Male 1): 1, 2, 0, -1 (no race), 3
    ag = g["age"]
    assert (ag.names, ag.code.tolist(), ag.stratum.tolist(), ag.n_strata, ag.strata,
            ag.by_age) == (["0-2", "3-9", "20-29"], [2, 2, 0, 1, -1], [1, 2, 0, -1, 3], 4,
                           "race x gender", True)
    ra = g["race x age"]
    assert (ra.names, ra.code.tolist(), ra.stratum.tolist(), ra.n_strata, ra.strata,
            ra.by_age) == (["White / 20-29", "Black / 0-2", "Black / 20-29"],
                           [2, 0, 1, -1, -1], [1, 1, 0, 2, -1], 3, "age", True)


# --- outcome -------------------------------------------------------------------------------

def _outcome_truth() -> pd.DataFrame:
    # detected and age_years as Python objects (bools, numbers and None): read as bool
    # and float64
    return pd.DataFrame({"split": ["train", "val", "val", "val", "val"],
                         "detected": pd.Series([True, True, False, True, True], dtype=object),
                         "gender": ["Male", "Male", "Female", "Female", None],
                         "age": ["30-39", "40-49", "50-59", "3-9", "20-29"],
                         "age_years": pd.Series([30, 40, 50, None, 20], dtype=object)})


def test_outcome_of_a_class_estimate():
    truth = _outcome_truth()
    pred = np.array(["Male", "Female", "Female", None, "Male"], dtype=object)
    o = E.outcome(truth, "gender", pred, None, ("train",))
    assert o.excluded.tolist() == [True, False, False, False, False]
    assert o.use.tolist() == [False, True, True, True, True]
    assert o.found.tolist() == [True, True, False, True, True]
    assert o.found.dtype == o.scored.dtype == o.right.dtype == bool
    # scored: found with a value; right: scored and the truth's class (row 2 is right but
    # its face was not found; row 4 has no truth)
    assert o.scored.tolist() == [True, True, False, False, True]
    assert o.right.tolist() == [True, False, False, False, False]
    assert o.err is None
    # an estimate that needs no face: every row found; no training split: all used
    o = E.outcome(truth, "gender", pred, None, (), needs_detection=False)
    assert o.excluded.tolist() == [False] * 5 and o.use.tolist() == [True] * 5
    assert o.found.tolist() == [True] * 5
    assert o.scored.tolist() == [True, True, True, False, True]
    assert o.right.tolist() == [True, False, True, False, False]


def test_outcome_of_years_and_of_the_detector():
    truth = _outcome_truth()
    years = np.array([33.0, 35.0, 10.0, np.nan, 20.0])
    pred = np.array(["30-39", "30-39", "10-19", None, "20-29"], dtype=object)
    o = E.outcome(truth, "age", pred, years)
    assert o.use.tolist() == [True] * 5 and o.excluded.tolist() == [False] * 5
    assert o.scored.tolist() == [True, True, False, False, True]
    assert o.right.tolist() == [True, False, False, False, True]
    # |33 - 30|, |35 - 40|, not found, no value, |20 - 20|
    np.testing.assert_array_equal(o.err, [3.0, 5.0, np.nan, np.nan, 0.0])
    assert o.err.dtype == np.float64
    d = E.outcome(truth, "face", None, None, ("val",))
    assert d.use.tolist() == [True, False, False, False, False]
    assert d.found.tolist() == d.scored.tolist() == d.right.tolist() == [
        True, True, False, True, True]
    assert d.err is None and d.found.dtype == bool


# --- _years_why_not ------------------------------------------------------------------------

def test_years_why_not():
    with_years = pd.DataFrame({"age_years": [np.nan, 30.0]})
    without = pd.DataFrame({"age_years": [np.nan, np.nan]})
    years = Estimate("e", "age", "years", ("y",))
    assert E._years_why_not(without, Estimate("e", "gender", "years", ("y",))) == ""
    assert E._years_why_not(with_years, Estimate("e", "age", "argmax", ("a", "b"))) == \
        "the estimate is an age bin, not years"
    assert E._years_why_not(without, years) == \
        "the truth is an age bin (FairFace), not years"
    assert E._years_why_not(with_years, years) == ""
    # ages as Python objects (a number and None): read as float64, one has years
    objects = pd.DataFrame({"age_years": pd.Series([None, 30], dtype=object)})
    assert E._years_why_not(objects, years) == ""


# --- estimate_rows -------------------------------------------------------------------------

S_ROWS = Settings(min_n=2, n_boot=50, confidence=0.9, seed=3, n_perm=19,
                  group_by=("all", "race"))


def _rows_truth(detected: list[bool] | None = None) -> pd.DataFrame:
    """Four White and four Black faces, one per age bin 20-29 ... 50-59 each."""
    years = [20.0, 30.0, 40.0, 50.0] * 2
    return pd.DataFrame({"race": ["White"] * 4 + ["Black"] * 4, "gender": ["Male"] * 8,
                         "age": ["20-29", "30-39", "40-49", "50-59"] * 2, "age_years": years,
                         "detected": detected or [True] * 8, "split": ["all"] * 8})


def _rows_setup(truth: pd.DataFrame) -> tuple[dict, np.ndarray]:
    labels = {gb: E.group_labels(truth, gb) for gb in S_ROWS.group_by}
    groups = E.groupings(truth, labels, CLASSES, S_ROWS.group_by)
    age = np.array([FAIRFACE_AGE_BINS.index(b) for b in truth["age"]])
    return groups, age


#: White errors 2, 3, 5, 2 (bins right); Black 6, 8, 9, 10 (26 and 49 in the right bin,
#: 22 and 60 not)
EST_YEARS = np.array([22.0, 33.0, 45.0, 52.0, 26.0, 22.0, 49.0, 60.0])


def test_estimate_rows_of_an_age_in_years():
    truth = _rows_truth()
    groups, age = _rows_setup(truth)
    pred = np.array([FAIRFACE_AGE_BINS[3], FAIRFACE_AGE_BINS[4], FAIRFACE_AGE_BINS[5],
                     FAIRFACE_AGE_BINS[6], FAIRFACE_AGE_BINS[3], FAIRFACE_AGE_BINS[3],
                     FAIRFACE_AGE_BINS[5], FAIRFACE_AGE_BINS[7]], dtype=object)
    o = E.outcome(truth, "age", pred, EST_YEARS)
    rows = E.estimate_rows("imp", "age", o, groups, age, S_ROWS)
    assert [(r["estimator"], r["attribute"], r["group_by"], r["group"]) for r in rows] == [
        ("imp", "age", "all", "all"), ("imp", "age", "race", "White"),
        ("imp", "age", "race", "Black")]
    whole, white, black = rows
    base = {"estimator", "attribute", "group_by", "group", "stratified_by", "n",
            "n_no_face", "n_scored", "n_right", "n_train_excluded", "n_no_estimate",
            "accuracy_all", "accuracy_all_lo", "accuracy_all_hi", "accuracy", "accuracy_lo",
            "accuracy_hi", "accuracy_std", "n_years", "mae", "mae_lo", "mae_hi", "mae_std",
            "note"}
    assert set(whole) == base
    assert set(white) == set(black) == base | {"p_raw", "p", "p_mae_raw", "p_mae"}
    # right: White 4 of 4, Black 2 of 4
    assert (whole["n"], whole["n_right"], whole["accuracy"]) == (8, 6, 0.75)
    assert (white["accuracy"], black["accuracy"]) == (1.0, 0.5)
    # MAE: (2 + 3 + 5 + 2) / 4, (6 + 8 + 9 + 10) / 4, 45 / 8; one face per bin and race:
    # the standardised MAE of a race is its MAE; of all, the mean of the bins' means
    # (4 + 5.5 + 7 + 6) / 4
    assert (white["mae"], black["mae"], whole["mae"]) == (3.0, 8.25, 5.625)
    assert (white["mae_std"], black["mae_std"]) == (3.0, 8.25)
    assert whole["mae_std"] == pytest.approx(5.625)
    assert (whole["n_years"], white["n_years"], black["n_years"]) == (8, 4, 4)
    # the bootstrap and permutation seeds are keyed "estimator|attribute"
    err = np.abs(EST_YEARS - truth["age_years"].to_numpy())
    assert (white["mae_lo"], white["mae_hi"]) == bootstrap_mean_interval(
        err[:4], 50, 0.9, row_seed(3, "imp|age|race|White"))
    assert (whole["mae_lo"], whole["mae_hi"]) == bootstrap_mean_interval(
        err, 50, 0.9, row_seed(3, "imp|age|all|all"))
    perm = E.permutation_tests(o, list(groups.values()), S_ROWS, "imp|age")["race"][0]
    assert (white["p_mae"], black["p_mae"]) == (perm[0], perm[1])
    assert np.isfinite(perm).all()
    assert whole["note"] == ("p: n/a (the whole dataset: no rest to compare); "
                             "p_mae: n/a (no rest with years to compare)")
    assert white["note"] == black["note"] == ""


def test_estimate_rows_without_years_say_why_and_the_detectors_say_upper_bound():
    truth = _rows_truth([True, True, True, False] + [True] * 4)
    groups, age = _rows_setup(truth)
    o = E.outcome(truth, "face", None, None)
    rows = E.estimate_rows(E.DETECTOR, "face", o, groups, age, S_ROWS)
    whole, white, black = rows
    # the detector's accuracy is found / n: 7 / 8, 3 / 4 (not found / found = 1)
    assert (whole["accuracy"], white["accuracy"], black["accuracy"]) == (0.875, 0.75, 1.0)
    assert (whole["n_no_face"], white["n_no_face"]) == (1, 1)
    assert whole["note"] == ("p: n/a (the whole dataset: no rest to compare); "
                             + E.DETECTOR_NOTE)
    assert white["note"] == black["note"] == E.DETECTOR_NOTE
    assert "mae" not in white and "n_years" not in white
    # an estimate in bins: no MAE, with the reason; not found is not scored
    pred = np.array(["20-29"] * 8, dtype=object)
    o = E.outcome(truth, "age", pred, None)
    why = "the estimate is an age bin, not years"
    rows = E.estimate_rows("ff", "age", o, groups, age, S_ROWS, mae_why_not=why)
    whole, white, black = rows
    # right: the 20-29 faces (White's and Black's); scored 7 (White's 50-59 face missed)
    assert (whole["n_scored"], whole["n_right"], white["accuracy"]) == (7, 2, 1 / 3)
    assert whole["note"] == ("p: n/a (the whole dataset: no rest to compare); "
                             f"mae: n/a ({why})")
    # within each bin both races are right (20-29) or both wrong: no CMH p
    flat = "p: n/a (no stratum varies: every face right or every one wrong)"
    assert white["note"] == ("accuracy_std: n/a (no scored faces in age bin 50-59); "
                             f"{flat}; mae: n/a ({why})")
    assert black["note"] == f"{flat}; mae: n/a ({why})"
    assert set(black) == {"estimator", "attribute", "group_by", "group", "stratified_by",
                          "n", "n_no_face", "n_scored", "n_right", "n_train_excluded",
                          "n_no_estimate", "accuracy_all", "accuracy_all_lo",
                          "accuracy_all_hi", "accuracy", "accuracy_lo", "accuracy_hi",
                          "accuracy_std", "p_raw", "p", "note"}
    # no reason given: no MAE note
    rows = E.estimate_rows("ff", "age", o, groups, age, S_ROWS)
    assert rows[2]["note"] == flat and rows[0]["note"] == (
        "p: n/a (the whole dataset: no rest to compare)")


# --- _truth --------------------------------------------------------------------------------

IMP_G = Estimate("imp", "gender", "label", ("imp_g",), GENDER_CLASSES)


def _fairface_attrs() -> pd.DataFrame:
    race = np.full((6, 7), 0.05)
    for row, col in enumerate([0, 1, 1, 0, 2, 3]):
        race[row, col] = 0.7
    return pd.DataFrame({
        "image_id": [f"{i}.jpg" for i in range(6)],
        "split": ["train", "val", "val", "val", "test", "val"],
        "status": ["ok", "ok", "no_face", "ok", "ok", "ok"],
        "label_race": ["White", "Black", "White", "Black", "White", None],
        "label_gender": ["Male", "Female", "Male", "Female", "Male", "Female"],
        "label_age_bin": ["0-2", "more than 70", None, "20-29", "3-9", "20-29"],
        "age_gender_male": [0.9, 0.1, 0.6, 0.4, 0.5, np.nan],
        "age_gender_age": [1.0, 75.0, 30.0, 22.0, 5.0, 25.0],
        **{c: race[:, i] for i, c in enumerate(FAIRFACE_RACE_COLUMNS)},
        "imp_g": ["Male", "Male", "Female", None, "Male", "Female"]})


def _ok_manifest(attrs: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame({"image_id": attrs["image_id"], "status": "ok"})


def test_truth_reads_everything_once_for_fairface():
    attrs = _fairface_attrs()
    s = Settings(fairface_splits=("train", "val"), group_by=("all", "race x gender"))
    t = E._truth(attrs, _ok_manifest(attrs), s, "fairface", [IMP_G], {"imp"})
    # FairFace's splits train and val: image 4 (test) is in no group
    assert t.frame["image_id"].tolist() == ["0.jpg", "1.jpg", "2.jpg", "3.jpg", "5.jpg"]
    assert t.classes == {"race": FAIRFACE_RACES, "gender": GENDER_CLASSES,
                         "age": FAIRFACE_AGE_BINS}
    assert list(t.labels) == ["all", "race x gender"]
    assert t.labels["race x gender"].tolist() == [
        "White / Male", "Black / Female", "White / Male", "Black / Female", None]
    assert list(t.groups) == ["all", "race x gender"]
    assert t.groups["race x gender"].names == ["White / Male", "Black / Female"]
    # age bins 0-2, more than 70, none, 20-29, 20-29
    assert t.age.tolist() == [0, 8, -1, 3, 3]
    assert [(e.estimator, e.attribute) for e, *_ in t.predictions] == [
        ("age_gender", "gender"), ("age_gender", "age"), ("fairface", "race"),
        ("imp", "gender")]
    (_, g_pred, g_years, g_o), (_, a_pred, a_years, a_o), (_, r_pred, _, r_o), \
        (_, i_pred, _, i_o) = t.predictions
    assert g_pred.tolist() == ["Male", "Female", "Male", "Female", None]
    assert np.isnan(g_years).all()
    assert a_pred.tolist() == ["0-2", "more than 70", "30-39", "20-29", "20-29"]
    np.testing.assert_array_equal(a_years, [1.0, 75.0, 30.0, 22.0, 25.0])
    # FairFace's truth has no years: no age error
    assert a_o.err is None and g_o.err is None
    assert a_o.right.tolist() == [True, True, False, True, True]
    # the fairface head was trained on FairFace's train split; age_gender on nothing known
    assert r_o.excluded.tolist() == [True, False, False, False, False]
    assert g_o.excluded.tolist() == [False] * 5
    assert r_pred.tolist() == ["White", "Black", "Black", "White", "East Asian"]
    # imp needs no face; age_gender does (image 2 has none)
    assert i_o.found.tolist() == [True] * 5
    assert g_o.found.tolist() == [True, True, False, True, True]
    assert i_pred.tolist() == ["Male", "Male", "Female", None, "Female"]
    assert i_o.right.tolist() == [True, False, False, False, True]


def test_truth_of_utkface_keeps_every_split_and_has_age_errors():
    attrs = _fairface_attrs().assign(label_race=["White", "Black", "Asian", "Black",
                                                 "White", None],
                                     label_age=[2.0, 80.0, 33.0, 20.0, 4.0, np.nan])
    s = Settings(fairface_splits=("val",), group_by=("race",),
                 trained_on={"imp": {"utkface": ("val",)}})
    t = E._truth(attrs, _ok_manifest(attrs), s, "utkface", [IMP_G], ())
    assert t.frame["image_id"].tolist() == [f"{i}.jpg" for i in range(6)]
    assert t.classes["race"] == UTK_RACES
    assert t.groups["race"].names == ["White", "Black", "Asian"]
    (_, _, _, g_o), (_, _, _, a_o), (_, r_pred, _, r_o), (_, _, _, i_o) = t.predictions
    # |1 - 2|, |75 - 80|, no face, |22 - 20|, |5 - 4|, no truth
    np.testing.assert_array_equal(a_o.err, [1.0, 5.0, np.nan, 2.0, 1.0, np.nan])
    assert g_o.err is None
    # FairFace's seven onto UTKFace's five: Black, Latino_Hispanic -> Black, Others;
    # East Asian -> Asian
    assert r_pred.tolist() == ["White", "Black", "Black", "White", "Others", "Asian"]
    # no training split of fairface on UTKFace; imp declared trained on val
    assert r_o.excluded.tolist() == [False] * 6
    assert i_o.excluded.tolist() == [False, True, True, True, False, True]
    # detection_free empty: imp needs a face too
    assert i_o.found.tolist() == [True, True, False, True, True, True]


# --- estimator_tables, _estimator_table ----------------------------------------------------

def test_estimator_tables_an_imported_estimate_needs_no_face_unless_told():
    attrs = _fairface_attrs()
    s = Settings(min_n=1, n_boot=10, n_perm=9, fairface_splits=("val",), group_by=("all",))
    default, conf = E.estimator_tables(attrs, _ok_manifest(attrs), s, "fairface", [IMP_G])
    told, _ = E.estimator_tables(attrs, _ok_manifest(attrs), s, "fairface", [IMP_G], ["x"])
    assert list(default.columns) == E.COLUMNS and list(conf.columns) == CONF_COLUMNS
    imp = default.query("estimator == 'imp'").iloc[0]
    # val: images 1, 2, 3, 5 (Female, Male, Female, Female); imp: Male (wrong), Female
    # (wrong, no face), None, Female (right)
    assert (imp["n"], imp["n_no_face"], imp["n_no_estimate"], imp["n_scored"],
            imp["n_right"]) == (4, 0, 1, 3, 1)
    imp = told.query("estimator == 'imp'").iloc[0]
    assert (imp["n"], imp["n_no_face"], imp["n_no_estimate"], imp["n_scored"],
            imp["n_right"]) == (4, 1, 1, 2, 1)
    # the age_gender estimator needs a face either way
    ag = default.query("estimator == 'age_gender' and attribute == 'gender'").iloc[0]
    assert (ag["n"], ag["n_no_face"], ag["n_scored"], ag["n_right"]) == (4, 1, 2, 2)


def test_estimator_table_fills_missing_columns_and_names_families():
    attrs = _fairface_attrs()
    # one group_by, "all": no test, no p; no estimate in years: no MAE columns at all
    s = Settings(min_n=1, n_boot=10, n_perm=9, fairface_splits=("val",), group_by=("all",))
    table, _ = E.estimator_tables(attrs, _ok_manifest(attrs), s, "fairface", [IMP_G])
    assert list(table.columns) == E.COLUMNS
    assert table["family"].tolist() == ["detector / face", "age_gender / gender",
                                        "age_gender / age", "fairface / race", "imp / gender"]
    for col in ("p_raw", "p", "p_adjusted", "mae", "mae_lo", "mae_hi", "mae_std",
                "p_mae_raw", "p_mae", "p_mae_adjusted"):
        assert table[col].isna().all(), col
    assert table["n_years"].tolist() == [0] * 5 and table["n_years"].dtype == np.int64
    assert table["stratified_by"].tolist() == [""] * 5
    assert table["note"].iloc[1] == "p: n/a (the whole dataset: no rest to compare)"


def _holm(p: list[float]) -> list[float]:
    """Holm by its definition: the i-th smallest of m finite p times (m - i), running
    maximum, at most 1."""
    finite = sorted((v, i) for i, v in enumerate(p) if np.isfinite(v))
    out, run = [np.nan] * len(p), 0.0
    for rank, (v, i) in enumerate(finite):
        run = max(run, v * (len(finite) - rank))
        out[i] = min(run, 1.0)
    return out


def test_estimator_table_holm_over_each_familys_p_and_p_mae():
    truth = _rows_truth()
    attrs = pd.DataFrame({
        "image_id": list(range(8)), "status": "ok", "label_race": truth["race"],
        "label_gender": truth["gender"], "label_age_bin": truth["age"],
        "label_age": truth["age_years"], "imp_age": EST_YEARS,
        "imp_g": ["Male"] * 6 + ["Female"] * 2})
    s = Settings(min_n=2, n_boot=20, n_perm=19, seed=5, group_by=("all", "race"))
    extra = [Estimate("imp", "age", "years", ("imp_age",)), IMP_G]
    table, _ = E.estimator_tables(attrs, _ok_manifest(attrs), s, "utkface", extra)
    assert table["family"].tolist() == ["detector / face"] * 3 + ["imp / age"] * 3 + [
        "imp / gender"] * 3
    age = table[table["family"] == "imp / age"]
    p = age["p"].tolist() + age["p_mae"].tolist()
    assert np.isfinite(p).sum() >= 3  # the two races' CMH p of the bins, and their p_mae
    want = _holm(p)
    assert np.array_equal(age["p_adjusted"].to_numpy(), want[:3], equal_nan=True)
    assert np.array_equal(age["p_mae_adjusted"].to_numpy(), want[3:], equal_nan=True)
    # the gender family has its own Holm: the races' CMH p of imp_g (Black 2 of 4 right)
    gender = table[table["family"] == "imp / gender"]
    want = _holm(gender["p"].tolist())
    assert np.isfinite(want).sum() == 2
    assert np.array_equal(gender["p_adjusted"].to_numpy(), want, equal_nan=True)
    assert gender["p_mae_adjusted"].isna().all()
    # only the age estimate has years: 8, 4, 4 on its rows, 0 elsewhere
    assert table["n_years"].tolist() == [0, 0, 0, 8, 4, 4, 0, 0, 0]
    assert table["n_years"].dtype == np.int64
    assert age["mae"].tolist() == [5.625, 3.0, 8.25]


# --- _confusion_table ----------------------------------------------------------------------

E1 = Estimate("e1", "gender", "label", ("e1",), GENDER_CLASSES)  # no value at all
E2 = Estimate("e2", "gender", "label", ("e2",), GENDER_CLASSES)


def _confusion_attrs() -> pd.DataFrame:
    return pd.DataFrame({
        "image_id": list(range(9)),
        "status": ["ok"] * 5 + ["no_face"] + ["ok"] * 3,
        "split": ["val"] * 8 + ["train"],
        "label_race": ["White"] * 3 + ["Black"] * 5 + ["White"],
        "label_gender": ["Male", "Male", "Female", "Female", "Female", "Female", None, "Male",
                         "Male"],
        "label_age_bin": ["20-29"] * 9,
        "age_gender_male": [0.9, 0.2, 0.1, 0.7, 0.5, 0.1, 0.9, np.nan, 0.1],
        "e1": [None] * 9,
        "e2": ["Male", "Female", "Female", "Male", "Male", "Female", "Male", None, "Female"]})


F, M = "Female", "Male"

#: age_gender (needs a face; P(male) 0.5 is male): scored with a truth 0, 1, 2, 3, 4, 8
#: (5: no face, 6: no truth, 7: no value); e2 (needs none; trained on utkface's train
#: split: 8 left out): 0 ... 5. (group_by, group, true, predicted, count, n_true)
AGE_GENDER_CELLS = [
    ("all", "all", F, F, 1, 3), ("all", "all", F, M, 2, 3),  # 2 F; 3, 4 M
    ("all", "all", M, F, 2, 3), ("all", "all", M, M, 1, 3),  # 1, 8 F; 0 M
    ("race", "White", F, F, 1, 1), ("race", "White", F, M, 0, 1),  # 2
    ("race", "White", M, F, 2, 3), ("race", "White", M, M, 1, 3),  # 0, 1, 8
    ("race", "Black", F, F, 0, 2), ("race", "Black", F, M, 2, 2),  # 3, 4
    ("gender", F, F, F, 1, 3), ("gender", F, F, M, 2, 3),
    ("gender", M, M, F, 2, 3), ("gender", M, M, M, 1, 3)]
E2_CELLS = [
    ("all", "all", F, F, 2, 4), ("all", "all", F, M, 2, 4),  # 2, 5 F; 3, 4 M
    ("all", "all", M, F, 1, 2), ("all", "all", M, M, 1, 2),  # 1 F; 0 M
    ("race", "White", F, F, 1, 1), ("race", "White", F, M, 0, 1),  # 2
    ("race", "White", M, F, 1, 2), ("race", "White", M, M, 1, 2),  # 0, 1
    ("race", "Black", F, F, 1, 3), ("race", "Black", F, M, 2, 3),  # 3, 4, 5
    ("gender", F, F, F, 2, 4), ("gender", F, F, M, 2, 4),
    ("gender", M, M, F, 1, 2), ("gender", M, M, M, 1, 2)]


def test_confusion_table_cell_by_cell():
    attrs = _confusion_attrs()
    s = Settings(min_n=2, n_boot=10, n_perm=9, confidence=0.9,
                 group_by=("all", "race", "gender"), trained_on={"e2": {"utkface": ("train",)}})
    _, conf = E.estimator_tables(attrs, _ok_manifest(attrs), s, "utkface", [E1, E2])
    assert list(conf.columns) == CONF_COLUMNS
    # e1 has no scored face: no cells; the estimate after it still has its own
    cells = [("age_gender", c) for c in AGE_GENDER_CELLS] + [("e2", c) for c in E2_CELLS]
    assert len(conf) == len(cells) == 28
    assert conf.index.tolist() == list(range(28))  # one index over both estimates' cells
    for (_, r), (est, (gb, g, t, p, k, n)) in zip(conf.iterrows(), cells, strict=True):
        assert (r["estimator"], r["attribute"], r["group_by"], r["group"], r["true"],
                r["predicted"], r["count"], r["n_true"]) == (est, "gender", gb, g, t, p, k, n)
        if n < 2:  # one true face < min_n 2: n/a, said so; 2 (= min_n) has its rate
            assert np.isnan([r["rate"], r["rate_lo"], r["rate_hi"]]).all()
            assert r["note"] == "n/a (1 true faces < estimators.min_n 2)"
        else:
            assert r["rate"] == k / n and r["note"] == ""
            lo, hi = _wilson(k, n, 0.9)
            assert r["rate_lo"] == pytest.approx(lo, abs=1e-12)
            assert r["rate_hi"] == pytest.approx(hi, abs=1e-12)
    assert conf["count"].dtype == np.int64 and conf["n_true"].dtype == np.int64


def test_confusion_table_without_a_scored_face_is_empty_with_its_columns():
    attrs = _confusion_attrs().drop(columns=["age_gender_male", "e2"])
    s = Settings(min_n=2, n_boot=10, n_perm=9, group_by=("all", "race"))
    table, conf = E.estimator_tables(attrs, _ok_manifest(attrs), s, "utkface", [E1])
    assert list(conf.columns) == CONF_COLUMNS and conf.empty
    assert table["estimator"].tolist() == ["detector"] * 3 + ["e1"] * 3


def test_estimator_tables_default_kind_is_none_at_all():
    attrs = _fairface_attrs()
    # no kind: every split reported, and only a declaration for kind "" applies
    s = Settings(min_n=1, n_boot=10, n_perm=9, group_by=("all",),
                 trained_on={"imp": {"": ("val",)}, "age_gender": {"XXXX": ("val",)}})
    table, _ = E.estimator_tables(attrs, _ok_manifest(attrs), s, extra=[IMP_G])
    whole = table.set_index(["estimator", "attribute"])
    # images 0 ... 5; imp trained on val (1, 2, 3, 5): 0 and 4 left
    assert (whole.loc[("imp", "gender"), "n"],
            whole.loc[("imp", "gender"), "n_train_excluded"]) == (2, 4)
    assert (whole.loc[("age_gender", "gender"), "n"],
            whole.loc[("age_gender", "gender"), "n_train_excluded"]) == (6, 0)
    # the fairface head was trained on FairFace, not on a dataset of no kind
    assert whole.loc[("fairface", "race"), "n_train_excluded"] == 0
