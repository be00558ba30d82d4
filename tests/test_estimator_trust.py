"""Estimator trust in the fairness report (issue 42.3): a verification dataset grouped by
estimated gender names an attribute benchmark; its report states, per group, the
estimator's accuracy there and how many people each group would gain or lose.

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
    m = np.array([70.0, 130.0])
    assert table["people"].tolist() == [70, 130]
    n = np.linalg.solve(rate.T, m)  # positive here, so the NNLS solution is exact
    assert (n > 0).all()
    np.testing.assert_allclose(table["people_true"], n, rtol=1e-9)
    lose = [n[0] * rate[0, 1], n[1] * rate[1, 0]]
    gain = [n[1] * rate[1, 0], n[0] * rate[0, 1]]
    np.testing.assert_allclose(table["would_lose"], lose, rtol=1e-9)
    np.testing.assert_allclose(table["would_gain"], gain, rtol=1e-9)
    np.testing.assert_allclose(table["net"], m - n, atol=1e-9)
    # the planted asymmetry: women are read as men more often, so men gain people
    assert table.loc["male", "net"] > 0 > table.loc["female", "net"]


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
