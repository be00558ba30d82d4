"""The fairness rules on the synthetic demo, end to end through the Snakefile.

One pipeline run (synthetic faces -> MTCNN -> lbp + dlib -> attributes -> an unfiltered pair
protocol -> evaluation -> fairness), then a second run that imports the same scores in the
challenge CSV format as another system. The demo plants lower contrast for one protected
group (dark-skinned women, ``label_low_contrast_group``); the fairness stage must find it
the most discriminated group for positive pairs.
"""

import pandas as pd
import pytest
from conftest import copy_workdir, run_snakemake

from facecast.fairness.interchange import write_interchange
from facecast.io.parquet_io import read_parquet

pytestmark = pytest.mark.slow

PROTOCOL = "fair_pool"


@pytest.fixture(scope="module")
def demo(demo_run):
    work, cfg = demo_run
    return work, cfg, run_snakemake


def test_outputs_and_every_pair_kept(demo):
    work, _, _ = demo
    out = work / "results/demo/fairness/dlib" / PROTOCOL
    for name in ("report.md", "summary.parquet", "groups.parquet", "thresholds.parquet",
                 "hard_pairs.png", "rates_vs_threshold.png", "fdr_vs_fmr.png",
                 "predictions.csv"):
        assert (out / name).is_file(), name
    scored = read_parquet(work / "results/demo/eval/dlib" / f"{PROTOCOL}.parquet")
    pairs = read_parquet(out / "pairs.parquet")
    assert len(pairs) == len(scored)
    assert pairs["status"].notna().all()
    assert (work / "results/demo/logs/fairness" / f"dlib_{PROTOCOL}.log").is_file()


def test_planted_low_contrast_group_most_discriminated_for_positives(demo):
    """With the pretrained dlib embedder (the classical lbp baseline ties it with dark men)."""
    work, _, _ = demo
    out = work / "results/demo/fairness/dlib" / PROTOCOL
    truth = read_parquet(work / "results/demo/attributes.parquet",
                         columns=["identity", "label_low_contrast_group", "label_male",
                                  "label_skin_tone"])
    planted = truth[truth["label_low_contrast_group"] == 1]
    assert (planted["label_male"] == 0).all() and (planted["label_skin_tone"] >= 0.5).all()
    groups = read_parquet(out / "groups.parquet").set_index("group")
    assert groups["mean_d_pos"].idxmax() == "female_dark", groups.to_string()


def test_imported_scores_join_the_leaderboard(demo, tmp_path):
    work, cfg, runner = demo
    work = copy_workdir(work, tmp_path / "copy")
    scored = read_parquet(work / "results/demo/eval/lbp" / f"{PROTOCOL}.parquet")
    write_interchange(scored, tmp_path / "pred.csv", tmp_path / "truth.csv")
    cfg = {**cfg, "fairness": {**cfg["fairness"], "imports": {"ext": {
        "predictions": str(tmp_path / "pred.csv"), "pairs": str(tmp_path / "truth.csv"),
        "protocol": PROTOCOL}}}}
    runner(work, cfg, [f"results/demo/fairness/leaderboard/{PROTOCOL}/leaderboard.md"])
    board = read_parquet(work / "results/demo/fairness/leaderboard" / PROTOCOL /
                         "leaderboard.parquet")
    assert sorted(board["model"]) == sorted(["ext", *cfg["evaluate"]["models"]])
    lbp = board.set_index("model").loc["lbp"]
    ext = board.set_index("model").loc["ext"]
    # the same scores imported through the challenge format give the same metrics
    assert ext["accuracy"] == pytest.approx(lbp["accuracy"])
    assert ext["bias_pos"] == pytest.approx(lbp["bias_pos"], nan_ok=True)
    imported = read_parquet(work / "results/demo/fairness/imported/ext" / f"{PROTOCOL}.parquet")
    tested = scored[scored["eval_fold"] != ""].reset_index(drop=True)  # val pairs held out
    assert len(tested) < len(scored)
    pd.testing.assert_series_equal(imported["score"], tested["score"], check_names=False)
