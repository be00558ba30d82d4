"""Issue 50, item 1: no fairness figure from fewer than two groups, none at an unresolvable
threshold, and the leaderboard's whole FairFace 2020 rule (a baseline's accuracy to beat)."""

import numpy as np
import pandas as pd
import pytest

from facecast.fairness.applicable import group_note, summary_notes, usable_groups
from facecast.fairness.leaderboard import rank_models, rule_text
from facecast.fairness.simulate import simulate
from facecast.fairness.stage import run_fairness, run_leaderboard
from facecast.io.parquet_io import read_parquet, write_parquet

CFG = {
    "protected": {"gender": {"column": "label_male", "bins": [0.5],
                             "labels": ["female", "male"]}},
    "legitimate": {"pose": {"column": "label_yaw", "abs": True, "bins": [15],
                            "labels": ["P0", "P1"]}},
    "min_pairs": 5, "min_groups": 1, "n_boot": 20, "hard_pairs": 0,
    "thresholds": {"fmr_targets": [1e-2, 1e-4], "fixed": [], "from_protocol": ""},
}


@pytest.fixture(scope="module")
def one_group(tmp_path_factory):
    """Everyone estimated male: one group; a two-group run of the same scores beside it."""
    root = tmp_path_factory.mktemp("one")
    attrs, pairs = simulate(40, 5, seed=3)
    write_parquet(pairs, root / "scores.parquet")
    write_parquet(attrs, root / "two.parquet")
    write_parquet(attrs.assign(label_male=1.0), root / "one.parquet")
    for model in ("one", "two"):
        run_fairness(root / "scores.parquet", root / f"{model}.parquet", root / model / "p",
                     CFG, model=model, protocol="p", seed=1)
    return root


def test_one_group_reads_na_everywhere(one_group):
    s = read_parquet(one_group / "one" / "p" / "summary.parquet").iloc[0]
    assert s["fairness_note"] == "n/a (1 group: male)"
    for k in ("bias_pos", "bias_neg", "fdr@fmr=0.01", "garbe@fmr=0.01"):
        assert np.isnan(s[k]), k
    assert s["accuracy"] > 0.5  # the model's accuracy is still a number
    report = (one_group / "one" / "p" / "report.md").read_text()
    table = report.split("ChaLearn FairFace 2020 metric")[1].split("\n\n")[1]
    assert table.splitlines()[2].startswith("| n/a (1 group: male) | n/a (1 group: male) |")
    thr = report.split("## Global thresholds")[1].split("## Error rates")[0]
    row = next(x for x in thr.splitlines() if x.startswith("| fmr=0.01 |"))
    assert row.count("n/a (1 group: male)") == 7  # 4 ratios, FDR, GARBE, inequity rate
    boot = report.split("## Identity-clustered bootstrap")[1].split("## Probabilistic")[0]
    for m in ("bias_pos", "bias_neg", "fdr@fmr=0.01", "garbe@fmr=0.01"):
        line = next(x for x in boot.splitlines() if x.startswith(f"| {m} |"))
        assert line.count("n/a (1 group: male)") == 5, line
    a7 = report.split("(Table A7)")[1].split("## Per legitimate")[0]
    assert "| male | n/a (1 group: male) | n/a (1 group: male) |" in a7
    a9 = report.split("(A9-A14)")[1].split("## Global thresholds")[0]
    assert a9.count("n/a (1 group: male)") == 6 * 4  # 3 subsets x 2 signs, 4 columns
    two = read_parquet(one_group / "two" / "p" / "summary.parquet").iloc[0]
    assert two["fairness_note"] == "" and np.isfinite(two["bias_pos"])


def test_unresolvable_threshold_has_no_fdr_or_garbe(one_group):
    s = read_parquet(one_group / "two" / "p" / "summary.parquet").iloc[0]
    assert not s["resolvable@fmr=0.0001"]
    assert np.isnan(s["fdr@fmr=0.0001"]) and np.isnan(s["garbe@fmr=0.0001"])
    assert s["note@fmr=0.0001"] == f"n/a ({int(s['n_impostor'])} impostors)"
    assert s["note@fmr=0.01"] == "" and np.isfinite(s["fdr@fmr=0.01"])


def test_one_group_model_has_no_rank(one_group, tmp_path):
    board = run_leaderboard([one_group / m / "p" / "summary.parquet" for m in ("one", "two")],
                            [one_group / m / "p" / "groups.parquet" for m in ("one", "two")],
                            tmp_path, "p").set_index("model")
    assert board.loc["one", "status"] == "n/a (1 group: male)"
    assert pd.isna(board.loc["one", "place"]) and np.isnan(board.loc["one", "mean_rank"])
    assert board.loc["two", "place"] == 1 and board.loc["two", "mean_rank"] == 1.0
    md = (tmp_path / "leaderboard.md").read_text()
    assert "| no rank | one | n/a (1 group: male) |" in md
    assert "No baseline is set" in md


def test_usable_groups_and_note():
    valid = pd.DataFrame({"group": ["male", "male", None, "female"],
                          "status": ["ok", "ok", "mixed", "ok"],
                          "in_reference": [True, True, True, False]})
    assert usable_groups(valid) == {"male": 2}
    assert group_note({"male": 2}) == "n/a (1 group: male)"
    assert group_note({}) == "n/a (0 groups with pairs)"
    assert group_note({"female": 1, "male": 2}) == ""
    thr = pd.DataFrame({"name": ["fmr=0.001"], "resolvable": [False],
                        "threshold_n_impostor": [146]})
    s = summary_notes({"model": "m", "protocol": "p", "bias_pos": 0.0, "bias_neg": 0.0,
                       "accuracy": 0.9, "fdr@fmr=0.001": 1.0, "garbe@fmr=0.001": 0.0,
                       "tar@fmr=0.001": 0.5}, valid, thr)
    assert s["fairness_note"] == "n/a (1 group: male)" and s["note@fmr=0.001"] == \
        "n/a (146 impostors)"
    assert [np.isnan(s[k]) for k in ("bias_pos", "bias_neg", "fdr@fmr=0.001",
                                     "garbe@fmr=0.001", "accuracy", "tar@fmr=0.001")] == \
        [True, True, True, True, False, False]


def test_ranking_rule_with_a_baseline():
    s = pd.DataFrame({
        "model": ["lbp", "dlib", "arc", "const", "solo"],
        "bias_pos": [0.05, 0.10, 0.02, 0.0, np.nan],
        "bias_neg": [0.04, 0.03, 0.05, 0.0, np.nan],
        "accuracy": [0.72, 0.90, 0.99, 0.50, 0.95],
        "fairness_note": ["", "", "", "", "n/a (1 group: male)"]})
    b = rank_models(s, baseline="lbp")
    assert b["model"].tolist() == ["arc", "dlib", "lbp", "const", "solo"]
    by = b.set_index("model")
    # among arc and dlib only: arc ranks 1 on Bias+ and accuracy, 2 on Bias-
    assert by.loc["arc", "mean_rank"] == pytest.approx((1 + 2 + 1) / 3)
    assert by.loc["dlib", "mean_rank"] == pytest.approx((2 + 1 + 2) / 3)
    assert by["place"].tolist()[:2] == [1, 2] and by["place"].isna().tolist()[2:] == [True] * 3
    assert by.loc["lbp", "status"] == "baseline"
    # the constant-score model (Bias 0) would win without the bar
    assert by.loc["const", "status"] == ("not above the baseline (accuracy 0.5 <= lbp's "
                                         "0.72)")
    assert by.loc["solo", "status"] == "n/a (1 group: male)"
    free = rank_models(s).set_index("model")
    assert free.loc["const", "place"] == 1 and free.loc["lbp", "status"] == "ranked"
    with pytest.raises(ValueError, match="fairness.leaderboard.baseline: 'vgg'"):
        rank_models(s, baseline="vgg")
    assert "above the baseline's (lbp, fairness.leaderboard.baseline)" in rule_text("lbp")


def test_baseline_is_checked_before_any_job():
    from facecast.fairness.checks import name_errors

    cfg = {"embed": {"models": {"lbp": {"backend": "lbp"}}},
           "fairness": {"models": [], "leaderboard": {"baseline": "lpb"}}}
    errs = [e for e in name_errors(cfg) if "baseline" in e]
    assert errs == ["fairness.leaderboard.baseline: 'lpb' is not an assessed model; known: "
                    "lbp"]
