"""Any classifier's predictions from a file (issue 47.4): estimators.imports.

Every spelling of every attribute is read to a pinned value; every prediction row and
every labelled image gets a pinned status; the imported estimator's rows in the estimator
report are the labelled images, scored without face detection; config mistakes name their
key before any job.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, TEST_DATA

from facecast.config.check import collect
from facecast.config.prepare import resolve_config
from facecast.datasets.fairface import FAIRFACE_RACES
from facecast.datasets.utkface import UTK_RACES
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.labels.estimator_imports import (
    ImportSpec,
    import_estimates,
    join_imports,
    match_images,
    parse_age,
    parse_gender,
    parse_race,
    status_summary,
)
from facecast.labels.estimators import Settings, estimator_tables
from facecast.labels.estimators_report import run_estimators
from facecast.labels.targets import estimator_inputs

SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")
S = Settings(min_n=1, n_boot=50, n_perm=99, seed=1, fairface_splits=())


def _s(*values) -> pd.Series:
    return pd.Series(list(values), dtype=object)


def test_gender_spellings():
    words = parse_gender(_s("Male", "f", "M", "FEMALE", "x", ""))
    assert words.kind == "label"
    assert words.values.tolist() == ["Male", "Female", "Male", "Female", None, None]
    assert words.bad.tolist()[4:] == [
        "gender 'x' is not Male, Female, M or F (a column of classes; values: maps other "
        "spellings)", "gender empty"]
    codes = parse_gender(_s("0", "1", "1", "0.0"))  # UTKFace's coding: 0 = male
    assert (codes.kind, codes.values.tolist()) == ("label", ["Male", "Female", "Female", "Male"])
    p = parse_gender(_s("0.7", "0.2", "1", "1.3", "0"))
    assert p.kind == "probability"
    np.testing.assert_array_equal(p.values, [0.7, 0.2, 1.0, np.nan, 0.0])
    assert p.bad.tolist() == ["", "", "", "gender '1.3' is not P(male) in [0, 1]", ""]
    unread = parse_gender(_s("Man", "0.4"))  # a word not mapped: not a class, not a number
    assert unread.bad.tolist() == ["gender 'Man' is not Male, Female, M, F or a number "
                                   "(values: maps other spellings)", ""]
    # a P(male) column of only 0 and 1 says so through values
    flipped = parse_gender(_s("0", "1"), {"0": "Female", "1": "Male"})
    assert flipped.values.tolist() == ["Female", "Male"]
    man = parse_gender(_s("Man", "Woman"), {"Man": "Male", "Woman": "Female"})
    assert man.values.tolist() == ["Male", "Female"]


def test_age_years_and_bins():
    years = parse_age(_s("33", "2.5", "-1", "x", "151"))
    assert years.kind == "years"
    np.testing.assert_array_equal(years.values, [33.0, 2.5, np.nan, np.nan, np.nan])
    assert [b != "" for b in years.bad] == [False, False, True, True, True]
    bins = parse_age(_s("3-9", "70+", "more than 70", "35"))
    assert bins.kind == "label"
    assert bins.values.tolist() == ["3-9", "more than 70", "more than 70", None]
    assert bins.bad[3].startswith("age '35' is not one of FairFace's bins")


def test_race_values_map_and_the_utkface_collapse():
    deepface = {"latino hispanic": "Latino_Hispanic", "middle eastern": "Middle Eastern"}
    ff = parse_race(_s("white", "latino hispanic", "middle eastern", "asian", "Black"),
                    FAIRFACE_RACES, deepface)
    assert ff.values.tolist() == ["White", "Latino_Hispanic", "Middle Eastern", None, "Black"]
    assert ff.bad[3].startswith("race 'asian' is not one of the dataset's races (White, ")
    utk = parse_race(_s("asian", "East Asian", "Southeast Asian", "Latino_Hispanic", "others",
                        "latino hispanic"), UTK_RACES)
    assert utk.values.tolist() == ["Asian", "Asian", "Asian", "Others", "Others", None]


def _manifest() -> pd.DataFrame:
    return pd.DataFrame({"image_id": [f"val/{i}.jpg" for i in range(1, 8)],
                         "status": ["ok"] * 6 + ["bad_label"]})


PREDICTIONS = ["file,gender,age,race,extra",
               "val/1.jpg,0.9,33,white,",              # ok: P(male), years
               "./val/2.jpg,0.2,4,black,",             # ok after ./
               "val/2.jpg,0.6,50,white,",              # duplicate of line 3
               "train/9.jpg,0.5,20,white,",            # not in the dataset
               "val/3.jpg,1.7,19,latino hispanic,",   # bad gender, the rest counts
               "val/4.jpg,0.3,40,white,x,y",           # an extra field: bad_row
               "val/7.jpg,0.1,70,indian,"]             # an image in no group: ok, said


def _spec(tmp_path, lines=PREDICTIONS, **extra) -> ImportSpec:
    (tmp_path / "preds.csv").write_text("\n".join(lines) + "\n")
    cfg = {"path": str(tmp_path / "preds.csv"), "image": "file", "gender": "gender",
           "age": "age", "race": "race",
           "values": {"race": {"latino hispanic": "Latino_Hispanic"}}}
    cfg.update(extra)
    return ImportSpec.from_config("mine", cfg)


def test_every_row_and_image_gets_a_status(tmp_path):
    got = import_estimates(_spec(tmp_path), _manifest(), FAIRFACE_RACES)
    st = got.statuses
    assert st["status"].tolist() == ["ok", "ok", "duplicate_prediction", "not_in_dataset",
                                     "bad_value", "bad_row", "ok", "no_prediction",
                                     "no_prediction", "no_prediction"]
    assert st["where"].tolist()[:7] == [f"preds.csv:{n}" for n in range(2, 9)]
    assert st.loc[st["status"] == "no_prediction", "image_id"].tolist() == [
        "val/4.jpg", "val/5.jpg", "val/6.jpg"]  # val/4.jpg's row is bad; val/7.jpg: no group
    msg = dict(zip(st["where"], st["message"], strict=True))
    assert msg["preds.csv:4"] == ("preds.csv:4: val/2.jpg is predicted by preds.csv:3 "
                                  "already; that row counts")
    assert msg["preds.csv:5"].startswith("preds.csv:5: 'train/9.jpg' is not a path of the "
                                         "dataset (relative to its root, e.g. 'val/1.jpg')")
    assert msg["preds.csv:6"] == ("preds.csv:6: gender '1.7' is not P(male) in [0, 1] (no "
                                  "estimate of it for this image)")
    assert msg["preds.csv:7"].startswith("preds.csv:7: 6 fields where the header has 5")
    assert msg["preds.csv:8"] == ("preds.csv:8: val/7.jpg has manifest status bad_label: it "
                                  "is in no group")
    summary = status_summary(st).set_index("status")["rows"].to_dict()
    assert summary == {"ok": 3, "not_in_dataset": 1, "duplicate_prediction": 1,
                       "bad_value": 1, "bad_row": 1, "no_prediction": 3}
    cols = got.columns.set_index("image_id")
    assert cols.index.tolist() == ["val/1.jpg", "val/2.jpg", "val/3.jpg", "val/7.jpg"]
    np.testing.assert_array_equal(cols["import_mine_gender"], [0.9, 0.2, np.nan, 0.1])
    assert cols["import_mine_race"].tolist() == ["White", "Black", "Latino_Hispanic", "Indian"]
    assert [(e.attribute, e.kind) for e in got.estimates] == [
        ("gender", "probability"), ("age", "years"), ("race", "label")]


def _attrs() -> pd.DataFrame:
    """Seven images: faces not detected for val/1 and val/5 (an import needs none)."""
    return pd.DataFrame({
        "image_id": [f"val/{i}.jpg" for i in range(1, 8)],
        "status": ["no_face", "ok", "ok", "ok", "no_face", "ok", "ok"],
        "label_race": ["White", "Black", "Latino_Hispanic", "White", "White", "Indian", None],
        "label_gender": ["Male", "Male", "Female", "Female", "Male", "Female", None],
        "label_male": [1.0, 1.0, 0.0, 0.0, 1.0, 0.0, np.nan],
        "label_age_bin": ["30-39", "3-9", "10-19", "40-49", "20-29", "60-69", None],
        "age_gender_male": [np.nan, 0.8, 0.4, 0.3, np.nan, 0.2, 0.5]})


def test_the_estimator_gets_the_labelled_images_without_detection(tmp_path):
    cfg = {"imports": {"mine": {"path": str(_spec(tmp_path).path), "image": "file",
                                "gender": "gender", "race": "race",
                                "values": {"race": {"latino hispanic": "Latino_Hispanic"}}}}}
    attrs, imported = join_imports(_attrs(), _manifest(), cfg, "ff", "fairface")
    table, conf = estimator_tables(attrs, _manifest(), S, "fairface", extra=imported.estimates)
    rows = table.query("group_by == 'all'").set_index(["estimator", "attribute"])
    mine = rows.loc[("mine", "gender")]
    # the six labelled images; val/1 counts though its face was not found
    assert (mine["n"], mine["n_no_face"], mine["n_scored"], mine["n_no_estimate"]) == (6, 0, 2, 4)
    # val/1: 0.9 -> Male (right), val/2: 0.2 -> Female (wrong); val/3 bad, 4-6 none
    assert (mine["n_right"], mine["accuracy"]) == (1, 0.5)
    race = rows.loc[("mine", "race")]
    assert (race["n_scored"], race["n_right"]) == (3, 3)
    det = rows.loc[("age_gender", "gender")]  # the built-in estimate still needs a face
    assert (det["n"], det["n_no_face"], det["n_scored"]) == (6, 2, 4)
    mc = conf.query("estimator == 'mine' and attribute == 'race' and group_by == 'all'")
    assert int(mc.query("true == 'Latino_Hispanic' and predicted == 'Latino_Hispanic'")[
        "count"].iloc[0]) == 1


def test_fairface_predict_chips(tmp_path):
    ids = ["train/1.jpg", "val/1.jpg", "train/2.jpg", "val/10.jpg"]
    images = _s("detected_faces/2_face0.jpg", "detected_faces/1_face0.jpg",
                "detected_faces/2_face1.jpg", "detected_faces/10_face0.jpg", "out/3_face0.jpg",
                "2.jpg")
    got, status, message = match_images(images, ids, "fairface_predict")
    assert got.tolist() == ["train/2.jpg", None, "train/2.jpg", "val/10.jpg", None, None]
    assert status.tolist() == ["", "ambiguous_image", "", "", "not_in_dataset",
                               "not_in_dataset"]
    assert message[1] == ("'detected_faces/1_face0.jpg': the images train/1.jpg, val/1.jpg "
                          "all have the name '1'")
    # the labelled images first (a UTKFace duplicate copy shares its name), then all
    got, status, _ = match_images(images, ids, "fairface_predict",
                                  preferred=["val/1.jpg", "train/2.jpg"])
    assert got.tolist() == ["train/2.jpg", "val/1.jpg", "train/2.jpg", "val/10.jpg", None,
                            None]
    assert status.tolist()[4:] == ["not_in_dataset"] * 2
    lines = ["face_name_align,race,race4,gender,age",
             "detected_faces/2_face0.jpg,East Asian,Asian,Female,70+",
             "detected_faces/2_face1.jpg,White,White,Male,20-29"]
    spec = _spec(tmp_path, lines, match="fairface_predict", image="face_name_align",
                 values={})
    man = pd.DataFrame({"image_id": ids, "status": "ok"})
    imp = import_estimates(spec, man, FAIRFACE_RACES)
    assert imp.statuses["status"].tolist() == ["ok", "duplicate_prediction"] + [
        "no_prediction"] * 3
    assert imp.columns["import_mine_age"].tolist() == ["more than 70"]
    assert imp.columns["import_mine_gender"].tolist() == ["Female"]


def test_parquet_paths_under_the_root_and_the_report_files(tmp_path):
    pd.DataFrame({"path": ["/data/ff/val/1.jpg", "/data/ff/val/2.jpg"],
                  "p_male": [0.75, 0.25]}).to_parquet(tmp_path / "p.parquet")
    cfg = {"min_n": 1, "n_boot": 50, "n_perm": 99, "fairface_splits": [],
           "imports": {"pq": {"path": str(tmp_path / "p.parquet"), "image": "path",
                              "gender": "p_male"}}}
    write_parquet(_attrs(), tmp_path / "attributes.parquet")
    write_parquet(_manifest(), tmp_path / "manifest.parquet")
    out = tmp_path / "labels"
    table = run_estimators(tmp_path / "attributes.parquet", tmp_path / "manifest.parquet",
                           out, cfg, seed=1, dataset="ff", kind="fairface", root="/data/ff/")
    r = table.query("estimator == 'pq' and group_by == 'all'").iloc[0]
    assert (r["n"], r["n_scored"], r["n_right"]) == (6, 2, 1)
    st = read_parquet(out / "estimator_imports.parquet")
    assert st["status"].value_counts().to_dict() == {"no_prediction": 4, "ok": 2}
    assert st.loc[st["status"] == "ok", "where"].tolist() == ["p.parquet row 1",
                                                              "p.parquet row 2"]
    md = (out / "estimators.md").read_text()
    assert "## Imported predictions by status" in md and "val/3.jpg: no row of p.parquet" in md


def _config(tmp_path, **imp) -> dict:
    (tmp_path / "p.csv").write_text("file,g,a\nval/1.jpg,M,33\n")
    spec = {"path": str(tmp_path / "p.csv"), "image": "file", "gender": "g"}
    spec.update(imp)
    return {"datasets": {"ff": {"kind": "fairface", "root": str(TEST_DATA / "fairface")},
                         "utk": {"kind": "utkface", "root": str(TEST_DATA / "utkface")}},
            "attributes": {"scorers": ["native"]},
            "estimators": {"imports": {"mine": spec}}}


def _errors(cfg: dict) -> list[str]:
    cfg = copy.deepcopy(cfg)
    resolve_config(cfg, SCHEMA)
    return [e for e in collect(cfg)[0] if e.startswith("estimators.imports")]


@pytest.mark.parametrize("imp, expected", [
    ({}, []),
    ({"path": "/nowhere/p.csv"}, ["estimators.imports.mine.path: /nowhere/p.csv does not "
                                  "exist"]),
    ({"age": "years"}, ["estimators.imports.mine.age: column 'years' is not in"]),
    ({"image": "path"}, ["estimators.imports.mine.image: column 'path' is not in"]),
    ({"gender": None}, ["estimators.imports.mine: names no column of gender, age or race"]),
    ({"values": {"gender": {"Man": "Mann"}}},
     ["estimators.imports.mine.values.gender: 'Man' maps to 'Mann', which is not Male"]),
    ({"race": "g", "values": {"race": {"asian": "Asian"}}},
     ["estimators.imports.mine.values.race: 'asian' maps to 'Asian', which is not a race"]),
    ({"race": "g", "values": {"race": {"asian": "Asian"}}, "datasets": ["utk"]}, []),
    ({"values": {"age": {"x": "3-9"}}},
     ["estimators.imports.mine.values.age: estimators.imports.mine.age names no column"]),
    ({"trained_on": {"fairface": ["train", "test"]}},
     ["estimators.imports.mine.trained_on.fairface: ['test'] are not splits of fairface"]),
    ({"datasets": ["nope"]}, ["estimators.imports.mine.datasets: ['nope'] are not datasets"]),
])
def test_config_mistakes_name_their_key(tmp_path, imp, expected):
    spec = {k: v for k, v in imp.items() if v is not None}
    cfg = _config(tmp_path, **spec)
    if "gender" in imp and imp["gender"] is None:
        del cfg["estimators"]["imports"]["mine"]["gender"]
    errors = _errors(cfg)
    assert len(errors) == len(expected), errors
    for e, want in zip(errors, expected, strict=True):
        assert e.startswith(want), e


def test_schema_and_reserved_names(tmp_path):
    cfg = _config(tmp_path, match="glob")
    with pytest.raises(Exception, match="estimators.imports.mine.match"):
        resolve_config(copy.deepcopy(cfg), SCHEMA)
    cfg = _config(tmp_path)
    cfg["estimators"]["imports"]["fairface"] = cfg["estimators"]["imports"].pop("mine")
    assert _errors(cfg)[0].startswith("estimators.imports.fairface: 'fairface' is the name of "
                                      "a built-in estimator")


def test_the_predictions_file_is_an_input_of_the_datasets_it_predicts(tmp_path):
    cfg = _config(tmp_path, datasets=["utk"])
    assert estimator_inputs(cfg, "utk")["predictions"] == [str(tmp_path / "p.csv")]
    assert estimator_inputs(cfg, "ff")["predictions"] == []
    assert estimator_inputs(cfg, "ff")["attributes"] == "results/ff/attributes.parquet"
    del cfg["estimators"]["imports"]["mine"]["datasets"]
    assert estimator_inputs(cfg, "ff")["predictions"] == [str(tmp_path / "p.csv")]


def test_on_utkface_classes_stay_as_read_and_years_give_a_mae(tmp_path):
    """UTKFace truth: an imported ``Asian`` is UTKFace's class (not re-collapsed as the
    fairface head's seven are), FairFace's ``East Asian`` is collapsed onto it, and ages
    in years give the MAE against the years of the truth."""
    ids = [f"UTKFace/{i}.jpg" for i in range(4)]
    attrs = pd.DataFrame({
        "image_id": ids, "status": ["ok", "no_face", "ok", "ok"],
        "label_race": ["Asian", "Asian", "Others", "White"],
        "label_gender": ["Male", "Female", "Female", "Male"], "label_male": [1.0, 0, 0, 1],
        "label_age": [25.0, 40.0, 8.0, 61.0], "label_age_bin": ["20-29", "40-49", "3-9",
                                                                  "60-69"]})
    manifest = pd.DataFrame({"image_id": ids, "status": "ok"})
    (tmp_path / "p.csv").write_text("img,race,age\nUTKFace/0.jpg,asian,27\n"
                                    "UTKFace/1.jpg,East Asian,31\n"
                                    "UTKFace/2.jpg,latino hispanic,8.5\n")
    cfg = {"imports": {"x": {"path": str(tmp_path / "p.csv"), "image": "img", "race": "race",
                             "age": "age",
                             "values": {"race": {"latino hispanic": "Others"}}}}}
    attrs, imported = join_imports(attrs, manifest, cfg, "utk", "utkface")
    assert attrs["import_x_race"].tolist()[:3] == ["Asian", "Asian", "Others"]
    table, _ = estimator_tables(attrs, manifest, S, "utkface", extra=imported.estimates)
    rows = table.query("estimator == 'x' and group_by == 'all'").set_index("attribute")
    assert (rows.loc["race", "n"], rows.loc["race", "n_scored"],
            rows.loc["race", "n_right"]) == (4, 3, 3)
    # |27-25|, |31-40|, |8.5-8|: bins 20-29 right, 30-39 wrong, 3-9 right
    assert rows.loc["age", "mae"] == pytest.approx((2 + 9 + 0.5) / 3)
    assert (rows.loc["age", "n_right"], rows.loc["age", "n_no_face"]) == (2, 0)


def test_trained_on_as_written_in_the_issue_leaves_the_training_split_out(tmp_path):
    """``trained_on: {fairface: train}`` (a split, not a list): the import's train images
    leave its figures, counted in ``n_train_excluded``; the other estimators keep them."""
    attrs = _attrs()
    manifest = _manifest().assign(split=["train", "train", "val", "val", "val", "val", "val"])
    cfg = {"fairface_splits": [], "min_n": 1, "n_boot": 50, "n_perm": 99,
           "imports": {"mine": {"path": str(_spec(tmp_path).path), "image": "file",
                                "gender": "gender", "trained_on": {"fairface": "train"}}}}
    s = Settings.from_config(cfg, 1)
    assert s.trained_on == {"mine": {"fairface": ("train",)}}
    attrs, imported = join_imports(attrs, manifest, cfg, "ff", "fairface")
    table, _ = estimator_tables(attrs, manifest, s, "fairface", extra=imported.estimates)
    rows = table.query("group_by == 'all' and attribute == 'gender'").set_index("estimator")
    assert (rows.loc["mine", "n"], rows.loc["mine", "n_train_excluded"]) == (4, 2)
    assert (rows.loc["age_gender", "n"], rows.loc["age_gender", "n_train_excluded"]) == (6, 0)


def test_the_plan_names_the_import(tmp_path):
    cfg = _config(tmp_path, datasets=["utk"])
    plan = resolve_config(cfg, SCHEMA)
    lines = [line for line in plan if line.startswith("estimators: ")
             and "against its truth labels" in line]
    assert lines == [
        "estimators: ff - only the detector (no scorer of attributes.scorers estimates gender, "
        "age or race: add age_gender or fairface) against its truth labels "
        "(results/ff/labels/estimators.md)",
        f"estimators: utk - the detector and the predictions of mine ({tmp_path / 'p.csv'}) "
        "against its truth labels (results/utk/labels/estimators.md)"]
    cfg = _config(tmp_path, datasets=["utk"])
    cfg["attributes"]["scorers"] = ["native", "age_gender"]
    assert [line for line in resolve_config(cfg, SCHEMA) if line.startswith(
        "estimators: utk") and "against its truth labels" in line] == [
        "estimators: utk - the detector and age_gender's gender, age_gender's age, and the "
        f"predictions of mine ({tmp_path / 'p.csv'}) against its truth labels "
        "(results/utk/labels/estimators.md)"]


def test_predict_py_layout_with_quoted_multiline_scores(tmp_path):
    """predict.py's CSV as it writes it: numpy score arrays in quoted fields that span two
    lines; every row's place is the line it starts on."""
    lines = ["face_name_align,race,race4,gender,age,race_scores_fair,gender_scores_fair",
             'detected_faces/a_face0.jpg,Indian,Indian,Male,20-29,"[0.1 0.2 0.3 0.1',
             ' 0.1 0.1 0.1]",[0.9 0.1]',
             'detected_faces/b_face0.jpg,Black,Black,Female,70+,"[0.1 0.6 0.1 0.1',
             ' 0.05 0.05 0.0]",[0.2 0.8]',
             "detected_faces/c_face0.jpg,White,White,Female,3-9,[0.9 0 0 0 0 0 0.1],[0.3 0.7]"]
    spec = _spec(tmp_path, lines, match="fairface_predict", image="face_name_align",
                 values={})
    man = pd.DataFrame({"image_id": ["val/a.jpg", "val/b.jpg", "val/c.jpg", "val/d.jpg"],
                        "status": "ok"})
    imp = import_estimates(spec, man, FAIRFACE_RACES)
    st = imp.statuses
    assert st["where"].tolist() == ["preds.csv:2", "preds.csv:4", "preds.csv:6", ""]
    assert st["status"].tolist() == ["ok", "ok", "ok", "no_prediction"]
    cols = imp.columns.set_index("image_id")
    assert cols["import_mine_race"].tolist() == ["Indian", "Black", "White"]
    assert cols["import_mine_age"].tolist() == ["20-29", "more than 70", "3-9"]
