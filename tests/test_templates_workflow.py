"""IJB templates through Snakemake (issue 22): a tiny release in insightface's layout
(tests/ijb_support.py) -> manifest with given landmarks -> faces without a detector ->
lbp features -> templates, TAR table, 1:N, the all-models table, FMR per group of
templates (groups from the default age_gender scorer)."""

from __future__ import annotations

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import run_snakemake
from ijb_support import write_ijb

from facecast.io.parquet_io import read_parquet, read_provenance

pytestmark = pytest.mark.slow


def test_ijb_release_end_to_end(tmp_path):
    root = write_ijb(tmp_path / "IJB_C")
    cfg = {"seed": 1,  # the config a user writes: a dataset, a model, the FARs
           "datasets": {"ijbc": {"kind": "ijb", "root": str(root), "variant": "ijbc",
                                 "shard_size": 50}},
           "embed": {"models": {"lbp": {"backend": "lbp", "pca_dim": 8}}},
           "attributes": {"scorers": ["age_gender"]},  # the groups of fairness.protected
           "templates": {"fars": [0.01, 0.1]}}  # faces.detector stays mtcnn: landmarks win
    work = tmp_path / "run"
    run_snakemake(work, cfg, ["results/ijbc/templates/tar_at_far.csv",
                              "results/ijbc/templates/summary.html",
                              "results/ijbc/templates/lbp/group_rates.csv"])
    r = work / "results" / "ijbc"
    faces = pd.concat([read_parquet(p) for p in sorted((r / "faces").glob("*.parquet"))])
    assert sorted(faces["status"].unique()) == ["landmarks_given", "missing"]
    assert faces["det_score"].notna().sum() == 20  # the faceness score
    t = read_parquet(r / "templates/lbp/templates.parquet")
    assert len(t) == 10 and t.loc[t["template_id"] == 1, "n_dropped"].item() == 1
    assert (t["status"] == "ok").all() and t.loc[0, "n_images"] == 3
    pairs = read_parquet(r / "templates/lbp/pairs.parquet")
    assert len(pairs) == 45 and pairs["label"].sum() == 5 and pairs["score"].notna().all()
    tab = read_parquet(r / "templates/lbp/tar_at_far.parquet")
    assert tab["resolvable"].tolist() == [False, True]  # 40 impostors: 1e-2 is n/a
    assert tab["text"].iat[0] == "n/a (40 impostors)"
    prov = read_provenance(r / "templates/lbp/pairs.parquet")
    assert (prov["norm_score"], prov["detector_score"], prov["media_pooling"]) == (
        True, True, True)
    ident = read_parquet(r / "templates/lbp/identification.parquet")
    assert set(ident["gallery"]) == {"G1", "G2", "G1+G2"}
    assert ident.loc[ident["gallery"] == "G1", "n_mated"].iat[0] == 3
    html = (r / "templates/summary.html").read_text()
    assert "TAR@FAR=0.1" in html and "G1+G2" in html
    assert pq.read_schema(r / "templates/lbp/templates.parquet").field("embedding")
    # FMR per demographic group on templates (groups derived from the age_gender scorer)
    groups = read_parquet(r / "templates/lbp/groups.parquet")
    assert len(groups) == 10 and groups["group"].notna().all()
    rates = read_parquet(r / "templates/lbp/group_rates.parquet")
    assert set(rates["group"]) <= set(groups["group"]) and len(rates)
    ident_groups = set(read_parquet(r / "templates/lbp/identification.parquet")["group"])
    assert "all" in ident_groups and ident_groups - {"all"} <= set(groups["group"])
    assert len(ident_groups) > 1  # 1:N per probe group
