"""The faces stage on a tiny hand-made tree: every input row gets exactly one output row."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
import skimage.data
import yaml
from matplotlib import cbook
from PIL import Image

from facecast.datasets.manifest import finalize_manifest, write_manifest
from facecast.faces.config import FacesConfig
from facecast.faces.crops import decode_png
from facecast.faces.detect import FaceDetector
from facecast.faces.stage import FACES_SCHEMA, run_faces_shard
from facecast.io.parquet_io import read_provenance

REPO = Path(__file__).resolve().parents[1]


def _resized(arr: np.ndarray, side: int) -> Image.Image:
    im = Image.fromarray(arr)
    s = side / max(im.size)
    return im.resize((round(im.width * s), round(im.height * s)), Image.Resampling.LANCZOS)


def _jpeg(im: Image.Image, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "JPEG", quality=92, **kw)
    return buf.getvalue()


def _png(im: Image.Image, **kw) -> bytes:
    buf = io.BytesIO()
    im.save(buf, "PNG", **kw)
    return buf.getvalue()


# expected status per file (None: listed in the manifest but never created)
EXPECTED = {
    "alice/face.jpg": "ok", "alice/gray.jpg": "ok", "alice/rgba.png": "ok",
    "alice/big.jpg": "ok", "bob/cmyk.jpg": "ok", "bob/sixteen.png": "ok",
    "bob/palette.png": "ok", "bob/rotated.jpg": "ok",
    "carol/corrupt.png": "decode_error", "carol/truncated.jpg": "decode_error",
    "carol/empty.jpg": "decode_error", "carol/notes.jpg": "decode_error",
    "carol/huge.png": "decode_error", "carol/noface.png": "no_face",
    "carol/vanished.jpg": "missing", "dave/never_there.jpg": "missing",
    "../outside.jpg": "outside_root",
}


@pytest.fixture(scope="module")
def tree(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("faces_tree") / "root"
    astro = skimage.data.astronaut()
    grace = np.asarray(Image.open(cbook.get_sample_data("grace_hopper.jpg", asfileobj=False)))
    exif = Image.Exif()
    exif[0x0112] = 6  # stored rotated; viewer must rotate 90 degrees clockwise
    corrupt = bytearray(_png(_resized(astro, 160)))
    corrupt[len(corrupt) // 2] ^= 0xFF
    rgba = np.dstack([np.asarray(_resized(astro, 224)), np.full((224, 224), 255, np.uint8)])
    rgba[:20, :, 3] = 0
    gray16 = np.asarray(_resized(astro, 224).convert("L")).astype(np.uint16) * 257
    truncated = _jpeg(_resized(grace, 240))
    files = {
        "alice/face.jpg": _jpeg(_resized(astro, 224)),
        "alice/gray.jpg": _jpeg(_resized(grace, 240).convert("L")),
        "alice/rgba.png": _png(Image.fromarray(rgba, "RGBA")),
        "alice/big.jpg": _jpeg(_resized(astro, 900)),
        "bob/cmyk.jpg": _jpeg(_resized(grace, 240).convert("CMYK")),
        "bob/sixteen.png": _png(Image.fromarray(gray16)),
        "bob/palette.png": _png(_resized(grace, 240).quantize(colors=200)),
        "bob/rotated.jpg": _jpeg(_resized(grace, 240).transpose(Image.Transpose.ROTATE_90),
                                 exif=exif.tobytes()),
        "carol/corrupt.png": bytes(corrupt),
        "carol/truncated.jpg": truncated[: len(truncated) // 2],
        "carol/empty.jpg": b"",
        "carol/notes.jpg": b"this is not an image\n",
        "carol/huge.png": _png(Image.new("L", (1100, 1000), 128)),
        "carol/noface.png": _png(Image.fromarray(np.tile(
            np.linspace(0, 255, 200, dtype=np.uint8)[None, :, None], (160, 1, 3)))),
        "carol/vanished.jpg": _jpeg(_resized(astro, 128)),
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    raw = pd.DataFrame({"path": list(EXPECTED),
                        "identity": [p.split("/")[0] if p[0] != "." else "x" for p in EXPECTED]})
    manifest = finalize_manifest(raw, root, shard_size=100)
    mpath = root.parent / "manifest.parquet"
    write_manifest(manifest, mpath, shard_size=100)
    (root / "carol/vanished.jpg").unlink()  # gone between ingest and the faces job
    return root, mpath


@pytest.fixture(scope="module")
def detector() -> FaceDetector:
    return FaceDetector({"device": "cpu"})


BASE = {"device": "cpu", "max_pixels": 1_000_000, "batch_size": 4}


@pytest.fixture(scope="module")
def result(tree, detector, tmp_path_factory) -> tuple[pd.DataFrame, Path, dict]:
    root, mpath = tree
    out = tmp_path_factory.mktemp("faces_out") / "00000.parquet"
    counts = run_faces_shard(mpath, "00000", root, out, BASE, provenance={"seed": 1},
                             detector=detector)
    return pq.read_table(out).to_pandas(), out, counts


def test_every_row_once_with_expected_status(result, tree):
    df, out, counts = result
    assert pq.read_schema(out).remove_metadata().equals(FACES_SCHEMA)
    ids = df["image_id"].tolist()
    assert len(ids) == len(EXPECTED) and len(set(ids)) == len(ids)
    got = dict(zip(df["image_id"], df["status"], strict=True))
    # the manifest keeps the escaping path as given; every other id is the relative path
    got = {("../outside.jpg" if k.startswith("..") else k): v for k, v in got.items()}
    assert got == EXPECTED
    assert counts == df["status"].value_counts().to_dict()
    assert (df.loc[df["status"] != "ok", "message"].str.len() > 0).all()


def test_ok_rows_have_faces_and_crops(result):
    df, _, _ = result
    ok = df[df["status"] == "ok"]
    for _, r in ok.iterrows():
        assert r["n_faces"] >= 1 and 0.7 < r["det_score"] <= 1.0
        assert len(r["bbox"]) == 4 and len(r["landmarks"]) == 10
        lm = np.asarray(r["landmarks"]).reshape(5, 2)
        assert lm[0, 0] < lm[1, 0] and lm[:2, 1].max() < lm[2, 1] < lm[3:, 1].min()
        x1, y1, x2, y2 = r["bbox"]
        assert x1 < lm[:, 0].min() and lm[:, 0].max() < x2
        assert 0 <= lm[:, 0].min() and lm[:, 0].max() < r["image_width"]
        assert decode_png(r["crop_arcface"]).shape == (112, 112, 3)
        assert decode_png(r["crop_facenet"]).shape == (160, 160, 3)
        # every detected box's area, largest first; select=largest keeps the first
        areas = np.asarray(r["face_box_areas"])
        assert len(areas) == r["n_faces"] and (np.diff(areas) <= 0).all()
        assert areas[0] == pytest.approx((x2 - x1) * (y2 - y1), rel=1e-5)
    rot = df.set_index("image_id").loc["bob/rotated.jpg"]
    assert (rot["image_width"], rot["image_height"]) == (205, 240)  # upright after EXIF
    assert "EXIF orientation 6" in rot["message"]
    big = df.set_index("image_id").loc["alice/big.jpg"]
    assert (big["image_width"], big["image_height"]) == (900, 900)


def test_failed_rows_are_empty_but_present(result):
    df, _, _ = result
    bad = df[df["status"].isin(["decode_error", "missing", "outside_root"])]
    assert bad["crop_arcface"].isna().all() and bad["crop_facenet"].isna().all()
    assert bad["n_faces"].isna().all() and bad["bbox"].isna().all()
    assert bad["face_box_areas"].isna().all()
    msgs = df.set_index("image_id")["message"]
    assert "empty file" in msgs["carol/empty.jpg"]
    assert "not a recognised image" in msgs["carol/notes.jpg"]
    assert "exceeds max_pixels" in msgs["carol/huge.png"]
    assert "truncated or corrupt" in msgs["carol/truncated.jpg"]
    assert "truncated or corrupt" in msgs["carol/corrupt.png"]
    noface = df.set_index("image_id").loc["carol/noface.png"]
    assert noface["n_faces"] == 0 and noface["crop_arcface"] is None
    assert len(noface["face_box_areas"]) == 0  # the detector ran and found none


def test_provenance_names_the_detector(result):
    _, out, _ = result
    prov = read_provenance(out)
    assert prov["stage"] == "faces" and prov["seed"] == 1 and prov["shard"] == "00000"
    assert prov["model"]["detector"] == "mtcnn"
    assert len(prov["model"]["weights"]["onet"]["sha256"]) == 64
    assert prov["faces_config"]["max_pixels"] == 1_000_000


def test_same_config_same_output(result, tree, detector, tmp_path):
    df, out, _ = result
    root, mpath = tree
    again = tmp_path / "again.parquet"
    run_faces_shard(mpath, "00000", root, again, BASE, provenance={"seed": 1},
                    detector=detector)
    assert pq.read_table(again).equals(pq.read_table(out))
    assert again.read_bytes() == out.read_bytes()


def test_fallback_reduced_decoding_and_single_crop(result, tree, detector, tmp_path):
    df, _, _ = result
    root, mpath = tree
    out = tmp_path / "fallback.parquet"
    cfg = dict(BASE, fallback="center_crop", crops=["arcface"], decode_max_side=300)
    run_faces_shard(mpath, "00000", root, out, cfg, detector=detector)
    fb = pq.read_table(out).to_pandas().set_index("image_id")
    row = fb.loc["carol/noface.png"]
    assert row["status"] == "fallback" and "centre crop" in row["message"]
    assert decode_png(row["crop_arcface"]).shape == (112, 112, 3)
    assert row["crop_facenet"] is None and np.isnan(row["det_score"])
    assert np.allclose(row["bbox"], [100 - 56, 80 - 56, 100 + 56, 80 + 56])
    assert fb.loc[fb["status"] == "ok", "crop_facenet"].isna().all()
    # the 900 px JPEG was decoded at 1/2 scale; coordinates are still full-image pixels
    full = df.set_index("image_id").loc["alice/big.jpg"]
    half = fb.loc["alice/big.jpg"]
    assert half["status"] == "ok" and (half["image_width"], half["image_height"]) == (900, 900)
    assert np.allclose(half["landmarks"], full["landmarks"], atol=6)
    assert np.allclose(half["bbox"], full["bbox"], atol=10)


def test_empty_shard_writes_an_empty_table(tree, detector, tmp_path):
    _, mpath = tree
    out = tmp_path / "empty.parquet"
    counts = run_faces_shard(mpath, "00007", tmp_path, out, BASE, detector=detector)
    assert counts == {} and pq.read_table(out).num_rows == 0


def test_schema_defaults_match_code_defaults():
    schema = yaml.safe_load((REPO / "workflow/schemas/config.schema.yaml").read_text())
    props = schema["properties"]["faces"]["properties"]
    assert {k: v["default"] for k, v in props.items()} == FacesConfig().as_dict()
    assert schema["properties"]["faces"]["additionalProperties"] is False
    config = yaml.safe_load((REPO / "config.yaml").read_text())
    assert FacesConfig.from_mapping(config["faces"]) == FacesConfig()


def test_manifest_statuses_pass_through_untouched(detector, tmp_path):
    from facecast.faces.stage import iter_face_rows

    rows = [{"image_id": "a", "path": "a.jpg", "status": "duplicate", "message": "listed twice"},
            {"image_id": "b", "path": "b.jpg", "status": "no_identity", "message": pd.NA},
            {"image_id": "c", "path": "../../etc/passwd", "status": "ok", "message": ""}]
    out = [r for chunk in iter_face_rows(rows, tmp_path, FacesConfig(), detector,
                                         progress=False) for r in chunk]
    assert [(r["image_id"], r["status"], r["message"]) for r in out] == [
        ("a", "duplicate", "listed twice"), ("b", "no_identity", ""),
        ("c", "outside_root", f"path escapes the dataset root {tmp_path}")]
    assert all(r["crop_arcface"] is None and r["n_faces"] is None for r in out)


def test_face_row_records_every_box_area_in_full_image_pixels():
    """SingleFacePresent (OFIQ) needs the two largest boxes, whichever face is kept: a
    reduced decode (scale 0.5) doubles each side, so areas grow four times."""
    from facecast.faces.decode import DecodedImage
    from facecast.faces.detect import Detections
    from facecast.faces.stage import _Job, face_row

    img = np.asarray(skimage.data.astronaut())[::2, ::2].copy()  # 256 x 256
    boxes = np.array([[10, 10, 30, 40], [100, 60, 180, 170], [200, 200, 210, 205]], np.float32)
    lms = np.tile(np.array([[120, 90], [160, 90], [140, 110], [125, 140], [155, 140]],
                           np.float32), (3, 1, 1))
    det = Detections(boxes, np.array([0.99, 0.95, 0.9], np.float32), lms)
    dec = DecodedImage(img, "ok", "", 512, 512, 0.5, 0.5)
    row = face_row(_Job("x", "ok", "", decoded=dec), det, FacesConfig(select="score"))
    assert row["n_faces"] == 3 and row["status"] == "ok"
    # full px = (p + 0.5) / 0.5 - 0.5: widths and heights double
    expect = sorted([(2 * 80) * (2 * 110), (2 * 20) * (2 * 30), (2 * 10) * (2 * 5)],
                    reverse=True)
    np.testing.assert_allclose(row["face_box_areas"], expect, rtol=1e-6)
    assert row["bbox"][2] - row["bbox"][0] == pytest.approx(40)  # score kept the small box
