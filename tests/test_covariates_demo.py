"""The covariates stage on the session demo run: the planted blur effect is recovered.

(Its own file: the test-suite workers take whole files, and this one needs the shared
demo run while the rest of the covariates tests fit on synthetic data.)"""

from __future__ import annotations

import json

import numpy as np

from facecast.io.parquet_io import read_parquet


def test_demo_surface_recovers_blur_effect(demo_run):
    work, cfg = demo_run
    cov = cfg["covariates"]
    assert cov["enabled"] and "label_blur" in cov["covariates"]
    from facecast.covariates.targets import models, protocols

    out = work / "results" / "demo" / "covariates" / models(cfg)[0] / protocols(cfg)[0]
    fit = json.loads((out / "fit.json").read_text())
    assert fit["class_pairs"]["match"] >= 50
    surf = read_parquet(out / "surface.parquet")
    s = surf[(surf["surface"] == "along") & (surf["covariate"] == "label_blur")
             & (surf["metric"] == "tar") & (surf["fmr_target"] == cov["fmr_targets"][0])]
    s = s.sort_values("value_a")
    slope = np.polyfit(s["value_a"], s["mean"], 1)[0]
    assert slope < 0, s[["value_a", "mean"]]
    assert s["mean"].iloc[-1] < s["mean"].iloc[0]
