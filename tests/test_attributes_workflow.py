"""The attributes stage through the Snakefile on the shared demo run."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from facecast.io.parquet_io import read_parquet


@pytest.mark.slow
def test_demo_attributes_table_shows_the_planted_effects(demo_run):
    tmp_path, cfg = demo_run
    out = tmp_path / "results" / "demo" / "attributes.parquet"
    manifest = read_parquet(tmp_path / "results" / "demo" / "manifest.parquet")
    pf = pq.ParquetFile(out)
    assert pf.metadata.num_row_groups == manifest["shard"].nunique()
    t = pf.read().to_pandas()
    assert t["image_id"].tolist() == manifest["image_id"].tolist()
    for col in ["sharpness_laplacian", "yaw", "inter_eye_distance", "age_gender_age",
                "age_gender_male", "glasses", "hat", "label_blur", "label_age", "label_glasses"]:
        assert col in t.columns, col
    assert {f"embed_norm_{m}" for m in cfg["embed"]["models"]} <= set(t.columns)
    ok = t[t["status"].isin(["ok", "fallback"])]
    assert len(ok) >= 0.8 * len(t)
    r_blur = np.corrcoef(ok["label_blur"], ok["sharpness_laplacian"])[0, 1]
    assert r_blur < -0.3, r_blur
    r = ok[["label_age", "label_glasses"]].corr().iloc[0, 1]
    assert r > 0, r
    assert (tmp_path / "results/demo/attribute_model/evaluation.md").read_text().count("|") > 8
