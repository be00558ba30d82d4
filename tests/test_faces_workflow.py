"""The faces rule through the Snakefile on the shared demo run."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq
import pytest

from facecast.datasets.manifest import read_shard_ids
from facecast.faces.crops import decode_png
from facecast.io.parquet_io import read_provenance

ALLOWED = {"ok", "no_face", "fallback", "decode_error", "missing", "unreadable",
           "outside_root", "duplicate", "no_identity", "detect_error", "align_error"}


@pytest.mark.slow
def test_faces_rule_on_the_demo(demo_run) -> None:
    tmp_path, config = demo_run
    demo = config["datasets"]["demo"]
    n_images = demo["synthetic"]["n_identities"] * demo["synthetic"]["images_per_identity"]
    shards = [f"{i:05d}" for i in range(-(-n_images // demo["shard_size"]))]
    assert len(shards) >= 2
    targets = [f"results/demo/faces/{s}.parquet" for s in shards]
    manifest_path = tmp_path / "results/demo/manifest.parquet"
    assert read_shard_ids(manifest_path) == shards

    manifest = pd.read_parquet(manifest_path)
    faces = pd.concat([pq.read_table(tmp_path / t).to_pandas() for t in targets])
    # one row per manifest row, same ids, same order within shards
    assert faces["image_id"].tolist() == manifest["image_id"].tolist()
    assert set(faces["status"]) <= ALLOWED
    ok = faces[faces["status"] == "ok"]
    # MTCNN finds the synthetic faces (about 97% of them on the default demo)
    assert len(ok) / len(faces) >= 0.85
    for blob in ok["crop_arcface"].head(5):
        assert decode_png(blob).shape == (112, 112, 3)
    for blob in ok["crop_facenet"].head(5):
        assert decode_png(blob).shape == (160, 160, 3)
    size = config["datasets"]["demo"]["synthetic"]["image_size"]
    assert (ok["image_width"] == size).all() and (ok["image_height"] == size).all()

    for s in shards:
        assert (tmp_path / f"results/demo/logs/faces/{s}.log").read_text().count("statuses") == 1
        assert (tmp_path / f"results/demo/runtime/faces/{s}.tsv").is_file()
    prov = read_provenance(tmp_path / targets[0])
    assert prov["stage"] == "faces" and prov["model"]["detector"] == "mtcnn"
    assert prov["seed"] == config["seed"]
