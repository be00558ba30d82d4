"""Stages audit / features / describe in the shared demo run (issue 14).

The demo plants annotation noise in ``label_noisy_*`` (flips, group-only flips of
hair_long in dark-skinned images, exact bald + long-hair contradictions, one identity's
male label flipped in every image); the audit must find it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from facecast.io.parquet_io import read_parquet, read_provenance


def test_audit_recovers_the_planted_noise(demo_run):
    work, cfg = demo_run
    res = work / "results" / "demo"
    attrs = read_parquet(res / "attributes.parquet")
    audit = res / "audit"
    # contradiction rates are exact
    both = ((attrs["label_noisy_bald"] == 1) & (attrs["label_noisy_hair_long"] == 1)).mean()
    rules = pd.read_csv(audit / "rules.csv").set_index("rule")
    assert rules.loc["bald_vs_long_hair", "rate"] == np.float64(round(both, 6))
    planted = read_provenance(res / "dataset" / "truth.parquet")["label_noise"]["planted"]
    assert planted["planted_contradictions"] > 0
    # Fleiss kappa of the balanced invariant attribute follows the flip rate (small demo:
    # 64 identities, so a looser bound than the unit test's 0.03)
    rec = pd.read_csv(audit / "recovery.csv").set_index("attribute")
    assert abs(rec.loc["male", "fleiss_kappa"] - rec.loc["male", "expected_kappa"]) < 0.12
    # flipped labels of invariant attributes rank above clean ones
    for a in ("male", "beard", "hair_long"):
        assert rec.loc[a, "suspect_auroc"] > 0.8, a
    # the group-only noise (hair_long, dark skin) shows as a gap
    skew = pd.read_csv(audit / "group_skew.csv")
    hl = skew[(skew["grouping"] == "skin") & (skew["attribute"] == "hair_long")]
    hl = hl.set_index("group")["disagree_identity"]
    assert hl["dark"] > hl["light"]
    s = read_parquet(audit / "suspects.parquet")
    assert set(s.columns) >= {"image_id", "attribute", "label", "score", "reasons", "rank"}
    assert (audit / "suspects_grid.png").stat().st_size > 1000


def test_features_and_descriptions(demo_run):
    work, _ = demo_run
    res = work / "results" / "demo"
    manifest = read_parquet(res / "manifest.parquet")
    img = read_parquet(res / "features" / "images.parquet")
    assert set(img["image_id"]) == set(manifest["image_id"].astype(str))  # every row kept
    assert (img["status"] == "ok").mean() > 0.5
    rel = pd.read_csv(res / "features" / "reliability.csv")
    assert rel["icc"].notna().all()
    desc = read_parquet(res / "describe" / "descriptions.parquet")
    assert set(desc["level"]) == {"image", "identity"}
    ev = pd.read_csv(res / "describe" / "evaluation.csv").set_index(["variant", "metric"])
    v = ev["value"]
    assert v[("main", "round_trip_exact")] == 1.0 and v[("oracle", "round_trip_exact")] == 1.0
    assert v[("oracle", "verification_auc")] > v[("oracle", "verification_auc_gender_only")]
    assert ev.loc[("oracle", "retrieval_top1"), "status"].startswith("gallery 64")
