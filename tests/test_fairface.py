"""kind: fairface - FairFace's release layout read into manifest rows (issue 42.1).

tests/data/fairface holds the release's layout (train/, val/, fairface_label_train.csv,
fairface_label_val.csv) with small copies of the repository's test photos and labels
written for the test; two rows of the val file carry labels FairFace does not have.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
from conftest import REPO, TEST_DATA

from facecast.config.check import collect
from facecast.config.prepare import resolve_config
from facecast.datasets.fairface import (
    FAIRFACE_AGE_BINS,
    FAIRFACE_RACES,
    age_bin,
    layout_errors,
    read_fairface,
)
from facecast.datasets.manifest import DatasetError
from facecast.datasets.stage import build_manifest
from facecast.io.parquet_io import read_parquet

ROOT = TEST_DATA / "fairface"
SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")


def _csv(name: str) -> pd.DataFrame:
    return pd.read_csv(ROOT / name, dtype=str, keep_default_na=False)


def test_rows_follow_the_label_files():
    rows = read_fairface(ROOT)
    train, val = _csv("fairface_label_train.csv"), _csv("fairface_label_val.csv")
    assert rows["path"].tolist() == train["file"].tolist() + val["file"].tolist()
    assert rows["identity"].tolist() == rows["path"].tolist()  # no identities: each alone
    assert rows["split"].tolist() == ["train"] * len(train) + ["val"] * len(val)
    good = rows["status"] == "ok"
    both = pd.concat([train, val], ignore_index=True)
    assert rows.loc[good, "label_race"].tolist() == both.loc[good, "race"].tolist()
    assert rows.loc[good, "label_age_bin"].tolist() == both.loc[good, "age"].tolist()
    assert rows.loc[good, "label_gender"].tolist() == both.loc[good, "gender"].tolist()
    male = (both["gender"] == "Male").astype(float)
    assert rows["label_male"].tolist() == male.tolist()
    assert rows["label_service_test"].tolist() == (both["service_test"] == "True"
                                                   ).astype(float).tolist()


def test_bad_labels_get_a_status_and_a_message_naming_file_line_and_value():
    rows = read_fairface(ROOT).set_index("path")
    assert (rows["status"] == "bad_label").sum() == 2
    age = rows.loc["val/4.jpg"]
    assert age["status"] == "bad_label"
    assert age["message"].startswith("fairface_label_val.csv:5: age '35' is not one of")
    assert pd.isna(age["label_age_bin"]) and age["label_race"] == "White"
    race = rows.loc["val/5.jpg"]
    assert race["message"].startswith("fairface_label_val.csv:6: race 'Caucasian'")
    assert all(r in race["message"] for r in FAIRFACE_RACES)
    assert pd.isna(race["label_race"])


def test_splits_and_layout_errors(tmp_path):
    assert set(read_fairface(ROOT, ["val"])["split"]) == {"val"}
    with pytest.raises(DatasetError, match="no FairFace label file"):
        read_fairface(tmp_path)
    (tmp_path / "fairface_label_val.csv").write_text("file,age,gender\nval/1.jpg,3-9,Male\n")
    with pytest.raises(DatasetError, match=r"lacks FairFace's column\(s\) \['race', "
                                           r"'service_test'\]"):
        read_fairface(tmp_path)
    errs = layout_errors("datasets.ff", {"root": str(tmp_path)})
    assert len(errs) == 1 and errs[0].startswith("datasets.ff.root: ")
    errs = layout_errors("datasets.ff", {"root": str(tmp_path), "splits": ["train"]})
    assert errs[0].startswith("datasets.ff.root: ") and "does not exist" in errs[0]


def test_age_bins_against_the_bin_names():
    def by_hand(a: float) -> str | None:
        if np.isnan(a):
            return None
        if a < 3:
            return "0-2"
        if a >= 70:
            return "more than 70"
        lo = 3 if a < 10 else int(a // 10) * 10
        hi = 9 if a < 10 else lo + 9
        return f"{lo}-{hi}"

    ages = np.array([0, 2.999, 3, 9.5, 10, 19.99, 20, 45, 59.9, 60, 69.99, 70, 116, np.nan])
    assert age_bin(ages).tolist() == [by_hand(a) for a in ages]
    assert set(age_bin(np.arange(0, 100))) == set(FAIRFACE_AGE_BINS)


def test_manifest_keeps_every_row(tmp_path):
    out = tmp_path / "manifest.parquet"
    build_manifest({"kind": "fairface", "root": str(ROOT)}, tmp_path, out)
    m = read_parquet(out)
    assert len(m) == 13
    assert m["status"].value_counts().to_dict() == {"ok": 11, "bad_label": 2}
    assert m.loc[m["image_id"] == "val/5.jpg", "message"].iloc[0].startswith(
        "fairface_label_val.csv:6")
    assert {"label_race", "label_male", "label_age_bin", "label_gender",
            "label_service_test"} <= set(m.columns)


def _config(**extra) -> dict:
    cfg = {"datasets": {"ff": {"kind": "fairface", "root": str(ROOT)},
                        "mine": {"kind": "folder", "root": str(TEST_DATA / "yale")}},
           "embed": {"models": {"lbp": {"backend": "lbp"}}},
           "attributes": {"scorers": ["native", "age_gender"]}}
    cfg.update(copy.deepcopy(extra))
    return cfg


def test_config_plan_and_verification_sections():
    cfg = _config()
    plan = resolve_config(cfg, SCHEMA)
    assert collect(cfg)[0] == []
    assert any(line.startswith("datasets.ff: kind fairface - images without identities")
               for line in plan)
    assert any(line.startswith("estimators: ff - the detector and age_gender's gender")
               for line in plan)
    # the verification dataset's derived groups are not narrowed by the benchmark
    assert cfg["fairness"]["protected"]["gender"]["column"] == "age_gender_male"
    bad = _config(fairness={"datasets": ["ff"]}, quality={"datasets": ["ff"]})
    resolve_config(bad, SCHEMA)
    errors = collect(bad)[0]
    for key in ("fairness.datasets", "quality.datasets"):
        assert any(e.startswith(f"{key}: 'ff' is a dataset of kind fairface") for e in errors)


def test_estimator_report_key_is_checked():
    for name, why in (("nope", "is not a configured dataset"),
                      ("mine", "has no truth labels")):
        cfg = _config(fairness={"estimator_report": name})
        resolve_config(cfg, SCHEMA)
        errors = [e for e in collect(cfg)[0] if e.startswith("fairness.estimator_report: ")]
        assert len(errors) == 1 and why in errors[0]
    cfg = _config(fairness={"estimator_report": "ff"})
    resolve_config(cfg, SCHEMA)
    assert collect(cfg)[0] == []


def _label_file(tmp_path, lines: list[str]) -> None:
    (tmp_path / "fairface_label_val.csv").write_text("\n".join(lines) + "\n")


def test_a_row_with_an_extra_field_costs_that_row_only(tmp_path):
    _label_file(tmp_path, [
        "file,age,gender,race,service_test",
        "val/1.jpg,60-69,Male,White,True",
        "val/2.jpg,30-39,Male,Southeast Asian,False,oops",
        'val/3.jpg,30-39,"Fe',
        'male",Indian,True',
        "val/4.jpg,20-29",
        "val/5.jpg,3-9,Female,Black,False"])
    rows = read_fairface(tmp_path).set_index("path")
    assert rows["status"].to_dict() == {"val/1.jpg": "ok", "val/2.jpg": "bad_row",
                                        "val/3.jpg": "bad_label", "val/4.jpg": "bad_row",
                                        "val/5.jpg": "ok"}
    assert rows.loc["val/2.jpg", "message"] == (
        "fairface_label_val.csv:3: 6 fields where the header has 5 (extra 'oops'); the row "
        "is not read")
    assert rows.loc["val/3.jpg", "message"].startswith(
        "fairface_label_val.csv:4: gender 'Fe\\nmale' is not one of")  # a quoted newline
    assert rows.loc["val/4.jpg", "message"] == (
        "fairface_label_val.csv:6: 2 fields where the header has 5 (no gender, race, "
        "service_test); the row is not read")
    assert rows.loc["val/2.jpg", ["label_race", "label_age_bin", "label_gender"]].isna().all()
    assert np.isnan(rows.loc["val/2.jpg", "label_male"])
    assert rows.loc["val/5.jpg", ["label_age_bin", "label_gender", "label_race"]].tolist() == [
        "3-9", "Female", "Black"]


def test_a_trailing_comma_on_every_line_shifts_no_column(tmp_path):
    lines = ["file,age,gender,race,service_test", "val/1.jpg,60-69,Male,White,True",
             "val/2.jpg,3-9,Female,Indian,False"]
    _label_file(tmp_path, [line + "," for line in lines])
    rows = read_fairface(tmp_path)
    assert rows["status"].tolist() == ["ok", "ok"]
    assert rows["path"].tolist() == ["val/1.jpg", "val/2.jpg"]
    assert rows["label_race"].tolist() == ["White", "Indian"]
    assert rows["label_service_test"].tolist() == [1.0, 0.0]
    _label_file(tmp_path, [lines[0]] + [line + "," for line in lines[1:]])  # rows only
    assert read_fairface(tmp_path)["label_age_bin"].tolist() == ["60-69", "3-9"]


def test_statuses_found_later_name_the_csv_line(tmp_path):
    """A path listed twice and an image that is not there get the manifest's statuses,
    each message naming the label file's line."""
    (tmp_path / "val").mkdir()
    (tmp_path / "val" / "1.jpg").write_bytes((ROOT / "val" / "1.jpg").read_bytes())
    _label_file(tmp_path, ["file,age,gender,race,service_test",
                           "val/1.jpg,60-69,Male,White,True",
                           "val/1.jpg,3-9,Female,Black,False",
                           "val/2.jpg,3-9,Female,Black,False,extra",
                           "val/3.jpg,3-9,Female,Black,False"])
    out = tmp_path / "manifest.parquet"
    build_manifest({"kind": "fairface", "root": str(tmp_path)}, tmp_path / "work", out)
    m = read_parquet(out)
    assert m["status"].tolist() == ["ok", "duplicate", "bad_row", "missing"]
    assert [msg.split(": ")[0] for msg in m["message"].tolist()[1:]] == [
        "fairface_label_val.csv:3", "fairface_label_val.csv:4", "fairface_label_val.csv:5"]
    assert "source_line" not in m and "source_file" not in m
