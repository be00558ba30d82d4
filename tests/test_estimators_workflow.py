"""The estimator report through Snakemake on a UTKFace-layout folder (issue 42): rule all
on an attribute benchmark runs ingest, faces, attributes and the estimator report, and no
embedding or verification job; the report's figures equal a recomputation from the
attribute table it read.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from conftest import TEST_DATA, run_snakemake
from scipy import stats

from facecast.datasets.fairface import age_bin
from facecast.io.parquet_io import read_parquet

REQUIRED = ["estimator", "attribute", "group_by", "group", "n", "n_train_excluded",
            "n_no_face", "accuracy", "accuracy_lo", "accuracy_hi", "accuracy_all",
            "accuracy_std", "stratified_by", "p_raw", "p", "p_adjusted", "mae", "mae_std",
            "family"]


@pytest.fixture(scope="module")
def utk_run(tmp_path_factory):
    work = tmp_path_factory.mktemp("utk_run")
    cfg = {"datasets": {"utk": {"kind": "utkface", "root": str(TEST_DATA / "utkface")}},
           "attributes": {"scorers": ["age_gender"]},
           "estimators": {"min_n": 2, "n_boot": 200}}
    proc = run_snakemake(work, cfg)
    return work, proc


def test_only_attribute_stages_run(utk_run):
    work, proc = utk_run
    ds = work / "results" / "utk"
    assert sorted(p.name for p in ds.iterdir() if p.is_dir()) == [
        "attributes", "faces", "index", "labels", "logs", "report", "runtime"]
    plan = (work / "results" / "utk" / "plan.md").read_text()
    assert "datasets.utk: kind utkface - images without identities" in plan
    assert "fairness: skipped - no dataset with identities" in plan
    for name in ("estimators.md", "estimators.html", "estimators.png",
                 "estimator_confusion.parquet"):
        assert (ds / "labels" / name).is_file()


def test_report_figures_equal_a_recomputation(utk_run):
    work, _ = utk_run
    ds = work / "results" / "utk"
    table = read_parquet(ds / "labels" / "estimators.parquet")
    assert set(REQUIRED) <= set(table.columns)
    attrs = read_parquet(ds / "attributes.parquet")
    manifest = read_parquet(ds / "manifest.parquet")
    ok = attrs[attrs["image_id"].isin(manifest.loc[manifest["status"] == "ok", "image_id"])]
    found = ok[ok["status"] == "ok"]
    # the picture without a face (33_0_1_...: a Black man) is counted, per group
    det = table[table["estimator"] == "detector"].set_index(["group_by", "group"])
    assert det.loc[("all", "all"), "n"] == len(ok) == 9
    assert det.loc[("all", "all"), "n_no_face"] == 1
    assert det.loc[("race", "Black"), "n_no_face"] == 1
    assert det.loc[("race", "White"), "n_no_face"] == 0
    gender = table.query("estimator == 'age_gender' and attribute == 'gender'").set_index(
        ["group_by", "group"])
    right = (found["age_gender_male"] >= 0.5) == (found["label_male"] == 1)
    r = gender.loc[("all", "all")]
    assert r["accuracy"] == pytest.approx(right.mean())
    ci = stats.binomtest(int(right.sum()), len(right)).proportion_ci(0.95, "wilson")
    assert (r["accuracy_lo"], r["accuracy_hi"]) == pytest.approx((ci.low, ci.high))
    age = table.query("estimator == 'age_gender' and attribute == 'age' and "
                      "group_by == 'all'").iloc[0]
    err = (found["age_gender_age"] - found["label_age"]).abs()
    assert age["mae"] == pytest.approx(err.mean())
    bins = age_bin(found["age_gender_age"].to_numpy()) == found["label_age_bin"].to_numpy()
    assert age["accuracy"] == pytest.approx(bins.mean())
    assert r["accuracy_all"] == pytest.approx(right.sum() / len(ok))
    small = table[(table["estimator"] != "detector") & (table["n_scored"] < 2)]
    assert small["accuracy"].isna().all() and small["note"].str.contains("n/a").all()
    # UTKFace has no split: nothing is anyone's training data; the detector says it is an
    # upper bound; every test is stratified and adjusted within its estimate
    assert (table["n_train_excluded"] == 0).all()
    assert table.loc[table["estimator"] == "detector", "note"].str.contains(
        "upper bound").all()
    tested = table[table["p"].notna()]
    assert len(tested)
    assert set(tested["stratified_by"]) <= {"age", "race x gender"}
    assert (tested["p_adjusted"] >= tested["p"]).all()
    assert (table["family"] == table["estimator"] + " / " + table["attribute"]).all()


def test_bad_names_and_labels_are_counted_not_grouped(utk_run):
    work, _ = utk_run
    md = (work / "results" / "utk" / "labels" / "estimators.md").read_text()
    assert "| bad_label | 2 |" in md and "| bad_name | 1 |" in md
    conf = read_parquet(work / "results" / "utk" / "labels" / "estimator_confusion.parquet")
    whole = conf.query("estimator == 'age_gender' and attribute == 'gender' and "
                       "group_by == 'all'")
    assert whole["count"].sum() == 8  # nine good images, one without a face
    attrs = read_parquet(work / "results" / "utk" / "attributes.parquet")
    manifest = read_parquet(work / "results" / "utk" / "manifest.parquet")
    ok = attrs[attrs["image_id"].isin(manifest.loc[manifest["status"] == "ok", "image_id"])]
    found = ok[ok["status"] == "ok"]
    cross = pd.crosstab(found["label_gender"],
                        np.where(found["age_gender_male"] >= 0.5, "Male", "Female"))
    for r in whole.itertuples():
        expected = cross.loc[r.true, r.predicted] if r.predicted in cross else 0
        assert r.count == expected
        assert r.n_true == cross.loc[r.true].sum()
