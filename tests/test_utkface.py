"""kind: utkface - labels from UTKFace's file names (issue 42.1).

tests/data/utkface holds aligned-release names (``.jpg.chip.jpg``) on small copies of the
repository's test photos: eight well-formed, one without a race field (as three files of
the release are), one with age 130, one with gender 2 and race 7, one without a face.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from conftest import TEST_DATA

from facecast.datasets.fairface import age_bin
from facecast.datasets.stage import build_manifest
from facecast.datasets.utkface import UTK_RACES, parse_name, read_utkface
from facecast.io.parquet_io import read_parquet

ROOT = TEST_DATA / "utkface"


@pytest.mark.parametrize("name, status, parsed", [
    ("25_0_2_20170116174525125.jpg.chip.jpg", "ok", (25, 0, 2)),
    ("1_1_4_20161221193016140.jpg", "ok", (1, 1, 4)),
    ("116_1_0_20170120134921760.JPG", "ok", (116, 1, 0)),
    ("61_1_20170109142408075.jpg.chip.jpg", "bad_name", None),
    ("53__0_20170116184028385.jpg.chip.jpg", "bad_name", None),
    ("x_0_0_20170116184028385.jpg", "bad_name", None),
    ("25_0_2_20170116174525125.png", "bad_name", None),
    ("117_0_0_20170116184028385.jpg", "bad_label", None),
    ("30_2_5_20170116184028385.jpg", "bad_label", None),
])
def test_parse_name(name, status, parsed):
    st, msg, got = parse_name(name)
    assert (st, got) == (status, parsed)
    assert (msg == "") == (status == "ok")
    if status == "bad_label":
        assert msg.startswith(name)


def test_rows_labels_and_statuses():
    rows = read_utkface(ROOT).set_index("path")
    files = sorted(p.name for p in ROOT.iterdir())
    assert sorted(rows.index) == files
    assert (rows["identity"] == rows.index).all()
    bad = rows[rows["status"] != "ok"]
    assert bad["status"].to_dict() == {
        "130_0_0_20170110120000000.jpg.chip.jpg": "bad_label",
        "30_2_7_20170110120000001.jpg.chip.jpg": "bad_label",
        "61_1_20170109142408075.jpg.chip.jpg": "bad_name"}
    msg = bad.loc["30_2_7_20170110120000001.jpg.chip.jpg", "message"]
    assert "gender 2 is not 0 (male) or 1 (female)" in msg and "race 7 is not 0-4" in msg
    assert "age 130 is outside UTKFace's 0-116" in bad.iloc[0]["message"]
    ok = rows[rows["status"] == "ok"]
    for path, r in ok.iterrows():
        age, gender, race = (int(v) for v in Path(path).name.split("_")[:3])
        assert r["label_age"] == age
        assert r["label_age_bin"] == age_bin([age])[0]
        assert r["label_male"] == (1.0 if gender == 0 else 0.0)
        assert r["label_gender"] == ("Male" if gender == 0 else "Female")
        assert r["label_race"] == UTK_RACES[race]
    assert bad[["label_age", "label_male"]].isna().all().all()


def test_manifest_keeps_every_image(tmp_path):
    out = tmp_path / "manifest.parquet"
    build_manifest({"kind": "utkface", "root": str(ROOT)}, tmp_path, out)
    m = read_parquet(out)
    assert len(m) == 12 and m["image_id"].is_unique
    assert m["status"].value_counts().to_dict() == {"ok": 9, "bad_label": 2, "bad_name": 1}
    assert pd.api.types.is_float_dtype(m["label_age"])


def _copy(src: str, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes((ROOT / src).read_bytes())


def test_overlapping_folders_count_each_photo_once(tmp_path):
    """UTKFace/, crop_part1/ and part1/ as downloaded: the same photo (labels + date&time)
    is one ``ok`` row, its other copies ``duplicate`` naming the kept path; the same stamp
    with other labels, or the same labels with another stamp, are other photos."""
    a, b = "19_0_4_20170116173838285.jpg.chip.jpg", "22_0_2_20170116164530917.jpg.chip.jpg"
    _copy(a, tmp_path / "UTKFace" / a)
    _copy(b, tmp_path / "UTKFace" / b)
    _copy(a, tmp_path / "crop_part1" / a)  # the aligned copy again
    _copy(a, tmp_path / "part1" / "19_0_4_20170116173838285.jpg")  # the in-the-wild one
    _copy(b, tmp_path / "part1" / "22_1_2_20170116164530917.jpg")  # same stamp, other labels
    _copy(b, tmp_path / "part2" / "22_0_2_20170116164530918.jpg")  # same labels, other stamp
    rows = read_utkface(tmp_path).set_index("path")
    assert rows["status"].to_dict() == {
        f"UTKFace/{a}": "ok", f"UTKFace/{b}": "ok", f"crop_part1/{a}": "duplicate",
        "part1/19_0_4_20170116173838285.jpg": "duplicate",
        "part1/22_1_2_20170116164530917.jpg": "ok",
        "part2/22_0_2_20170116164530918.jpg": "ok"}
    for dup in (f"crop_part1/{a}", "part1/19_0_4_20170116173838285.jpg"):
        assert rows.loc[dup, "message"] == (
            f"{dup}: the same photo as UTKFace/{a} (labels and date&time "
            "19_0_4_20170116173838285); that copy is kept")
        assert pd.isna(rows.loc[dup, "label_race"]) and pd.isna(rows.loc[dup, "label_age"])
    assert rows.loc["part1/22_1_2_20170116164530917.jpg", "label_gender"] == "Female"
    out = tmp_path / "manifest.parquet"
    build_manifest({"kind": "utkface", "root": str(tmp_path)}, tmp_path / "work", out)
    assert read_parquet(out)["status"].value_counts().to_dict() == {"ok": 4, "duplicate": 2}
