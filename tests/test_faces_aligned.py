"""Pre-aligned input (``faces.detector: none``): frames, crops, statuses, no detector."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import torch_modules_after
from PIL import Image

from facecast.datasets.manifest import finalize_manifest, write_manifest
from facecast.faces.align import ARCFACE_TEMPLATE_112, crop_facenet
from facecast.faces.aligned import (
    ALIGNED_STATUS,
    ARCFACE112_FACE_BOX,
    aligned_row,
    facenet_region,
    frame_for,
)
from facecast.faces.config import FacesConfig
from facecast.faces.crops import decode_png
from facecast.faces.decode import read_image
from facecast.faces.stage import run_faces_shard
from facecast.io.parquet_io import read_provenance


def _smooth(h: int, w: int, seed: int = 0) -> np.ndarray:
    """A smooth colour image (bilinear resampling of it is nearly exact)."""
    rng = np.random.default_rng(seed)
    small = rng.integers(0, 255, (6, 6, 3), dtype=np.uint8)
    return np.asarray(Image.fromarray(small).resize((w, h), Image.Resampling.BICUBIC))


def _dec(arr: np.ndarray):
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "PNG")
    return read_image(buf.getvalue())


def test_config_keys():
    cfg = FacesConfig.from_mapping({"detector": "none", "aligned_as": "facenet160"})
    assert cfg.detector == "none" and cfg.aligned_as == "facenet160"
    with pytest.raises(ValueError, match="faces.aligned_as"):
        FacesConfig.from_mapping({"detector": "none", "aligned_as": "arcface128"})
    with pytest.raises(ValueError, match="faces.detector"):
        FacesConfig.from_mapping({"detector": "retinaface"})


def test_arcface112_is_the_image_itself():
    arr = _smooth(112, 112)
    row = aligned_row("a", _dec(arr), FacesConfig(detector="none"))
    assert row["status"] == ALIGNED_STATUS and row["det_score"] is None
    assert np.array_equal(decode_png(row["crop_arcface"]), arr)
    np.testing.assert_allclose(np.reshape(row["landmarks"], (5, 2)), ARCFACE_TEMPLATE_112,
                               atol=1e-4)
    np.testing.assert_allclose(row["bbox"], ARCFACE112_FACE_BOX)
    # the facenet crop is facenet-pytorch's crop of the template box (fixed transform)
    expect = crop_facenet(arr, ARCFACE112_FACE_BOX, 160, 14.0)
    assert np.array_equal(decode_png(row["crop_facenet"]), expect)


def test_other_sizes_are_resized_with_a_note():
    arr = _smooth(224, 224)
    warned: dict = {}
    row = aligned_row("b", _dec(arr), FacesConfig(detector="none"), warned)
    assert "224x224 input resized as a arcface112 crop" in row["message"] and warned["size"]
    crop = decode_png(row["crop_arcface"]).astype(int)
    ref = np.asarray(Image.fromarray(arr).resize((112, 112), Image.Resampling.BILINEAR))
    assert np.abs(crop - ref.astype(int)).mean() < 2.0
    np.testing.assert_allclose(np.reshape(row["landmarks"], (5, 2)),
                               (ARCFACE_TEMPLATE_112 + 0.5) * 2 - 0.5, atol=1e-4)


def test_facenet160_round_trip():
    """A facenet crop made from an arcface frame gives that frame back (interior)."""
    arc = _smooth(112, 112, seed=3)
    cfg = FacesConfig(detector="none", aligned_as="facenet160")
    # the facenet region of the ArcFace frame, resampled to 160 px, without clipping
    r = facenet_region(cfg.facenet_margin)
    big = np.asarray(Image.fromarray(arc).resize((1120, 1120), Image.Resampling.BICUBIC))
    box = tuple(float(v) * 10 for v in r)
    pad = 200
    canvas = np.zeros((1120 + 2 * pad, 1120 + 2 * pad, 3), np.uint8)
    canvas[pad:pad + 1120, pad:pad + 1120] = big
    fn = np.asarray(Image.fromarray(canvas).resize(
        (160, 160), Image.Resampling.BILINEAR,
        box=(box[0] + pad, box[1] + pad, box[2] + pad, box[3] + pad)))
    row = aligned_row("c", _dec(fn), cfg)
    assert row["message"] == ""
    assert np.array_equal(decode_png(row["crop_facenet"]), fn)  # 160 px: the image itself
    back = decode_png(row["crop_arcface"]).astype(int)
    inner = (slice(10, 102), slice(20, 92))  # inside the facenet region
    assert np.abs(back[inner] - arc[inner].astype(int)).mean() < 4.0
    np.testing.assert_allclose(row["bbox"], [7, 7, 153, 153], atol=1e-6)  # margin 14 / 2


def test_center_frame():
    cfg = FacesConfig(detector="none", aligned_as="center", center_crop_fraction=0.5)
    f = frame_for("center", 200, 100, cfg)
    assert (f.ox, f.oy, f.sx, f.sy) == (75.0, 25.0, 50 / 112, 50 / 112)
    row = aligned_row("d", _dec(_smooth(100, 200)), cfg)
    s = 50 / 112
    np.testing.assert_allclose(row["bbox"], [75 + 18 * s, 25 + 9 * s, 75 + 94 * s,
                                             25 + 116 * s], rtol=1e-6)
    assert decode_png(row["crop_arcface"]).shape == (112, 112, 3)


def test_stage_runs_without_a_detector(tmp_path, monkeypatch):
    root = tmp_path / "root"
    (root / "p1").mkdir(parents=True)
    Image.fromarray(_smooth(112, 112)).save(root / "p1" / "a.jpg", quality=90)
    (root / "p1" / "bad.jpg").write_bytes(b"\xff\xd8 not really")
    raw = pd.DataFrame({"path": ["p1/a.jpg", "p1/bad.jpg", "p1/gone.jpg"],
                        "identity": ["p1"] * 3})
    m = finalize_manifest(raw, root, shard_size=10)
    write_manifest(m, tmp_path / "m.parquet", shard_size=10)

    def no_detector(*a, **k):
        raise AssertionError("MTCNN must not be loaded for detector none")

    monkeypatch.setattr("facecast.faces.stage.FaceDetector", no_detector)
    out = tmp_path / "f.parquet"
    counts = run_faces_shard(tmp_path / "m.parquet", "00000", root, out, {"detector": "none"})
    assert counts == {ALIGNED_STATUS: 1, "decode_error": 1, "missing": 1}
    t = pq.read_table(out).to_pandas()
    assert t["image_id"].tolist() == m["image_id"].tolist()
    prov = read_provenance(out)
    assert prov["model"] == {"detector": "none", "aligned_as": "arcface112"}
    # without a detector the job needs no torch (its import is ~3 CPU s per job)
    code = ("from facecast.faces.stage import run_faces_shard\n"
            f"run_faces_shard({str(tmp_path / 'm.parquet')!r}, '00000', {str(root)!r},\n"
            f"                {str(tmp_path / 'g.parquet')!r}, {{'detector': 'none'}})")
    assert torch_modules_after(code) == []
    assert pq.read_table(tmp_path / "g.parquet").num_rows == 3


@pytest.mark.parametrize("shape", [(112, 112, 3), (160, 160, 3), (1, 7, 3), (5, 1, 3)])
def test_fast_png_is_lossless_and_deterministic(shape):
    from facecast.faces.crops import encode_png_fast

    arr = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    for level in (0, 6):
        assert np.array_equal(decode_png(encode_png_fast(arr, level)), arr)
    data = encode_png_fast(arr, 1)
    assert np.array_equal(decode_png(data), arr)
    assert encode_png_fast(arr.copy(), 1) == data
    with pytest.raises(ValueError):
        encode_png_fast(arr[..., 0], 1)
