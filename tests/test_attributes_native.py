"""Native quality/geometry measures, pose, the per-shard scorer and the streamed merge."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import torch_modules_after
from scipy.ndimage import gaussian_filter
from skimage import data

from facecast.attributes.align import (
    ARCFACE_TEMPLATE_112,
    landmarks_in_arcface_crop,
    similarity_batch,
    warp_batch,
)
from facecast.attributes.inputs import faces_table
from facecast.attributes.merge import merge_attributes
from facecast.attributes.native import (
    BLOCK,
    blur_effect_batch,
    face_region,
    geometry_measures,
    image_measures,
    luminance,
)
from facecast.attributes.pose import head_pose, project_face
from facecast.attributes.stage import score_shard
from facecast.datasets.manifest import write_manifest
from facecast.io.parquet_io import read_metadata, write_parquet


@pytest.fixture(scope="module")
def face_crop() -> np.ndarray:
    """The astronaut photo aligned to the ArcFace template (landmarks measured once)."""
    lm = np.array([[[205.5, 117.7], [249.6, 107.5], [232.8, 136.6], [215.6, 163.1],
                    [253.3, 155.6]]])
    return warp_batch(data.astronaut()[None], lm, ARCFACE_TEMPLATE_112, 112)[0]


def test_sharpness_drops_with_blur(face_crop):
    blurred = np.stack([gaussian_filter(face_crop[..., c].astype(float), 2.0)
                        for c in range(3)], -1).round().astype(np.uint8)
    m = image_measures(np.stack([face_crop, blurred]))
    assert m["sharpness_laplacian"][0] > 3 * m["sharpness_laplacian"][1]
    assert m["blur_effect"][1] > m["blur_effect"][0]


def test_batched_blur_effect_is_scikit_images(face_crop):
    """The batched blur effect equals scikit-image's per-image function on a sharp, a
    blurred and a noisy crop, and across a block boundary of image_measures."""
    from skimage.measure import blur_effect

    rng = np.random.default_rng(0)
    blurred = np.stack([gaussian_filter(face_crop[..., c].astype(float), 1.5)
                        for c in range(3)], -1).round().astype(np.uint8)
    noisy = np.clip(face_crop + rng.normal(0, 25, face_crop.shape), 0, 255).astype(np.uint8)
    crops = np.stack([face_crop, blurred, noisy] * (BLOCK // 3 + 1))[:BLOCK + 2]
    faces = luminance(face_region(crops))
    expected = np.array([blur_effect(f, h_size=11) for f in faces[:3]])
    np.testing.assert_allclose(blur_effect_batch(faces[:3]), expected, rtol=1e-6)
    measured = image_measures(crops)["blur_effect"]
    assert len(measured) == BLOCK + 2
    np.testing.assert_allclose(measured, np.resize(expected, BLOCK + 2), rtol=1e-6)
    with pytest.raises(TypeError, match="float"):
        blur_effect_batch(crops[..., 0])


def test_exposure_measures_follow_brightness(face_crop):
    f = face_crop.astype(float)
    dark = (f * 0.1).astype(np.uint8)
    bright = np.clip(f * 2.5, 0, 255).astype(np.uint8)
    m = image_measures(np.stack([dark, face_crop, bright]))
    assert m["luminance_mean"][0] < m["luminance_mean"][1] < m["luminance_mean"][2]
    assert m["underexposure"][0] > 0.5 > m["underexposure"][1]
    assert m["overexposure"][2] > 0.3 > m["overexposure"][1]
    assert m["dynamic_range"][0] < m["dynamic_range"][1]
    assert m["luminance_var"][0] < m["luminance_var"][1]


def test_illumination_uniformity_sees_a_side_light(face_crop):
    sym = ((face_crop.astype(float) + face_crop[:, ::-1]) / 2).astype(np.uint8)
    ramp = np.linspace(0.2, 1.0, 112)[None, :, None]
    side = (sym * ramp).astype(np.uint8)
    m = image_measures(np.stack([sym, side]))
    assert m["illumination_uniformity"][0] > 0.99
    assert m["illumination_uniformity"][1] < 0.8
    flat = np.full((1, 112, 112, 3), 128, np.uint8)
    assert image_measures(flat)["illumination_uniformity"][0] == pytest.approx(1.0)


def test_roll_of_rotated_landmarks():
    for angle in (-30.0, -5.0, 0.0, 12.0, 40.0):
        lm = project_face(roll=angle, scale=2.0, centre=(100, 120))[None]
        assert head_pose(lm)["roll"][0] == pytest.approx(angle, abs=1e-6)


def test_yaw_and_pitch_signs_and_values():
    lms = np.stack([project_face(yaw=y, pitch=p, scale=1.5, centre=(50, 60))
                    for y, p in [(0, 0), (25, 0), (-25, 0), (0, 15), (0, -15)]])
    pose = head_pose(lms)
    np.testing.assert_allclose(pose["yaw"], [0, 25, -25, 0, 0], atol=1e-6)
    np.testing.assert_allclose(pose["pitch"], [0, 0, 0, 15, -15], atol=1e-6)
    # a hand-made asymmetric face: nose shifted towards the image right -> positive yaw
    lm = ARCFACE_TEMPLATE_112.copy()
    lm[2, 0] += 8
    assert head_pose(lm[None])["yaw"][0] > 10
    # roll does not leak into yaw
    rolled = project_face(yaw=20, roll=30)[None]
    assert head_pose(rolled)["yaw"][0] == pytest.approx(20, abs=1e-6)


def test_geometry_inter_eye_and_face_size():
    lm = np.array([project_face(scale=1.0, centre=(100, 100)),
                   project_face(scale=2.0, centre=(100, 100))])
    bbox = np.array([[60, 40, 140, 160], [-20, -20, 80, 80]], float)
    g = geometry_measures(lm, bbox, np.array([200.0, 200.0]), np.array([200.0, 200.0]),
                          np.array([0.9, 0.99]))
    np.testing.assert_allclose(g["inter_eye_distance"], [64, 128])
    np.testing.assert_allclose(g["face_area_rel"], [80 * 120 / 4e4, 80 * 80 / 4e4])
    np.testing.assert_allclose(g["bbox_width"], [80, 100])
    np.testing.assert_allclose(g["det_score"], [0.9, 0.99])


def test_batched_similarity_recovers_a_known_transform():
    rng = np.random.default_rng(0)
    ang, s, t = 0.3, 1.7, np.array([12.0, -4.0])
    rot = s * np.array([[np.cos(ang), -np.sin(ang)], [np.sin(ang), np.cos(ang)]])
    src = ARCFACE_TEMPLATE_112 + rng.normal(0, 0.01, (5, 2))
    dst = src @ rot.T + t
    m = similarity_batch(src[None], dst)[0]
    np.testing.assert_allclose(m[:, :2], rot, atol=1e-3)
    # image landmarks map onto the template in crop coordinates
    img_lm = (ARCFACE_TEMPLATE_112 - 56) * 2.5 + 200
    np.testing.assert_allclose(landmarks_in_arcface_crop(img_lm[None])[0], ARCFACE_TEMPLATE_112,
                               atol=1e-9)
    assert np.isnan(similarity_batch(np.full((1, 5, 2), np.nan), dst)).all()


def _hand_shard(tmp_path, face_crop):
    """Four rows: sharp, blurred, no face (no crop), corrupt crop bytes."""
    blurred = np.stack([gaussian_filter(face_crop[..., c].astype(float), 2.0)
                        for c in range(3)], -1).round().astype(np.uint8)
    lm = np.stack([project_face(scale=1.0, centre=(128, 128))] * 4)
    lm[2] = np.nan
    bbox = np.array([[80, 60, 176, 200]] * 4, float)
    bbox[2] = np.nan
    table = faces_table(["a.jpg", "b.jpg", "c.jpg", "d.jpg"],
                        [face_crop, blurred, None, face_crop], lm, bbox,
                        status=["ok", "ok", "no_face", "ok"])
    table.loc[3, "crop_arcface"] = b"not a png"
    faces = write_parquet(table, tmp_path / "faces" / "00000.parquet")
    emb = write_parquet(pd.DataFrame({"image_id": ["b.jpg", "a.jpg"], "status": ["ok", "ok"],
                                      "norm": np.array([7.0, 3.0], np.float32)}),
                        tmp_path / "embed" / "m1" / "00000.parquet")
    return faces, emb


def test_native_shard_keeps_every_row(tmp_path, face_crop):
    faces, emb = _hand_shard(tmp_path, face_crop)
    out = tmp_path / "attributes" / "native" / "00000.parquet"
    t = score_shard("native", faces, out, {"crop": "arcface"}, embed_paths={"m1": emb})
    assert list(t["image_id"]) == ["a.jpg", "b.jpg", "c.jpg", "d.jpg"]
    assert list(t["status"]) == ["ok", "ok", "no_face", "crop_error"]
    assert "does not decode" in t.loc[3, "message"]
    assert t.loc[0, "sharpness_laplacian"] > t.loc[1, "sharpness_laplacian"]
    assert np.isnan(t.loc[2, "sharpness_laplacian"]) and np.isnan(t.loc[2, "yaw"])
    np.testing.assert_allclose(t["embed_norm_m1"].to_numpy(), [3.0, 7.0, np.nan, np.nan])
    assert t.loc[0, "inter_eye_distance"] == pytest.approx(64.0, abs=1e-3)
    desc = json.loads(read_metadata(out)["facecast.attribute_columns"])
    assert desc["yaw"] and desc["embed_norm_m1"]


def test_native_scorer_job_does_not_import_torch(tmp_path, face_crop):
    """The native measures are numpy: a job scoring them loads no torch (about 3 CPU
    seconds per job on a 2-core machine, more than the measures of a small shard)."""
    faces, emb = _hand_shard(tmp_path, face_crop)
    out = tmp_path / "native.parquet"
    code = ("from facecast.attributes.stage import score_shard\n"
            f"score_shard('native', {str(faces)!r}, {str(out)!r}, {{'device': 'auto'}},\n"
            f"            embed_paths={{'m1': {str(emb)!r}}})")
    assert torch_modules_after(code) == []
    assert read_metadata(out)["facecast.attribute_columns"]


def test_merge_streams_shards_with_labels(tmp_path, face_crop):
    faces, emb = _hand_shard(tmp_path, face_crop)
    native = score_shard("native", faces, tmp_path / "n0.parquet", {}, embed_paths={"m1": emb})
    # second shard: two more images
    t2 = faces_table(["e.jpg", "f.jpg"], [face_crop, face_crop],
                     np.stack([project_face(centre=(128, 128))] * 2),
                     np.array([[80, 60, 176, 200]] * 2, float))
    faces2 = write_parquet(t2, tmp_path / "faces" / "00001.parquet")
    emb2 = write_parquet(pd.DataFrame({"image_id": ["e.jpg", "f.jpg"], "norm": [1.0, 2.0]}),
                         tmp_path / "embed" / "m1" / "00001.parquet")
    score_shard("native", faces2, tmp_path / "n1.parquet", {}, embed_paths={"m1": emb2})
    manifest = pd.DataFrame({
        "image_id": ["a.jpg", "b.jpg", "c.jpg", "d.jpg", "e.jpg", "f.jpg"],
        "path": ["a.jpg", "b.jpg", "c.jpg", "d.jpg", "e.jpg", "f.jpg"],
        "identity": ["x", "x", "y", "y", "z", "z"], "split": ["train"] * 4 + ["test"] * 2,
        "shard": ["00000"] * 4 + ["00001"] * 2, "exclude": [False] * 5 + [True],
        "status": ["ok"] * 6, "message": [""] * 6, "single_image": [False] * 6,
        "label_glasses": [1, 0, 1, 0, 1, 0], "label_male": [True, True, False, False, True, True],
        "label_group": ["a", "b", "a", "b", None, "a"],
    })
    mpath = write_manifest(manifest, tmp_path / "manifest.parquet", shard_size=4)
    out = merge_attributes(mpath, [str(faces), str(faces2)],
                           {"native": [str(tmp_path / "n0.parquet"), str(tmp_path / "n1.parquet")]},
                           tmp_path / "attributes.parquet")
    pf = pq.ParquetFile(out)
    assert pf.metadata.num_row_groups == 2
    merged = pf.read().to_pandas()
    assert list(merged["image_id"]) == list(manifest["image_id"])
    assert list(merged.columns[:6]) == ["image_id", "identity", "split", "exclude", "status",
                                        "message"]
    assert merged["status"].tolist() == ["ok", "ok", "no_face", "ok", "ok", "ok"]
    assert "native: " in merged.loc[3, "message"]
    assert merged["exclude"].tolist() == [False] * 5 + [True]
    assert merged["label_glasses"].dtype == np.float64
    assert merged["label_male"].tolist() == [1.0, 1.0, 0.0, 0.0, 1.0, 1.0]
    assert pq.read_schema(out).field("label_group").type == "string"
    assert merged["label_group"].isna().tolist() == [False] * 4 + [True, False]
    assert merged["label_group"].dropna().tolist() == ["a", "b", "a", "b", "a"]
    np.testing.assert_allclose(merged["embed_norm_m1"], [3, 7, np.nan, np.nan, 1, 2])
    np.testing.assert_allclose(merged["sharpness_laplacian"].iloc[:4],
                               native["sharpness_laplacian"])
    desc = json.loads(read_metadata(out)["facecast.attribute_columns"])
    assert desc["sharpness_laplacian"].startswith("[native]")


def test_merge_rejects_clashing_column_names(tmp_path, face_crop):
    faces, _ = _hand_shard(tmp_path, face_crop)
    a = score_shard("native", faces, tmp_path / "a.parquet", {})
    manifest = pd.DataFrame({"image_id": a["image_id"], "path": a["image_id"],
                             "identity": ["x"] * 4, "split": ["all"] * 4, "shard": ["00000"] * 4,
                             "exclude": [False] * 4, "status": ["ok"] * 4, "message": [""] * 4,
                             "single_image": [False] * 4})
    mpath = write_manifest(manifest, tmp_path / "manifest.parquet", shard_size=4)
    with pytest.raises(ValueError, match="unique"):
        merge_attributes(mpath, [str(faces)], {"native": [str(tmp_path / "a.parquet")],
                                               "celeba40": [str(tmp_path / "a.parquet")]},
                         tmp_path / "out.parquet")
