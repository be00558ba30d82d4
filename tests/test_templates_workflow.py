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


def test_ijb_analysis_over_templates(tmp_path):
    """``analysis.level: template``: the release's templates get their images' attributes
    (template_attributes.parquet, every template with a status), and the correlation table
    and a CAST subset are computed over templates."""
    root = write_ijb(tmp_path / "IJB_C", empty_template=True)
    cfg = {"seed": 1,
           "datasets": {"ijbc": {"kind": "ijb", "root": str(root), "variant": "ijbc",
                                 "shard_size": 50}},
           "embed": {"models": {"lbp": {"backend": "lbp", "pca_dim": 8}}},
           "attributes": {"scorers": ["native"]},
           "fairness": {"enabled": False},
           "analysis": {"level": "template"},
           "correlations": {"methods": ["pearson"], "min_abs_r": 0.3},
           "benchmarks": {"sharp": {"filters": [{"attribute": "sharpness_laplacian",
                                                 "mode": "rank", "low": 0.5, "high": 1.0}]}}}
    work = tmp_path / "run"
    run_snakemake(work, cfg, ["results/ijbc/correlations/pearson_pairs_filtered.md",
                              "results/ijbc/benchmarks/sharp/subset.parquet"])
    r = work / "results" / "ijbc"
    t = read_parquet(r / "template_attributes.parquet")
    assert t["template_id"].tolist() == [*range(1, 11), 99]  # every template, in order
    assert t["status"].tolist() == ["ok"] * 10 + ["no_ok_image"]
    assert t["message"].iat[-1].endswith("missing=1") and (t["level"] == "template").all()
    assert t.loc[0, ["n_images", "n_voting"]].tolist() == [3, 2]  # 999.jpg is missing
    img = read_parquet(r / "attributes.parquet")
    first = img[img["image_id"].isin(["loose_crop/1.jpg", "loose_crop/2.jpg"])]
    assert t["sharpness_laplacian"].iat[0] == pytest.approx(
        first["sharpness_laplacian"].mean())
    pairs = read_parquet(r / "correlations/pearson_pairs.parquet")
    assert read_provenance(r / "correlations/pearson_pairs.parquet")["level"] == "template"
    assert (pairs["n"] <= 10).all() and (pairs["n"] == 10).any()  # over the ok templates
    assert not {"n_images", "n_voting"} & (set(pairs["attr_a"]) | set(pairs["attr_b"]))
    sub = read_parquet(r / "benchmarks/sharp/subset.parquet")
    assert list(sub.columns)[:4] == ["template_id", "identity", "split", "n_images"]
    assert len(sub) == 5 and 99 not in set(sub["template_id"])
    assert read_provenance(r / "benchmarks/sharp/subset.parquet")["level"] == "template"
    assert (r / "benchmarks/sharp/description.txt").read_text().startswith(
        "attribute: sharpness_laplacian lower_quartile: 0.5")
