"""The slices and compare stages inside the shared demo run (rule all): findings on FNMR
and FMR, their benchmarks, the report."""

from __future__ import annotations

import json

import pandas as pd
import yaml

from facecast.analysis.filtering import parse_filters


def test_demo_run_writes_slices_and_comparisons(demo_run):
    from test_slices import assert_fdr_adjusted

    work, cfg = demo_run
    res = work / "results" / "demo"
    for model in ("lbp", "dlib"):
        out = res / "slices" / model / "fair_pool"
        table = pd.read_parquet(out / "slices.parquet")
        findings = pd.read_parquet(out / "findings.parquet")
        search = json.loads((out / "search.json").read_text())
        assert search["family"] >= len(table) > 0
        assert search["error_types"] == ["fnmr", "fmr"]
        assert set(table["error_type"]) == {"fnmr", "fmr"}
        assert search["threshold"]["policy"] == "eer"
        assert "label_low_contrast_group" not in search["columns"]
        # q: BH (or BY) over the whole family of both error types, untested members p = 1
        assert table["p"].between(0, 1).all()
        assert_fdr_adjusted(table["p"], table["q"], search["family"], search["fdr_method"])
        assert search["findings"] == len(findings)
        assert (findings["overlap_max"] < search["finding_overlap"]).all()
        disc = yaml.safe_load((out / "discovered.yaml").read_text())
        assert len(disc["benchmarks"] or {}) == len(findings)
        for name, bench in (disc["benchmarks"] or {}).items():
            parse_filters(bench["filters"], name)
        for name in ("report.html", "slices.png", "examples.png", "findings.csv"):
            assert (out / name).stat().st_size > 0
        assert (res / "runtime" / "slices" / f"{model}_fair_pool.tsv").exists()
    diff = pd.read_parquet(res / "compare" / "differences.parquet")
    assert set(diff["benchmark"]) == set(cfg["evaluate"]["benchmarks"])
    assert {"accuracy", "auc", "fnmr@fmr=0.001"} <= set(diff["metric"])
    board = pd.read_csv(res / "compare" / "leaderboard.csv")
    assert set(board["model"]) == {"lbp", "dlib"}
    assert (res / "compare" / "report.html").stat().st_size > 0
