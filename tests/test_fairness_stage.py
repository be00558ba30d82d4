"""The fairness stage end to end on simulated scores with a planted bias."""

import numpy as np
import pandas as pd
import pytest

from facecast.fairness.simulate import simulate
from facecast.fairness.soft import category_probs, soft_accuracy
from facecast.fairness.stage import OUTPUT_FILES, import_scores, run_fairness, run_leaderboard
from facecast.fairness.tables import leaderboard, most_discriminated_across_models
from facecast.io.parquet_io import read_parquet, read_provenance, write_parquet

CFG = {
    "protected": {
        "gender": {"column": "label_male", "bins": [0.5], "labels": ["female", "male"]},
        "skin": {"column": "label_skin_tone", "bins": [0.5], "labels": ["light", "dark"]}},
    "legitimate": {
        "age": {"column": "label_age", "bins": [35, 65], "labels": ["A0", "A1", "A2"]},
        "glasses": {"column": "label_glasses", "bins": [0.5], "labels": ["G0", "G1"]},
        "pose": {"column": "label_yaw", "abs": True, "bins": [15], "labels": ["P0", "P1"]}},
    "soft_attributes": {"gender": {"categories": {"male": "label_male",
                                                  "female": "1-label_male"}}},
    "min_pairs": 5, "min_groups": 2, "n_boot": 10, "hard_pairs": 4,
    "thresholds": {"fmr_targets": [1e-2, 1e-3], "fixed": [], "from_protocol": ""},
}


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    root = tmp_path_factory.mktemp("fair")
    attrs, pairs = simulate(100, 6, seed=11)
    pairs.loc[3, "score"] = np.nan  # a failed embedding upstream
    write_parquet(attrs, root / "attributes.parquet")
    write_parquet(pairs, root / "biased.parquet")
    _, fair = simulate(100, 6, effect=0.0, seed=11)
    write_parquet(fair, root / "fair.parquet")
    for model in ("biased", "fair"):
        run_fairness(root / f"{model}.parquet", root / "attributes.parquet",
                     root / model / "p", CFG, model=model, protocol="p", seed=1,
                     provenance={"config_hash": "x"})
    return root, attrs, pairs


def test_all_outputs_and_every_pair_kept(sim):
    root, _, pairs = sim
    for name in OUTPUT_FILES:
        assert (root / "biased" / "p" / name).is_file(), name
    ann = read_parquet(root / "biased" / "p" / "pairs.parquet")
    assert len(ann) == len(pairs)
    assert ann["image_a"].tolist() == pairs["image_a"].tolist()
    # the failed embedding is a pair without a feature: under evaluate.failed's default
    # (nonmatch) it counts, at score -inf, and is no bad score
    assert ann.loc[3, "failed"] and ann.loc[3, "score"] == -np.inf
    assert ann.loc[3, "status"] not in ("bad_score", "no_feature") and ann.loc[3, "in_reference"]
    assert ann["failed"].sum() == 1
    assert read_provenance(root / "biased" / "p" / "summary.parquet")["model"] == "biased"
    report = (root / "biased" / "p" / "report.md").read_text()
    assert "Table A7" in report and "female_dark" in report
    # at FMR 1e-2 three groups have no false match: the ratios are inf in the file and
    # n/a naming those groups in the report
    thr = read_parquet(root / "biased" / "p" / "thresholds.parquet").set_index("name")
    assert thr.loc["fmr=0.01", "fmr_max_min"] == np.inf
    assert "n/a (0 false matches in female_dark, female_light, male_dark)" in report
    assert "| inf" not in report and "inf |" not in report


def test_planted_group_is_most_discriminated_for_positive_pairs(sim):
    root, _, _ = sim
    g = read_parquet(root / "biased" / "p" / "groups.parquet").set_index("group")
    assert g["mean_d_pos"].idxmax() == "female_dark"
    assert g["n_most_discriminated_pos"].idxmax() == "female_dark"
    s = read_parquet(root / "biased" / "p" / "summary.parquet").iloc[0]
    f = read_parquet(root / "fair" / "p" / "summary.parquet").iloc[0]
    assert s["bias_pos"] > 3 * f["bias_pos"]
    r = read_parquet(root / "biased" / "p" / "rates.parquet")
    r = r[r["threshold_name"] == "fmr=0.01"].set_index("group")
    assert r["fnmr"].idxmax() == "female_dark"
    t = read_parquet(root / "biased" / "p" / "thresholds.parquet").iloc[0]
    tf = read_parquet(root / "fair" / "p" / "thresholds.parquet").iloc[0]
    assert t["fdr"] < tf["fdr"] and t["garbe"] > tf["garbe"]


def test_leaderboard_and_most_discriminated(sim, tmp_path):
    root, _, _ = sim
    board = run_leaderboard([root / m / "p" / "summary.parquet" for m in ("biased", "fair")],
                            [root / m / "p" / "groups.parquet" for m in ("biased", "fair")],
                            tmp_path, "p")
    assert board["model"].iloc[0] == "fair"
    a8 = read_parquet(tmp_path / "most_discriminated.parquet")
    pos = a8[a8["sign"] == "+"].set_index("group")["n_models_most_discriminated"]
    assert pos["female_dark"] >= 1
    assert (tmp_path / "leaderboard.md").read_text().startswith("# Fairness leaderboard")


def test_leaderboard_ranks_hand_example():
    s = pd.DataFrame({"model": ["a", "b", "c"], "bias_pos": [0.1, 0.2, 0.3],
                      "bias_neg": [0.3, 0.2, 0.1], "accuracy": [0.9, 0.95, 0.8]})
    b = leaderboard(s).set_index("model")
    assert b.loc["a", "mean_rank"] == pytest.approx((1 + 3 + 2) / 3)
    assert b.loc["b", "mean_rank"] == pytest.approx((2 + 2 + 1) / 3)
    assert b.loc["c", "mean_rank"] == pytest.approx((3 + 1 + 3) / 3)
    assert list(leaderboard(s)["model"]) == ["b", "a", "c"]
    g = pd.DataFrame({"model": ["a", "a", "b", "b"], "sign": "+", "group": ["x", "y"] * 2,
                      "mean_d": [0.2, 0.1, 0.0, 0.0]})
    m = most_discriminated_across_models(g).set_index("group")["n_models_most_discriminated"]
    assert m["x"] == 2 and m["y"] == 1  # tie in model b counts for both


def test_soft_accuracy_hand_example():
    attrs = pd.DataFrame({"image_id": ["a", "b", "c"], "p": [0.9, 0.2, np.nan]})
    probs = category_probs(attrs, {"m": "p", "f": "1-p"})
    pairs = pd.DataFrame({"image_a": ["a", "a", "b"], "image_b": ["b", "a", "c"],
                          "label": [0, 1, 0], "score": [0.1, 0.9, 0.8]})
    t = soft_accuracy(pairs, probs, [0.5], ["t"], attribute="g").set_index("category")
    # correct: [yes, yes, no]; P_m = [0.18, 0.81, 0]; P_f = [0.08, 0.01, 0]
    assert t.loc["m", "prob_accuracy"] == pytest.approx(1.0)
    assert t.loc["m", "prob_mass"] == pytest.approx(0.99)
    assert t.loc["m", "hard_n"] == 1 and t.loc["f", "hard_n"] == 0
    mean = soft_accuracy(pairs, probs, [0.5], ["t"], attribute="g", pair_prob="mean")
    assert mean.set_index("category").loc["m", "prob_mass"] == pytest.approx(0.55 + 0.9)


def test_import_round_trip_through_stage(sim, tmp_path):
    root, _, pairs = sim
    ok = pairs.dropna(subset=["score"])
    from facecast.fairness.interchange import write_interchange

    write_interchange(ok, tmp_path / "pred.csv", tmp_path / "truth.csv")
    scored = import_scores(tmp_path / "pred.csv", tmp_path / "truth.csv",
                           root / "attributes.parquet", tmp_path / "imported.parquet")
    assert scored["identity_a"].tolist() == ok["identity_a"].tolist()
    np.testing.assert_array_equal(scored["score"], ok["score"])


def test_missing_attribute_column_is_a_clear_error(sim, tmp_path):
    root, _, _ = sim
    cfg = {**CFG, "protected": {"g": {"column": "fairface_black", "bins": [0.5]}}}
    with pytest.raises(KeyError, match="fairface_black"):
        run_fairness(root / "biased.parquet", root / "attributes.parquet", tmp_path, cfg,
                     model="m", protocol="p", seed=1)


def test_thresholds_reused_from_a_dev_run(sim, tmp_path):
    root, _, _ = sim
    dev = read_parquet(root / "fair" / "p" / "thresholds.parquet")
    run_fairness(root / "biased.parquet", root / "attributes.parquet", tmp_path, CFG,
                 model="biased", protocol="test", seed=1,
                 reuse_thresholds=root / "fair" / "p" / "thresholds.parquet")
    got = read_parquet(tmp_path / "thresholds.parquet")
    np.testing.assert_array_equal(got["threshold"], dev["threshold"])
    assert got["source"].str.startswith("reused").all()
    unc = read_parquet(tmp_path / "uncertainty.parquet").set_index("metric")
    assert unc.loc[f"threshold@t={dev['threshold'].iloc[0]:g}", "se"] == 0.0
