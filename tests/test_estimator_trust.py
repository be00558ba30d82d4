"""Estimator trust in the fairness report (issues 42.3, 47.5): a verification dataset
grouped by estimated gender names an attribute benchmark; its report states, per group,
the estimator's accuracy there and how many images each group would gain or lose (the
unit of the benchmark's per-image confusion).

The benchmark is synthetic with planted error rates (20 % of women read as men, 5 % of
men as women); the figures are recomputed here: accuracy and scipy's Wilson interval
from the benchmark rows, the true counts by solving the 2 x 2 system directly, gains and
losses by explicit sums.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from facecast.fairness.estimator_trust import (
    TRUST_COLUMNS,
    trust_table,
    write_estimator_trust,
)
from facecast.fairness.simulate import simulate
from facecast.fairness.stage import run_fairness
from facecast.io.parquet_io import read_parquet, write_parquet

GENDER = {"column": "age_gender_male", "bins": [0.5], "labels": ["female", "male"]}
CFG = {"protected": {"gender": GENDER}, "sync": "majority"}


def bench_table(n: int = 3000, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    male = (rng.random(n) < 0.4).astype(float)
    wrong = rng.random(n) < np.where(male == 1, 0.05, 0.20)
    est_male = np.where(wrong, 1 - male, male)
    status = np.where(rng.random(n) < 0.03, "no_face", "ok")
    return pd.DataFrame({"image_id": [f"b{i}" for i in range(n)], "status": status,
                         "label_male": male, "label_age_bin": "20-29",
                         "age_gender_male": np.where(status == "ok",
                                                     0.2 + 0.6 * est_male, np.nan)})


def people_table(n_female: int, n_male: int) -> pd.DataFrame:
    """Identities with two images each, their estimated gender agreeing."""
    ids = [f"p{i}" for i in range(n_female + n_male)]
    p = [0.1] * n_female + [0.9] * n_male
    return pd.DataFrame({"image_id": [f"{i}/{k}" for i in ids for k in (1, 2)],
                         "identity": [i for i in ids for _ in (1, 2)],
                         "age_gender_male": [v for v in p for _ in (1, 2)]})


def test_accuracy_and_gains_against_direct_computation():
    bench = bench_table()
    table = trust_table(people_table(70, 130), bench, CFG, "ff", min_n=30).set_index("group")
    ok = bench[bench["status"] == "ok"]
    est = np.where(ok["age_gender_male"] >= 0.5, "male", "female")
    true = np.where(ok["label_male"] >= 0.5, "male", "female")
    counts = pd.crosstab(true, est).loc[["female", "male"], ["female", "male"]].to_numpy()
    rate = counts / counts.sum(axis=1, keepdims=True)
    for i, g in enumerate(["female", "male"]):
        r = table.loc[g]
        assert r["bench_n"] == counts[i].sum()
        assert r["accuracy"] == pytest.approx(rate[i, i])
        ci = stats.binomtest(int(counts[i, i]), int(counts[i].sum())).proportion_ci(
            0.95, "wilson")
        assert (r["accuracy_lo"], r["accuracy_hi"]) == pytest.approx((ci.low, ci.high))
    m = np.array([140.0, 260.0])  # two images per identity: the unit is images
    assert table["people"].tolist() == [70, 130]
    assert table["images"].tolist() == [140, 260] and set(table["unit"]) == {"images"}
    n = np.linalg.solve(rate.T, m)  # positive here, so the NNLS solution is exact
    assert (n > 0).all()
    np.testing.assert_allclose(table["images_true"], n, rtol=1e-9)
    lose = [n[0] * rate[0, 1], n[1] * rate[1, 0]]
    gain = [n[1] * rate[1, 0], n[0] * rate[0, 1]]
    np.testing.assert_allclose(table["would_lose"], lose, rtol=1e-9)
    np.testing.assert_allclose(table["would_gain"], gain, rtol=1e-9)
    np.testing.assert_allclose(table["net"], m - n, atol=1e-9)
    # the planted asymmetry: women are read as men more often, so men gain people
    assert table.loc["male", "net"] > 0 > table.loc["female", "net"]


def test_images_of_a_person_count_apart():
    """An identity whose images are read as different genders: the vote puts the person
    in one group, the images stay in their own (the unit of the confusion)."""
    attrs = people_table(40, 40)
    attrs.loc[attrs.index[1], "age_gender_male"] = 0.9  # p0's second image read as male
    table = trust_table(attrs, bench_table(), CFG, "ff", min_n=30).set_index("group")
    assert table.loc["female", "people"] == 40 and table.loc["male", "people"] == 40
    assert table.loc["female", "images"] == 79 and table.loc["male", "images"] == 81


def race_bench(n: int = 1200, seed: int = 2) -> pd.DataFrame:
    """FairFace-like benchmark (label_service_test, train / val splits) with a race
    classifier's class column: on val, 30 % of Black faces read as White."""
    rng = np.random.default_rng(seed)
    race = np.where(rng.random(n) < 0.5, "White", "Black").astype(object)
    split = np.where(np.arange(n) % 2 == 0, "train", "val")
    wrong = (split == "val") & (race == "Black") & (rng.random(n) < 0.3)
    return pd.DataFrame({"image_id": [f"r{i}" for i in range(n)], "status": "ok",
                         "split": split, "label_race": race, "label_service_test": 0.0,
                         "imp_race": np.where(wrong, "White", race),
                         "label_male": 1.0, "fairface_male": 1.0})


def test_value_map_race_checked_on_its_own_test_split():
    bench = race_bench()
    cfg = {"protected": {"race": {"column": "imp_race",
                                  "values": {"White": "white", "Black": "black"}}}}
    attrs = pd.DataFrame({"image_id": ["a1", "a2", "b1"], "identity": ["a", "a", "b"],
                          "imp_race": ["Black", "Black", "White"]})
    table = trust_table(attrs, bench, cfg, "ff", min_n=30, truths={"imp_race": "label_race"},
                        declared={"imp_race": {"fairface": ["train"]}}).set_index("group")
    val = bench[bench["split"] == "val"]
    black = val[val["label_race"] == "Black"]
    assert table.loc["black", "truth_column"] == "label_race"
    assert table.loc["black", "bench_n"] == len(black)
    assert table.loc["black", "bench_train_excluded"] == (
        (bench["split"] == "train") & (bench["label_race"] == "Black")).sum()
    assert table.loc["black", "accuracy"] == pytest.approx((black["imp_race"] == "Black").mean())
    assert table.loc["white", "accuracy"] == 1.0
    assert table.loc["black", "images"] == 2 and table.loc["black", "people"] == 1
    # undeclared: the training split counts (built-in TRAINED_ON knows no imp_race)
    pooled = trust_table(attrs, bench, cfg, "ff", min_n=30, truths={"imp_race": "label_race"})
    assert pooled["bench_train_excluded"].sum() == 0
    assert pooled["bench_n"].sum() == len(bench)
    # the fairface head on a FairFace benchmark: its train split is left out
    head = trust_table(people_table(3, 3).assign(fairface_male=1.0), bench,
                       {"protected": {"g": {"column": "fairface_male", "bins": [0.5],
                                            "labels": ["f", "m"]}}}, "ff", min_n=1)
    assert head["bench_n"].sum() == len(val)
    assert head["bench_train_excluded"].sum() == len(bench) - len(val)


def test_what_cannot_be_checked_says_why():
    bench = bench_table(400)
    cfg = {"protected": {
        "gender": GENDER,
        "sex": {"column": "label_male", "bins": [0.5], "labels": ["f", "m"]},
        "age": {"column": "age_gender_age", "bins": [35], "labels": ["young", "old"]},
        "mood": {"column": "smile", "bins": [0.5], "labels": ["no", "yes"]}}}
    attrs = people_table(3, 3).assign(label_male=1.0, age_gender_age=40.0, smile=0.2)
    bench = bench.assign(age_gender_age=30.0)
    table = trust_table(attrs, bench, cfg, "ff", min_n=30).set_index("attribute")
    assert "label column label_male, not an estimate" in table.loc["sex", "note"]
    assert table.loc["age", "note"].startswith("n/a (dataset ff has no label_age")
    assert "not an estimate facecast knows a truth label for" in table.loc["mood", "note"]
    assert table.loc[["sex", "age", "mood"], "accuracy"].isna().all()
    small = trust_table(people_table(3, 3), bench.iloc[:40], CFG, "ff", min_n=30)
    assert small["would_gain"].isna().all()
    assert small["note"].str.contains(r"gain/loss: n/a \(true groups with < 30 ff faces").all()
    assert list(small.columns) == TRUST_COLUMNS


@pytest.fixture(scope="module")
def fairness_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("trust")
    attrs, pairs = simulate(30, 4, seed=3)
    rng = np.random.default_rng(0)
    attrs["age_gender_male"] = np.clip(attrs["label_male"] + rng.normal(0, 0.3, len(attrs)),
                                       0, 1)
    write_parquet(attrs, root / "attributes.parquet")
    write_parquet(pairs, root / "scores.parquet")
    write_parquet(bench_table(), root / "bench.parquet")
    cfg = {"protected": {"gender": GENDER}, "legitimate": {}, "min_pairs": 5,
           "n_boot": 5, "hard_pairs": 2, "estimator_report": "ff",
           "thresholds": {"fmr_targets": [1e-2], "fixed": [], "from_protocol": ""}}
    run_fairness(root / "scores.parquet", root / "attributes.parquet", root / "with", cfg,
                 model="m", protocol="p", seed=1, estimator_attributes=root / "bench.parquet",
                 estimators_cfg={"min_n": 30})
    return root, attrs, pairs, cfg


def test_fairness_report_states_the_estimator_accuracy(fairness_run):
    root, attrs, pairs, cfg = fairness_run
    written = read_parquet(root / "with" / "estimator_trust.parquet")
    ids = set(pairs["identity_a"]) | set(pairs["identity_b"])
    expected = trust_table(attrs[attrs["identity"].isin(ids)], bench_table(), cfg, "ff")
    pd.testing.assert_frame_equal(written.reset_index(drop=True), expected,
                                  check_dtype=False)
    report = (root / "with" / "report.md").read_text()
    assert "## How far the grouping can be trusted (estimators checked on ff)" in report
    assert "How far the grouping" in (root / "with" / "report.html").read_text()



def test_without_an_estimator_report_the_table_is_empty(fairness_run, tmp_path):
    root, attrs, _, cfg = fairness_run
    report = (root / "with" / "report.md").read_text()
    head = report[:report.index("## How far the grouping")]
    (tmp_path / "report.md").write_text(head)
    write_estimator_trust(tmp_path, attrs, None, {**cfg, "estimator_report": ""}, {})
    assert read_parquet(tmp_path / "estimator_trust.parquet").empty
    assert (tmp_path / "report.md").read_text() == head
