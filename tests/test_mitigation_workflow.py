"""Stage mitigation on the session demo run (issue 35): both models' tables, the split by
identity with a status for every input pair, and a mitigated model (``dlib+fsn``) read by
``compare`` and wired into ``slices``/``compare`` on the DAG side."""

from __future__ import annotations

import json
import re

import numpy as np
import pandas as pd
import pytest
from conftest import copy_workdir, run_snakemake

from facecast.compare.stage import compare_files
from facecast.io.parquet_io import read_parquet
from facecast.mitigation.split import STATUS
from facecast.mitigation.targets import methods


def test_mitigation_tables_on_the_demo(demo_run, tmp_path):
    work, cfg = demo_run
    for model in ("lbp", "dlib"):
        out = work / "results/demo/mitigation" / model / "fair_pool"
        table = read_parquet(out / "table.parquet")
        assert list(table["method"]) == methods(cfg)
        assert "fusion_lr" in set(table["method"]) and "oracle_cal" in set(table["method"])
        assert np.isfinite(table["accuracy"]).all() and np.isfinite(table["bias_pos"]).all()
        split = read_parquet(out / "split.parquet")
        scores = read_parquet(work / "results/demo/eval" / model / "fair_pool.parquet")
        assert len(split) == len(scores) and set(split["status"]) <= set(STATUS)
        cal = set(read_parquet(out / "calibration.parquet")["identity"])
        ev = split[split["status"] == "evaluated"]
        assert cal and not cal & (set(ev["identity_a"]) | set(ev["identity_b"]))
        learned = json.loads((out / "learned.json").read_text())
        assert learned["split"]["evaluated_identities"] == table["n_identities"].iloc[0]
        md = (out / "table.md").read_text()
        assert "\n- `faircal`: Bias+ " in md and "| inf " not in md   # a ratio says why
    # compare reads a mitigated model like any other (the same evaluated pairs)
    mit = work / "results/demo/mitigation/dlib/fair_pool"
    diff = compare_files({"dlib": work / "results/demo/eval/dlib/fair_pool.parquet",
                          "dlib+fsn": mit / "fsn/pairs.parquet"}, tmp_path / "cmp",
                         {"n_boot": 20}, fars=[1e-3], accuracy={"thresholds": "exact"})
    assert int(diff["n_pairs"].iloc[0]) == len(read_parquet(mit / "fsn/pairs.parquet"))
    ours = pd.read_parquet(mit / "differences.parquet").set_index(["method", "metric"])
    auc = diff.set_index("metric").loc["auc"]
    sign = 1 if auc["model_a"] == "dlib+fsn" else -1
    assert sign * auc["difference"] == pytest.approx(ours.loc[("fsn", "auc"), "difference"],
                                                    abs=1e-12)


def test_slices_and_compare_take_a_mitigated_model_on_the_dag_side(demo_run, tmp_path):
    work, cfg = demo_run
    copy = copy_workdir(work, tmp_path / "copy")
    cfg = {**cfg, "slices": {**cfg["slices"], "models": ["dlib+fsn"]},
           "compare": {**cfg["compare"], "models": ["lbp", "dlib", "dlib+fsn"]}}
    mitigated = "results/demo/mitigation/dlib/fair_pool/fsn/pairs.parquet"
    plan = run_snakemake(copy, cfg, ["results/demo/slices/dlib+fsn/fair_pool/discovered.yaml",
                                     "results/demo/compare/leaderboard.md"],
                         extra=["-n"]).stdout
    jobs = dict(re.findall(r"^rule (\w+):\n((?:    .*\n?)+)", plan, flags=re.M))
    assert set(jobs) == {"slices", "compare"}, plan[-3000:]   # mitigation is done already
    for rule in ("slices", "compare"):
        assert mitigated in jobs[rule].split("output:")[0], jobs[rule]
