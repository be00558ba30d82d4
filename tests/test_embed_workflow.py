"""Integration: synthetic demo -> manifest -> faces (MTCNN) -> embed (lbp + dlib) via Snakemake."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facecast.datasets.manifest import read_shard_ids
from facecast.io.parquet_io import read_parquet, read_provenance

pytestmark = pytest.mark.slow


def test_demo_embeddings_lbp_and_dlib(demo_run):
    tmp_path, cfg = demo_run
    assert set(cfg["embed"]["models"]) == {"lbp", "dlib"}
    shards = read_shard_ids(tmp_path / "results/demo/manifest.parquet")

    res = tmp_path / "results" / "demo"
    manifest = read_parquet(res / "manifest.parquet")
    faces = pd.concat([read_parquet(res / "faces" / f"{s}.parquet") for s in shards])
    assert (res / "embed" / "lbp" / "fit.npz").is_file()
    for model, dim in (("lbp", None), ("dlib", 128)):
        parts = [read_parquet(res / "embed" / model / f"{s}.parquet") for s in shards]
        emb = pd.concat(parts, ignore_index=True)
        # every manifest row reaches the output, in order, once
        assert emb["image_id"].tolist() == manifest["image_id"].tolist()
        st = emb.merge(faces[["image_id", "status"]], on="image_id", suffixes=("", "_faces"))
        embeddable = st["status_faces"].isin(["ok", "fallback"])
        assert (st.loc[~embeddable, "status"] == st.loc[~embeddable, "status_faces"]).all()
        ok = emb["status"] == "ok"
        assert ok.sum() >= 0.8 * len(emb)
        vecs = np.stack(emb.loc[ok, "embedding"].to_numpy())
        if dim:
            assert vecs.shape[1] == dim
        np.testing.assert_allclose(np.linalg.norm(vecs, axis=1), 1, rtol=1e-5)
        prov = read_provenance(res / "embed" / model / f"{shards[0]}.parquet")
        assert prov["model"] == model and len(prov["weights_sha256"]) == 64
        assert prov["config_hash"] and (res / "logs" / "embed" / model / f"{shards[0]}.log").is_file()
        # genuine pairs score above impostor pairs on average
        ids = emb.loc[ok].merge(manifest[["image_id", "identity"]], on="image_id")["identity"]
        same = ids.to_numpy()[:, None] == ids.to_numpy()[None]
        sim = vecs @ vecs.T
        iu = np.triu_indices(len(vecs), 1)
        genuine, impostor = sim[iu][same[iu]], sim[iu][~same[iu]]
        assert genuine.mean() > impostor.mean(), model
        if model == "lbp":  # centred on the training mean: impostor scores near zero
            assert abs(impostor.mean()) < 0.1
