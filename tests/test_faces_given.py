"""Faces from the dataset's landmarks where it gives them, the detector elsewhere (issue 41:
RFW's ``_lmk.txt`` may lack an image's line or hold a garbled one).

One RFW set of tests/data/rfw (RFW's layout: 12 loosely cropped faces and their
``_lmk.txt``), with three landmark lines removed or garbled: those three images are
detected with MTCNN, the other nine aligned with the release's points; with
``faces.detector: none`` the three get ``no_landmarks``; a shard whose rows all have points
loads no detector (nor torch).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from conftest import REPO, TEST_DATA

from facecast.datasets.manifest import read_shard_ids
from facecast.datasets.rfw import rfw_files
from facecast.datasets.stage import build_manifest
from facecast.faces.given import given_points
from facecast.faces.stage import run_faces_shard
from facecast.io.parquet_io import read_provenance

SET = "African"
#: images whose _lmk.txt line the test removes (two) or garbles (one)
DROPPED = ["data/African/m.0af00x/m.0af00x_0002.jpg", "data/African/m.0af02x/m.0af02x_0001.jpg"]
GARBLED = "data/African/m.0af03x/m.0af03x_0003.jpg"
CPU = {"device": "cpu", "threads": 1, "batch_size": 8}


def _release_points() -> dict[str, np.ndarray]:
    """Each image's ten coordinates as the untouched release's ``_lmk.txt`` gives them."""
    out = {}
    for line in rfw_files(TEST_DATA / "rfw", SET)["lmk"].read_text().splitlines():
        f = line.split("\t")
        pid, name = f[0].split("/")[-2:]
        out[f"data/{SET}/{pid}/{name}"] = np.array([float(v) for v in f[2:]])
    return out


@pytest.fixture(scope="module")
def release(tmp_path_factory) -> tuple[Path, Path, str]:
    """(root, manifest, shard) of the set with three images lacking usable landmarks."""
    base = tmp_path_factory.mktemp("rfw_given")
    root = base / "rfw"
    shutil.copytree(TEST_DATA / "rfw" / "data" / SET, root / "data" / SET)
    shutil.copytree(TEST_DATA / "rfw" / "txts" / SET, root / "txts" / SET)
    lmk = rfw_files(root, SET)["lmk"]
    lines = []
    for line in lmk.read_text().splitlines():
        if any(line.startswith(f"/test/{p}\t") for p in DROPPED):
            continue
        if line.startswith(f"/test/{GARBLED}\t"):
            line = line.rsplit("\t", 1)[0] + "\tnan"  # a coordinate that is not finite
        lines.append(line)
    lmk.write_text("\n".join(lines) + "\n")
    mpath = base / "manifest.parquet"
    build_manifest({"kind": "rfw", "root": str(root), "sets": [SET]}, base, mpath)
    (shard,) = read_shard_ids(mpath)
    return root, mpath, shard


@pytest.fixture(scope="module")
def mixed(release, tmp_path_factory):
    root, mpath, shard = release
    out = tmp_path_factory.mktemp("faces_given") / "mixed.parquet"
    counts = run_faces_shard(mpath, shard, root, out, CPU)
    return pq.read_table(out).to_pandas().set_index("image_id"), out, counts


def test_given_points_accepts_only_ten_finite_numbers():
    assert given_points(list(range(10))).tolist() == [float(v) for v in range(10)]
    for bad in (None, [1.0] * 8, [1.0] * 9 + [float("nan")], ["a"] * 10, float("nan")):
        assert given_points(bad) is None


def test_rows_without_given_points_are_detected_the_rest_aligned_with_them(mixed):
    df, _, counts = mixed
    lacking = [*DROPPED, GARBLED]
    assert len(df) == 12 and counts == {"landmarks_given": 9, "ok": 3}
    assert sorted(df.index[df["status"] == "ok"]) == sorted(lacking)
    assert set(df.loc[lacking, "landmark_source"]) == {"mtcnn"}
    given = df.drop(index=lacking)
    assert (given["status"] == "landmarks_given").all()
    assert (given["landmark_source"] == "given").all()
    release = _release_points()
    for image_id, row in given.iterrows():  # the release's points, as given
        np.testing.assert_allclose(row["landmarks"], release[image_id], atol=1e-3)
    for image_id in lacking:  # the detector found the face the release's points mark
        row = df.loc[image_id]
        assert row["n_faces"] >= 1 and row["det_score"] > 0.9
        assert row["crop_arcface"] is not None and row["crop_facenet"] is not None
        want = release[image_id].reshape(5, 2)
        eye_dist = np.linalg.norm(want[1] - want[0])
        err = np.linalg.norm(np.reshape(row["landmarks"], (5, 2)) - want, axis=1)
        assert err.max() < 0.15 * eye_dist, (image_id, err / eye_dist)


def test_provenance_and_log_count_both_paths(mixed, release, tmp_path, caplog):
    _, out, _ = mixed
    prov = read_provenance(out)
    assert prov["model"]["detector"] == "mtcnn"
    assert prov["model"]["landmarks"] == "given by the dataset"
    assert prov["landmark_plan"] == {"detect": 3, "given": 9}
    root, mpath, shard = release
    caplog.set_level(logging.INFO, logger="facecast.faces.stage")
    run_faces_shard(mpath, shard, root, tmp_path / "again.parquet", CPU)
    assert "9 aligned with the dataset's landmarks" in caplog.text
    assert "3 detected with mtcnn" in caplog.text
    assert "landmark sources {'given': 9, 'mtcnn': 3}" in caplog.text


def test_detector_none_keeps_no_landmarks_with_the_reason(release, tmp_path, caplog):
    root, mpath, shard = release
    out = tmp_path / "none.parquet"
    counts = run_faces_shard(mpath, shard, root, out, dict(CPU, detector="none"))
    assert counts == {"landmarks_given": 9, "no_landmarks": 3}
    df = pq.read_table(out).to_pandas().set_index("image_id")
    lacking = df.loc[[*DROPPED, GARBLED]]
    assert (lacking["status"] == "no_landmarks").all()
    assert lacking["landmark_source"].isna().all() and lacking["crop_arcface"].isna().all()
    assert lacking["message"].str.contains("faces.detector is none").all()
    assert read_provenance(out)["model"] == {"detector": "none",
                                             "landmarks": "given by the dataset"}
    assert "3 images have no usable given landmarks and faces.detector is none" in caplog.text


def test_shard_with_every_point_given_loads_no_detector_nor_torch(tmp_path):
    """The untouched release: every image has points, so the mtcnn job imports no torch."""
    mpath = tmp_path / "manifest.parquet"
    root = TEST_DATA / "rfw"
    build_manifest({"kind": "rfw", "root": str(root), "sets": [SET]}, tmp_path, mpath)
    (shard,) = read_shard_ids(mpath)
    out = tmp_path / "faces.parquet"
    code = textwrap.dedent(f"""
        import sys
        from facecast.faces.stage import run_faces_shard
        counts = run_faces_shard({str(mpath)!r}, {shard!r}, {str(root)!r}, {str(out)!r},
                                 {{"device": "cpu", "threads": 1}})
        print(counts, "torch" in sys.modules)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, check=True)
    assert proc.stdout.split() == ["{'landmarks_given':", "12}", "False"], proc.stderr
    model = read_provenance(out)["model"]
    assert model["detector"] == "none" and model["configured_detector"] == "mtcnn"
