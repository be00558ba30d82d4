"""The EDC, demographics and identification stages in the shared demo run (`demo_run`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

BLUR_TRACKING = ("sharpness_laplacian", "blur_effect")


def test_edc_outputs_and_blur_measures_beat_the_random_control(demo_run):
    work, cfg = demo_run
    for model in cfg["evaluate"]["models"]:
        out = work / "results/demo/quality" / model / "fair_pool"
        for name in ("edc.parquet", "ranking.parquet", "ranking.csv", "ranking.html",
                     "bands.parquet", "threshold.parquet", "edc_fnm.png", "edc_fm.png"):
            assert (out / name).stat().st_size > 0, name
        rk = pd.read_parquet(out / "ranking.parquet")
        assert {"random_control", *BLUR_TRACKING} <= set(rk["column"])
        fnm = rk[(rk["error_type"] == "fnm") & (rk["group"] == "all")].set_index("column")
        assert fnm["rankable"].all() and fnm["pauc"].notna().all()
        assert fnm["pauc_lo"].le(fnm["pauc_hi"]).all()
        assert min(fnm.loc[c, "rank"] for c in BLUR_TRACKING) < fnm.loc["random_control",
                                                                       "rank"], model
        edc = pd.read_parquet(out / "edc.parquet")
        last = edc.groupby(["column", "error_type", "group"]).tail(1)
        assert (last["discard"] == 1.0).all() and (last["error"] == 0.0).all()
        assert "random_control" in (out / "ranking.html").read_text()


def test_demographics_outputs(demo_run):
    work, cfg = demo_run
    out = work / "results/demo/demographics/lbp/fair_pool"
    cross = pd.read_parquet(out / "cross_fmr.parquet")
    assert {"group", "gender", "skin"} <= set(cross["attribute"])
    g = cross[(cross["attribute"] == "group")].set_index(
        ["threshold_name", "value_i", "value_j"])
    for (t, i, j), row in g.iterrows():
        assert g.loc[(t, j, i), "n_impostor"] == row["n_impostor"]
    gt = pd.read_parquet(out / "group_thresholds.parquet")
    assert len(gt) == 4 * len(cfg["fairness"]["thresholds"]["fmr_targets"])
    na = gt[~gt["resolvable"]]
    assert na["text"].str.startswith("n/a (").all()
    roc = pd.read_parquet(out / "roc_bands.parquet")
    ok = roc["resolvable"] & roc["tar_lo"].notna()
    assert (roc.loc[ok, "tar_lo"] <= roc.loc[ok, "tar_hi"]).all()
    for name in ("cross_fmr.png", "group_thresholds.png", "roc_bands.png", "rate_bands.png",
                 "tables.html"):
        assert (out / name).stat().st_size > 0


def test_identification_outputs(demo_run):
    from facecast.identification.targets import identification_pool

    work, cfg = demo_run
    out = work / "results/demo/identification/dlib"
    proto = pd.read_parquet(out / "protocol.parquet")
    bench = identification_pool(cfg)
    pool = pd.read_parquet(work / f"results/demo/benchmarks/{bench}/subset.parquet")
    assert set(proto["image_id"]) == set(pool["image_id"].astype(str))  # nothing lost
    cmc = pd.read_parquet(out / "cmc.parquet")
    allc = cmc[cmc["group"] == "all"].sort_values("rank")
    assert np.all(np.diff(allc["identification_rate"]) >= 0)
    assert allc["identification_rate"].iloc[0] > 0.05  # dlib finds people
    fnir = pd.read_parquet(out / "fnir.parquet")
    assert set(fnir["group"]) >= {"all"} and (fnir["fpir"] <= fnir["target_fpir"] + 1e-12)[
        fnir["group"] == "all"].all()
