"""The analysis and evaluate rules through the Snakefile on the tiny synthetic demo."""

from __future__ import annotations

import hashlib
import json

import pandas as pd
import pytest
from conftest import copy_workdir, run_snakemake

from facecast.analysis.filtering import CAST_NO_OP_DESCRIPTION
from facecast.io.parquet_io import read_parquet


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pairs_lost(report: dict) -> int:
    """Genuine pairs of subset images without a reference embedding (none on the demo)."""
    assert report["n_without_embedding"] == 0
    return 0


@pytest.mark.slow
def test_benchmarks_mining_and_evaluation_on_the_demo(demo_run, tmp_path):
    work, cfg = demo_run
    res = work / "results/demo"

    assert (res / "benchmarks/blurry/description.txt").read_text() == \
        "attribute: label_blur lower_quartile: 0.7 upper_quartile: 1\n"
    assert (res / "benchmarks/random/description.txt").read_text() == CAST_NO_OP_DESCRIPTION
    for bench in cfg["evaluate"]["benchmarks"]:
        pairs = read_parquet(res / f"benchmarks/{bench}/pairs.parquet")
        report = json.loads((res / f"benchmarks/{bench}/mining_report.json").read_text())
        assert list(pairs.columns) == ["image_a", "image_b", "identity_a", "identity_b",
                                       "label", "fold", "ref_score"]
        if report["band"][0] is not None:
            lo, hi = report["band"]
            assert pairs.ref_score.between(lo - 1e-6, hi + 1e-6).all()
        assert ((pairs.identity_a == pairs.identity_b) == (pairs.label == 1)).all()
        assert report["genuine"]["selected"] == int((pairs.label == 1).sum())
        mining = {**cfg["mining"], **cfg["benchmarks"][bench].get("mining", {})}
        if mining.get("mode", "band") == "all":
            # the exhaustive protocol: every genuine pair of the subset, never a shortfall
            sub = read_parquet(res / f"benchmarks/{bench}/subset.parquet")
            sizes = sub.identity.value_counts()
            n_gen = int((sizes * (sizes - 1) // 2).sum()) - _pairs_lost(report)
            assert report["mode"] == "all" and report["shortfall"] is False
            assert report["genuine"]["selected"] == n_gen
            assert report["impostor"]["selected"] == min(
                mining["n_impostor"] or report["impostor"]["available"],
                report["impostor"]["available"])
        else:
            # a demo subset that cannot supply the folds reports the shortfall
            wanted = (mining["n_folds"] + int(mining["val_fold"])) * (
                mining["n_genuine"] + mining["n_impostor"])
            assert report["shortfall"] == (len(pairs) < wanted)
        scored = read_parquet(res / f"eval/lbp/{bench}.parquet")
        assert len(scored) == len(pairs) and "score" in scored
        lines = (res / f"benchmarks/{bench}/0.list").read_text().splitlines()
        assert len(lines) == int((pairs.fold == "0").sum())
    summary = read_parquet(res / "eval/summary.parquet")
    assert set(summary.benchmark) == set(cfg["evaluate"]["benchmarks"])
    # the planted hard benchmark (low-contrast, poorly captured faces) is harder than random
    # for the pretrained model: lower AUC and lower 10-fold accuracy on its mined pairs
    dlib = summary[summary.model == "dlib"].set_index("benchmark")
    for metric in ("auc", "accuracy"):
        assert dlib.loc["low_contrast", metric] < dlib.loc["random", metric] - 0.05, dlib
    assert "| lbp |" in (res / "eval/summary.md").read_text()
    corr = read_parquet(res / "correlations/pearson_pairs.parquet")
    hit = corr[(corr.attr_a.isin(["label_illumination", "label_noise"]))
               & (corr.attr_b.isin(["label_illumination", "label_noise"]))]
    assert len(hit) == 1 and hit.r.iloc[0] < -0.5          # planted: low light -> more noise

    # same config -> byte-identical pairs when mining reruns (in a copy of the run)
    before = _sha(res / "benchmarks/random/pairs.parquet")
    copy = copy_workdir(work, tmp_path / "copy")
    # the output is removed (this used to pass `--forcerun mine_pairs` before the target,
    # which that option's list swallowed: the default target reran every benchmark)
    (copy / "results/demo/benchmarks/random/pairs.parquet").unlink()
    run_snakemake(copy, cfg, ["results/demo/benchmarks/random/pairs.parquet"])
    assert _sha(copy / "results/demo/benchmarks/random/pairs.parquet") == before
    tsv = pd.read_csv(res / "correlations/pearson_pairs.tsv", sep="\t")
    assert len(tsv) == len(corr) and list(tsv.columns) == ["attr_a", "attr_b", "r", "n"]
