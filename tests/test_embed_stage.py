"""Stage embed on a hand-made faces shard: every row kept, statuses, provenance, determinism."""

from __future__ import annotations

import hashlib
import warnings

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import torch.nn.functional as F
from PIL import Image
from skimage.data import astronaut

from facecast.embed.base import MissingWeightsError
from facecast.embed.lbp import load_fit
from facecast.embed.stage import (
    UnusableFeaturesError,
    embed_shard,
    feature_problems,
    fit_lbp,
)
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


# --------------------------------------------------------------- unusable (non-finite) features


class _Overflow(torch.nn.Module):
    """Pooled pixels (+2, so positive); rows brighter than ``threshold`` times ``scale``:
    a model whose activations blow up on some inputs."""

    def __init__(self, threshold: float, scale: float) -> None:
        super().__init__()
        self.threshold = threshold
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = F.adaptive_avg_pool2d(x, 4).flatten(1) + 2.0
        bright = x.mean(dim=(1, 2, 3)) > self.threshold
        return torch.where(bright[:, None], f * self.scale, f)


MIXED = {"bright1.jpg": ("ok", 1.3), "dark1.jpg": ("ok", 0.5),
         "bright2.jpg": ("fallback", 1.25), "dark2.jpg": ("aligned_input", 0.6)}


@pytest.fixture(scope="module")
def mixed_shard(tmp_path_factory):
    """Two bright and two dark faces, a row without a face and one whose crop is broken;
    the threshold between the bright and dark crops' mean normalised pixel."""
    root = tmp_path_factory.mktemp("embed_mixed")
    rows, means = [], {}
    for k, (name, (status, gain)) in enumerate(MIXED.items()):
        crop = _crop(k - 2, 1 - k, gain=gain)
        means[name] = float(((crop.astype(np.float32) - 127.5) / 127.5).mean())
        rows.append({"image_id": name, "status": status,
                     "message": "no face; centre crop" if status == "fallback" else "",
                     "crop_arcface": encode_png(crop), "crop_facenet": None})
    rows.append({"image_id": "none.jpg", "status": "no_face", "message": "no face found",
                 "crop_arcface": None, "crop_facenet": None})
    rows.append({"image_id": "broken.jpg", "status": "ok", "message": "",
                 "crop_arcface": b"\x89PNG\r\n\x1a\nbroken", "crop_facenet": None})
    faces = root / "00000.parquet"
    write_parquet(_faces_table(rows), faces)
    bright = min(means["bright1.jpg"], means["bright2.jpg"])
    dark = max(means["dark1.jpg"], means["dark2.jpg"])
    assert bright > dark + 0.1
    return faces, (bright + dark) / 2


def _run(faces, tmp_path, threshold: float, scale: float, tag: str, amp: str = "none"):
    model = tmp_path / f"overflow_{tag}.pt"
    with warnings.catch_warnings():  # torch >= 2.9 deprecates writing TorchScript
        warnings.simplefilter("ignore", FutureWarning)
        torch.jit.save(torch.jit.script(_Overflow(threshold, scale)), str(model))
    out = tmp_path / tag / "00000.parquet"
    embed_shard(faces, out, "blow", {"backend": "torchscript", "weights": str(model)},
                {"batch_size": 3, "device": "cpu", "amp": amp})
    df = pd.read_parquet(out).set_index("image_id")
    return df, read_provenance(out)


def _untouched(df):
    assert (df.loc["none.jpg", "status"], df.loc["none.jpg", "message"]) == \
        ("no_face", "no face found")
    assert df.loc["broken.jpg", "status"] == "decode_error"
    assert df.loc[["none.jpg", "broken.jpg"], "embedding"].isna().all()


def test_rows_with_inf_features_get_embed_error(mixed_shard, tmp_path):
    faces, threshold = mixed_shard
    df, prov = _run(faces, tmp_path, threshold, float("inf"), "inf")
    ref, _ = _run(faces, tmp_path, threshold, 1.0, "ref")
    bright, dark = ["bright1.jpg", "bright2.jpg"], ["dark1.jpg", "dark2.jpg"]
    assert (df.loc[bright, "status"] == "embed_error").all()
    for m in df.loc[bright, "message"]:
        assert m == "non-finite features (inf) from model blow"
    assert df.loc[bright, "embedding"].isna().all() and df.loc[bright, "norm"].isna().all()
    assert (df.loc[dark, "status"] == "ok").all() and (ref.loc[list(MIXED), "status"] == "ok").all()
    np.testing.assert_array_equal(np.stack(df.loc[dark, "embedding"]),
                                  np.stack(ref.loc[dark, "embedding"]))
    np.testing.assert_array_equal(df.loc[dark, "norm"], ref.loc[dark, "norm"])
    _untouched(df)
    assert prov["n_unusable_features"] == 2  # counted in the provenance


def test_norm_beyond_float32_is_never_ok(mixed_shard, tmp_path):
    """Finite features whose norm overflows float32 used to be status ok with norm inf."""
    faces, threshold = mixed_shard
    df, prov = _run(faces, tmp_path, threshold, 1e38, "huge")
    assert np.isfinite(df["norm"].dropna()).all()
    bright = ["bright1.jpg", "bright2.jpg"]
    assert (df.loc[bright, "status"] == "embed_error").all()
    assert df.loc[bright, "message"].str.startswith(
        "feature norm beyond float32 from model blow (norm ").all()
    assert (df.loc[["dark1.jpg", "dark2.jpg"], "status"] == "ok").all()
    assert prov["n_unusable_features"] == 2


def test_large_finite_features_keep_a_finite_norm(mixed_shard, tmp_path):
    """1e20-scale features: the float32 norm used to overflow (norm inf, embedding zeros)."""
    faces, threshold = mixed_shard
    df, prov = _run(faces, tmp_path, threshold, 1e20, "big")
    ref, _ = _run(faces, tmp_path, threshold, 1.0, "ref")
    rows = list(MIXED)
    assert (df.loc[rows, "status"] == "ok").all() and prov["n_unusable_features"] == 0
    bright = ["bright1.jpg", "bright2.jpg"]
    np.testing.assert_allclose(df.loc[bright, "norm"], ref.loc[bright, "norm"] * 1e20,
                               rtol=1e-5)
    np.testing.assert_allclose(np.stack(df.loc[rows, "embedding"]),
                               np.stack(ref.loc[rows, "embedding"]), atol=1e-6)


def test_every_row_unusable_stops_the_job(mixed_shard, tmp_path):
    faces, _ = mixed_shard
    with pytest.raises(UnusableFeaturesError) as err:
        _run(faces, tmp_path, -10.0, float("inf"), "all")
    msg = str(err.value)
    assert "'blow'" in msg and "backend torchscript" in msg
    assert "all 4 faces that reached the model" in msg and "non-finite features (inf): 4" in msg
    assert "broken model or weight file" in msg and "overflow_all.pt" in msg
    assert not (tmp_path / "all" / "00000.parquet").exists()
    with pytest.raises(UnusableFeaturesError, match="overflowing under bf16 mixed precision; "
                       "set embed.amp: none"):
        _run(faces, tmp_path, -10.0, float("inf"), "all_bf16", amp="bf16")


def test_feature_problems_reasons():
    feats = np.array([[3, 4], [np.inf, 1], [np.nan, -np.inf], [0, 0], [3e38, 3e38],
                      [1e30, 1e30]], np.float32)
    norms, reasons = feature_problems(feats, "m", amp="fp16")
    hint = "; embed.amp is fp16: try embed.amp: none"
    assert norms[0] == 5 and np.isfinite(norms[5]) and reasons[0] == reasons[5] == ""
    assert reasons[1] == "non-finite features (inf) from model m" + hint
    assert reasons[2] == "non-finite features (nan and inf) from model m" + hint
    assert reasons[3] == "all-zero feature vector from model m" + hint
    assert reasons[4].startswith("feature norm beyond float32 from model m (norm 4.24e+38)")
