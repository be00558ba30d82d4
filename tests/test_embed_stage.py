"""Stage embed on a hand-made faces shard: every row kept, statuses, provenance, determinism."""

from __future__ import annotations

import hashlib

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from PIL import Image
from skimage.data import astronaut

from facecast.embed.base import MissingWeightsError
from facecast.embed.lbp import load_fit
from facecast.embed.stage import embed_shard, fit_lbp
from facecast.faces.crops import encode_png
from facecast.io.parquet_io import read_provenance, write_parquet

FACE = astronaut()[20:200, 140:320]  # the astronaut's face, 180x180


def _crop(dx: int, dy: int, size: int = 112, gain: float = 1.0) -> np.ndarray:
    region = np.roll(FACE, (dy, dx), axis=(0, 1))[20:160, 20:160].astype(np.float32) * gain
    im = Image.fromarray(np.clip(region, 0, 255).astype(np.uint8)).resize((size, size))
    return np.asarray(im)


def _faces_table(rows: list[dict]) -> pa.Table:
    schema = pa.schema([("image_id", pa.string()), ("status", pa.string()),
                        ("message", pa.string()), ("crop_arcface", pa.binary()),
                        ("crop_facenet", pa.binary())])
    return pa.Table.from_pylist(rows, schema=schema)


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    root = tmp_path_factory.mktemp("embed_stage")
    rows = [
        {"image_id": "a.jpg", "status": "ok", "message": "",
         "crop_arcface": encode_png(_crop(0, 0)), "crop_facenet": encode_png(_crop(0, 0, 160))},
        {"image_id": "b.jpg", "status": "fallback", "message": "no face; centre crop",
         "crop_arcface": encode_png(_crop(3, -2, gain=0.8)), "crop_facenet": None},
        {"image_id": "c.jpg", "status": "no_face", "message": "no face found",
         "crop_arcface": None, "crop_facenet": None},
        {"image_id": "d.jpg", "status": "ok", "message": "",
         "crop_arcface": b"\x89PNG\r\n\x1a\nnot really", "crop_facenet": None},
        {"image_id": "e.jpg", "status": "ok", "message": "", "crop_arcface": None,
         "crop_facenet": None},
        {"image_id": "f.jpg", "status": "missing", "message": "file not found: f.jpg",
         "crop_arcface": None, "crop_facenet": None},
        {"image_id": "g.jpg", "status": "ok", "message": "",
         "crop_arcface": encode_png(_crop(0, 0, size=64)), "crop_facenet": None},
    ]
    faces = root / "faces" / "00000.parquet"
    write_parquet(_faces_table(rows), faces)
    # a training shard: shifted / re-lit views of the face, split train in the manifest
    train_rows = [{"image_id": f"t{i}.jpg", "status": "ok", "message": "",
                   "crop_arcface": encode_png(_crop(i % 7 - 3, i // 7 - 2, gain=0.7 + 0.02 * i)),
                   "crop_facenet": None} for i in range(30)]
    train = root / "faces" / "00001.parquet"
    write_parquet(_faces_table(train_rows), train)
    manifest = pd.DataFrame({"image_id": [r["image_id"] for r in rows + train_rows],
                             "split": ["test"] * len(rows) + ["train"] * len(train_rows)})
    write_parquet(manifest, root / "manifest.parquet")
    return root


EXPECTED = {"a.jpg": "ok", "b.jpg": "ok", "c.jpg": "no_face", "d.jpg": "decode_error",
            "e.jpg": "no_crop", "f.jpg": "missing", "g.jpg": "decode_error"}


def _check_rows(path, dim):
    table = pq.read_table(path)
    assert table.schema.field("embedding").type == pa.list_(pa.float32(), dim)
    assert table.schema.field("norm").type == pa.float32()
    df = table.to_pandas()
    assert df["image_id"].tolist() == list(EXPECTED)
    assert dict(zip(df["image_id"], df["status"], strict=True)) == EXPECTED
    ok = df["status"] == "ok"
    assert df.loc[~ok, "embedding"].isna().all() and df.loc[~ok, "norm"].isna().all()
    assert (df.loc[~ok, "message"].str.len() > 0).all()
    emb = np.stack(df.loc[ok, "embedding"].to_numpy())
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, rtol=1e-5)
    assert (df.loc[ok, "norm"] > 0).all()
    msg = dict(zip(df["image_id"], df["message"], strict=True))
    assert msg["b.jpg"].startswith("fallback crop") and "centre crop" in msg["b.jpg"]
    assert "decode" in msg["d.jpg"] and "64x64" in msg["g.jpg"]
    assert msg["f.jpg"] == "file not found: f.jpg"
    return df


def test_dlib_stage_keeps_every_row(shard, tmp_path):
    out = tmp_path / "dlib" / "00000.parquet"
    embed_shard(shard / "faces" / "00000.parquet", out, "dlib", {"backend": "dlib_resnet"},
                {"batch_size": 2}, provenance={"config_hash": "abc", "seed": 1})
    df = _check_rows(out, 128)
    prov = read_provenance(out)
    assert prov["model"] == "dlib" and prov["backend"] == "dlib_resnet"
    assert prov["config_hash"] == "abc" and prov["stage"] == "embed"
    weights = prov["weights"]
    assert weights.endswith("dlib_face_recognition_resnet_model_v1.dat")
    assert prov["weights_sha256"] == hashlib.sha256(open(weights, "rb").read()).hexdigest()
    a, b = np.stack(df.loc[df["status"] == "ok", "embedding"].to_numpy())
    assert float(a @ b) > 0.8  # the same face, shifted and darker


def test_lbp_fit_and_stage_deterministic(shard, tmp_path):
    faces = [shard / "faces" / "00000.parquet", shard / "faces" / "00001.parquet"]
    cfg = {"backend": "lbp", "pca_dim": 16, "radii": [1], "grid": 4}
    fit_path = fit_lbp(shard / "manifest.parquet", faces, tmp_path / "fit.npz", "lbp", cfg)
    fit = load_fit(fit_path)
    assert int(fit["n_train"]) == 30 and str(fit["fit_split"]) == "train"
    assert fit["projection"].shape == (4 * 4 * 59, 16)
    outs = []
    for k in range(2):
        out = tmp_path / f"run{k}" / "00000.parquet"
        embed_shard(faces[0], out, "lbp", cfg, {"batch_size": 3}, fit_path=str(fit_path))
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]  # same config -> byte-identical output
    _check_rows(tmp_path / "run0" / "00000.parquet", 16)
    prov = read_provenance(tmp_path / "run0" / "00000.parquet")
    assert prov["weights"] == str(fit_path) and prov["n_train"] == 30


def test_lbp_fit_without_train_split_is_unwhitened_not_collapsed(shard, tmp_path):
    """No train split: the whitening used to be fitted on the evaluated images themselves."""
    manifest = tmp_path / "manifest.parquet"
    df = pd.read_parquet(shard / "manifest.parquet").assign(split="all")
    write_parquet(df, manifest)
    faces = [shard / "faces" / "00001.parquet"]
    cfg = {"backend": "lbp", "pca_dim": 4, "grid": 2}
    fit_path = fit_lbp(manifest, faces, tmp_path / "f.npz", "lbp", cfg)
    fit = load_fit(fit_path)
    assert str(fit["whitening"]) == "none" and "split == 'train'" in str(fit["reason"])
    out = tmp_path / "e" / "00001.parquet"
    embed_shard(faces[0], out, "lbp", cfg, {"batch_size": 8}, fit_path=str(fit_path))
    prov = read_provenance(out)
    assert prov["whitening"] == "none" and "split" in prov["whitening_reason"]
    emb = np.stack(pd.read_parquet(out)["embedding"].to_numpy())
    assert emb.shape[1] == 2 * 2 * 2 * 59  # raw Hellinger features (radii 1, 2)
    with pytest.raises(ValueError, match=r"embed\.models\.lbp\.pca_dim"):
        fit_lbp(manifest, faces, tmp_path / "g.npz", "lbp", {**cfg, "on_small_fit": "error"})


def test_lbp_fit_refuses_small_or_overlapping_train(shard, tmp_path):
    faces = [shard / "faces" / "00000.parquet", shard / "faces" / "00001.parquet"]
    small = load_fit(fit_lbp(shard / "manifest.parquet", faces, tmp_path / "a.npz", "lbp",
                             {"backend": "lbp", "pca_dim": 30, "grid": 2}))
    assert str(small["whitening"]) == "none" and "only 30" in str(small["reason"])
    manifest = tmp_path / "manifest.parquet"
    df = pd.read_parquet(shard / "manifest.parquet")
    write_parquet(df.assign(exclude=False), manifest)  # train rows may enter benchmarks
    overlap = load_fit(fit_lbp(manifest, faces, tmp_path / "b.npz", "lbp",
                               {"backend": "lbp", "pca_dim": 4, "grid": 2}))
    assert str(overlap["whitening"]) == "none" and "not excluded" in str(overlap["reason"])
    write_parquet(df.assign(exclude=df["split"] == "train"), manifest)
    ok = load_fit(fit_lbp(manifest, faces, tmp_path / "c.npz", "lbp",
                          {"backend": "lbp", "pca_dim": 4, "grid": 2}))
    assert str(ok["whitening"]) == "pca" and ok["projection"].shape == (2 * 2 * 2 * 59, 4)


def test_missing_weights_fail_before_output(shard, tmp_path):
    out = tmp_path / "x" / "00000.parquet"
    with pytest.raises(MissingWeightsError, match="backbone.pth"):
        embed_shard(shard / "faces" / "00000.parquet", out, "r100",
                    {"backend": "iresnet", "weights": str(tmp_path / "backbone.pth")}, {})
    assert not out.exists()
