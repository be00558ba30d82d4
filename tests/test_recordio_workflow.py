"""Pre-aligned insightface-style data through the whole workflow (issue 12, done-when).

A RecordIO set of ~3,000 pre-aligned 112 px faces and a verification ``.bin`` are made from
the demo generator's faces (384 renders of 48 synthetic identities, centre-cropped to the
face, each written 8 times with a flip and a brightness change, JPEG as insightface packs
them; rendering 3,000 faces would cost more, and no detector run is needed). Then one Snakemake run with ``faces.detector: none``
takes both through embeddings (lbp), native attributes, CAST-style mining of three
benchmarks, the ``.bin`` protocol and evaluation.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import demo_test_config, run_snakemake
from PIL import Image

from facecast.datasets.insightface_bin import write_bin
from facecast.datasets.recordio import pack, write_recordio
from facecast.datasets.synthetic.generate import generate_dataset
from facecast.io.parquet_io import read_parquet, read_provenance

GAINS = (0.8, 0.93, 1.07, 1.2)


def _jpeg(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def _demo_crops(folder) -> pd.DataFrame:
    """Crops of the demo generator's faces: 48 identities x 8 images rendered at 160 px, the
    centred 100 px square (where the generator puts the face) resized to 112 px."""
    truth = generate_dataset(folder, seed=11, n_jobs=2, n_identities=48,
                             images_per_identity=8, image_size=160)
    rows = []
    for r in truth.itertuples():
        with Image.open(folder / r.path) as im:
            crop = im.convert("RGB").crop((30, 30, 130, 130)).resize(
                (112, 112), Image.Resampling.BILINEAR)
        rows.append((r.identity, np.asarray(crop)))
    return pd.DataFrame(rows, columns=["identity", "crop"])


@pytest.fixture(scope="module")
def insightface_run(tmp_path_factory):
    crops = _demo_crops(tmp_path_factory.mktemp("demo_faces"))
    data = tmp_path_factory.mktemp("insightface_data")
    ids = {name: i for i, name in enumerate(sorted(crops["identity"].unique()))}
    # RecordIO: header record 0, image records 1..n, identity records (insightface layout)
    images = []
    for row in crops.itertuples():
        arr = row.crop
        for flip in (False, True):
            for gain in GAINS:
                v = np.clip(arr.astype(np.float32) * gain, 0, 255).astype(np.uint8)
                images.append((ids[row.identity], _jpeg(v[:, ::-1] if flip else v)))
    images.sort(key=lambda t: t[0])  # insightface sets are grouped by identity
    n = len(images)
    labels = np.array([lab for lab, _ in images])
    records = [(0, pack([n + 1, n + 1 + len(ids)], b""))]
    records += [(k + 1, pack(float(lab), jpg, id=k + 1)) for k, (lab, jpg) in enumerate(images)]
    for j in range(len(ids)):
        where = np.flatnonzero(labels == j) + 1
        records.append((n + 1 + j, pack([where[0], where[-1] + 1], b"")))
    offsets = write_recordio(data / "train.rec", data / "train.idx", records)
    blob = bytearray((data / "train.rec").read_bytes())
    blob[offsets[5]:offsets[5] + 4] = b"\0\0\0\0"  # a corrupt record: a status row
    (data / "train.rec").write_bytes(bytes(blob))
    excluded = ["3", "7"]  # training identities (WebFace12M-style mask by identity)
    (data / "exclude.txt").write_text("\n".join(excluded) + "\n")
    # a verification .bin: 60 pairs of unflipped crops, genuine/impostor alternating
    rng = np.random.default_rng(0)
    by_id = {i: [k for k, (lab, _) in enumerate(images) if lab == i] for i in ids.values()}
    bins, issame = [], []
    for k in range(60):
        a = int(rng.integers(len(ids)))
        same = k % 2 == 0
        b = a if same else int((a + 1 + rng.integers(len(ids) - 1)) % len(ids))
        ia, ib = rng.choice(by_id[a]), rng.choice(by_id[b])
        bins += [images[ia][1], images[ib][1]]
        issame.append(same)
    write_bin(data / "lfw.bin", bins, issame, protocol=2)

    cfg = demo_test_config()
    cfg["datasets"] = {
        "webface": {"kind": "recordio", "rec": str(data / "train.rec"),
                    "idx": str(data / "train.idx"), "shard_size": 1600,
                    "exclude": str(data / "exclude.txt"), "exclude_by": "identity"},
        "lfwbin": {"kind": "insightface_bin", "path": str(data / "lfw.bin")},
    }
    cfg["faces"].update({"detector": "none", "aligned_as": "arcface112"})
    cfg["embed"]["models"] = {"lbp": {"backend": "lbp", "pca_dim": 32}}
    cfg["attributes"]["scorers"] = ["native"]
    cfg["attributes"]["trainer"] = {"enabled": False}
    cfg["correlations"]["methods"] = ["pearson"]
    cfg["benchmarks"] = {
        "random": {"filters": []},
        "dark": {"filters": [{"attribute": "luminance_mean", "mode": "rank", "low": 0.0,
                              "high": 0.3}]},
        "sharp": {"filters": [{"attribute": "sharpness_laplacian", "mode": "rank",
                               "low": 0.7, "high": 1.0}]},
    }
    cfg["mining"].update({"statuses": ["ok", "aligned_input"], "reference_model": "lbp"})
    cfg["evaluate"].update({"models": ["lbp"], "benchmarks": [],
                            "imports": {"lfwbin": {"format": "insightface_bin",
                                                   "path": str(data / "lfw.bin")}}})
    cfg["fairness"] = {"enabled": False}
    # stages about labels / demographics / covariates need label_* columns or the demo's
    # fair_pool protocol, which insightface data lacks: off; so is mitigation, whose bias
    # figures need fairness groups (with fairness off it wrote n/a for every method, 40
    # CPU-s of this run). Slice discovery, model comparisons and mitigation have their
    # tests on the session demo run.
    for section in ("audit", "features", "describe", "covariates", "quality", "demographics",
                    "identification", "slices", "compare", "mitigation"):
        if section in cfg:
            cfg[section] = {"enabled": False}
    work2 = tmp_path_factory.mktemp("insightface_run")
    run_snakemake(work2, cfg)
    return work2, n, excluded, ids


def test_recordio_runs_without_a_detector(insightface_run):
    work, n, excluded, _ = insightface_run
    r = work / "results/webface"
    manifest = read_parquet(r / "manifest.parquet")
    assert len(manifest) == n >= 3000
    assert manifest.loc[manifest["path"] == "train.rec#5", "status"].item() == "decode_error"
    assert set(manifest.loc[manifest["exclude"], "identity"]) == set(excluded)
    faces = pd.concat([read_parquet(p, columns=["image_id", "status"])
                       for p in sorted((r / "faces").glob("*.parquet"))])
    assert len(faces) == n and faces["status"].value_counts().to_dict() == {
        "aligned_input": n - 1, "decode_error": 1}
    assert read_provenance(next((r / "faces").glob("*.parquet")))["model"]["detector"] == "none"
    emb = pd.concat([read_parquet(p, columns=["image_id", "status"])
                     for p in sorted((r / "embed/lbp").glob("*.parquet"))])
    assert (emb["status"] == "ok").sum() == n - 1


def test_attributes_say_the_geometry_is_the_template(insightface_run):
    work, n, _, _ = insightface_run
    path = work / "results/webface/attributes.parquet"
    attrs = read_parquet(path)
    assert len(attrs) == n and (attrs["status"] == "aligned_input").sum() == n - 1
    ok = attrs["status"] == "aligned_input"
    assert attrs.loc[ok, "luminance_mean"].notna().all()
    assert np.allclose(attrs.loc[ok, "inter_eye_distance"], 35.24, atol=0.01)  # template
    meta = pq.read_schema(path).metadata
    desc = json.loads(meta[b"facecast.attribute_columns"])
    assert "alignment template" in desc["inter_eye_distance"]
    assert "alignment template" in desc["yaw"]


def test_mining_and_evaluation(insightface_run):
    work, _, excluded, _ = insightface_run
    r = work / "results/webface"
    manifest = read_parquet(r / "manifest.parquet", columns=["image_id", "identity"])
    ident = dict(zip(manifest["image_id"], manifest["identity"], strict=True))
    for bench in ("random", "dark", "sharp"):
        pairs = read_parquet(r / f"benchmarks/{bench}/pairs.parquet")
        assert len(pairs) > 0 and set(pairs["label"]) == {0, 1}
        used = set(pairs["image_a"].map(ident)) | set(pairs["image_b"].map(ident))
        assert not used & set(excluded), bench
        metrics = read_parquet(r / f"eval/lbp/{bench}/metrics.parquet")
        assert np.isfinite(metrics["accuracy"].item())
    assert (r / "eval/summary.md").is_file()


def test_bin_protocol_evaluated_with_insightface_folds(insightface_run):
    work, _, _, _ = insightface_run
    r = work / "results/lfwbin"
    proto = read_parquet(r / "protocols/lfwbin.parquet")
    assert len(proto) == 60 and proto["fold"].tolist() == [str(k // 6) for k in range(60)]
    metrics = read_parquet(r / "eval/lbp/lfwbin/metrics.parquet")
    assert metrics["n_folds"].item() == 10 and metrics["n_pairs"].item() == 60
    assert 0.5 < metrics["accuracy"].item() <= 1.0
    # the .bin protocol is not evaluated on the RecordIO dataset
    assert not (work / "results/webface/eval/lbp/lfwbin").exists()
