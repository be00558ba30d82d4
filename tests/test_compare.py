"""Model-vs-model comparisons (issues 25 and 32): clustered paired tests, no verdict
without a test, Holm across the table, ranks that do not chain, ``facecast compare``."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from facecast.cli import main as cli_main
from facecast.compare.inference import clustered_test
from facecast.compare.paired import _weighted_auc, align, compare_pair, fold_correct
from facecast.compare.stage import leaderboard, run_compare
from facecast.evaluate.metrics import auc_score, kfold_accuracy
from facecast.labels.estimators_stats import holm


def scored(n_ids: int = 60, per_id: int = 4, seed: int = 0, noise: float = 0.0,
           base_seed: int = 0) -> pd.DataFrame:
    """Genuine pairs of each identity + random impostors; ``noise`` blurs the scores."""
    rng = np.random.default_rng(base_seed)
    ia, ib = np.triu_indices(per_id, 1)
    gen = [(i * per_id + a, i * per_id + b) for i in range(n_ids) for a, b in zip(ia, ib, strict=True)]
    a = rng.integers(0, n_ids * per_id, 3000)
    b = rng.integers(0, n_ids * per_id, 3000)
    imp = [(x, y) for x, y in zip(a, b, strict=True) if x // per_id != y // per_id]
    pairs = np.array(gen + imp)
    label = np.r_[np.ones(len(gen), int), np.zeros(len(imp), int)]
    truth = np.where(label == 1, rng.normal(0.7, 0.1, len(label)),
                     rng.normal(0.2, 0.1, len(label)))
    s = truth + np.random.default_rng(seed).normal(0, noise, len(label)) if noise else truth
    return pd.DataFrame({"image_a": [f"i{x}" for x in pairs[:, 0]],
                         "image_b": [f"i{x}" for x in pairs[:, 1]],
                         "identity_a": (pairs[:, 0] // per_id).astype(str),
                         "identity_b": (pairs[:, 1] // per_id).astype(str),
                         "label": label, "score": s,
                         "fold": (np.arange(len(label)) % 10).astype(str)})


def holm_step_down(p: np.ndarray, level: float) -> np.ndarray:
    """Holm's (1979) procedure as the paper states it, independent of ``holm()``: order
    the m p-values; reject the j-th smallest while p_(j) <= level / (m - j + 1), stop at
    the first that is not."""
    order = np.argsort(p, kind="stable")
    reject = np.zeros(len(p), bool)
    for j, k in enumerate(order):
        if p[k] > level / (len(p) - j):
            break
        reject[k] = True
    return reject


def assert_is_holm(p: np.ndarray, adjusted: np.ndarray) -> None:
    """Holm-adjusted p-values are the smallest levels at which the step-down procedure
    rejects: at every level between two places where either side's rejections can change
    (the adjusted values; the levels (m - j + 1) p_(j) at which the procedure's can) the
    rows with ``adjusted <= level`` are exactly the procedure's rejections over ``p``."""
    p, adjusted = np.asarray(p, np.float64), np.asarray(adjusted, np.float64)
    ps = np.sort(p)
    cuts = np.unique(np.r_[adjusted, ps * (len(p) - np.arange(len(p)))])
    levels = np.r_[cuts[0] / 2, (cuts[:-1] + cuts[1:]) / 2]
    for level in levels[levels < 1]:
        np.testing.assert_array_equal(adjusted <= level, holm_step_down(p, level),
                                      err_msg=f"level {level}")


def test_holm_by_hand_and_nan_is_outside_the_family() -> None:
    assert np.allclose(holm(np.array([0.01, 0.04, 0.03])), [0.03, 0.06, 0.06])
    out = holm(np.array([0.01, np.nan, 0.04]))
    assert np.isnan(out[1]) and np.allclose(out[[0, 2]], [0.02, 0.04])


def test_holm_step_down_check_is_independent_and_can_fail() -> None:
    """The check above against hand-worked Holm values, and it rejects Holm applied to
    part of the family (per model pair instead of the whole table)."""
    p = np.array([0.01, 0.04, 0.03, 0.005])
    assert_is_holm(p, [0.03, 0.06, 0.06, 0.02])  # 4*0.005, max(3*0.01, .), 2*0.03, 0.04
    with pytest.raises(AssertionError):
        assert_is_holm(p, np.r_[holm(p[:2]), holm(p[2:])])


def test_fold_decisions_are_the_kfold_accuracy_decisions_at_exact_thresholds() -> None:
    """The bootstrap re-weights fold_correct's decisions: per fold their mean must be
    kfold_accuracy's accuracy of that fold, also where an exact threshold is a pair's own
    distance 2 - 2s (there s > 1 - t/2 and 2 - 2s < t disagree in floating point; scores
    on a 0.1 grid put such pairs in the other fold)."""
    rng = np.random.default_rng(0)
    cosine_form_differs = 0
    for _ in range(300):
        s = np.round(rng.uniform(-1, 1, 40), 1)
        y = np.r_[0, 1, rng.integers(0, 2, 38)]
        f = (np.arange(40) % 2).astype(str)
        acc = kfold_accuracy(s, y, f, "exact")
        correct = fold_correct(s, y, f, "exact")
        per_fold = np.array([correct[f == k].mean() for k in acc.folds])
        np.testing.assert_array_equal(per_fold, acc.accuracies)
        t = acc.thresholds[f.astype(int)]  # folds "0", "1"
        cosine_form_differs += int(((s > 1 - t / 2) != (2 - 2 * s < t)).any())
    assert cosine_form_differs >= 10  # the data reaches the case the rule is about


def test_weighted_auc_with_unit_weights_is_the_auc() -> None:
    df = scored(noise=0.2, seed=4)
    s, y = df["score"].to_numpy(), df["label"].to_numpy()
    assert np.isclose(_weighted_auc(s, y, np.ones((1, len(s))))[0], auc_score(s, y))


def test_no_test_without_identities_or_spread() -> None:
    reps = np.random.default_rng(0).normal(0.02, 0.01, 200)
    ok = clustered_test(0.02, reps, 40)
    assert ok["note"] == "" and ok["ci_lo"] < 0.02 < ok["ci_hi"] and 0 < ok["p"] < 0.1
    # the interval excludes 0 exactly when p < 1 - confidence
    assert (ok["ci_lo"] > 0) == (ok["p"] < 0.05)
    two = clustered_test(0.02, reps, 2)
    assert two["note"] == "n/a (2 identities)" and np.isnan(two["p"])
    flat = clustered_test(0.02, np.full(200, 0.02), 40)   # no spread: was p = 0
    assert flat["note"] == "n/a (no bootstrap spread)" and np.isnan(flat["p"])
    same = clustered_test(0.0, np.zeros(200), 40)          # identical: no evidence
    assert same["note"] == "" and same["p"] == 1.0


def test_unresolvable_far_has_no_verdict_and_resolvability_only_where_it_applies() -> None:
    good, bad = scored(), scored(noise=0.25, seed=1)
    n_imp = int((good["label"] == 0).sum())
    table, counts = compare_pair(align(good, bad), fars=[1e-2, 1e-4], fmr=1e-2, n_boot=50,
                                 seed=0)
    by = table.set_index("metric")
    assert counts["n_impostors"] == n_imp and counts["n_identities"] == 60
    assert by.loc["tar@far=0.0001", "note"] == f"n/a ({n_imp} impostors)"
    assert np.isnan(by.loc["tar@far=0.0001", ["p", "ci_lo", "ci_hi"]].astype(float)).all()
    assert by.loc["tar@far=0.01", "note"] == "" and by.loc["tar@far=0.01", "p"] < 0.05
    assert by["fmr_resolvable"].isna().tolist() == [True, True, False, False, False]
    assert by.loc["tar@far=0.0001", "fmr_resolvable"] == False  # noqa: E712 (pd.NA-aware)
    assert by.loc["fnmr@fmr=0.01", "fmr_resolvable"] == True  # noqa: E712


def test_better_model_is_named_identical_models_do_not_differ(tmp_path: Path) -> None:
    good, bad = scored(), scored(noise=0.25, seed=1)
    for name, frame in (("good", good), ("bad", bad), ("same", good.copy())):
        frame.to_parquet(tmp_path / f"{name}.parquet")
    scores = {"b1": {m: tmp_path / f"{m}.parquet" for m in ("good", "bad", "same")}}
    diff = run_compare(scores, tmp_path / "out", {"n_boot": 100, "fmr": 1e-2}, fars=[1e-2],
                       seed=0)
    # Holm across the whole table: 3 model pairs x 4 metrics
    tested = diff["p"].notna()
    assert tested.sum() == 12
    assert_is_holm(diff.loc[tested, "p"], diff.loc[tested, "p_adjusted"])
    bad_good = diff[(diff["model_a"] == "bad") & (diff["model_b"] == "good")].set_index("metric")
    # the better model is named, also where lower is better (FNMR: bad - good > 0)
    assert (bad_good["verdict"] == "good better").all()
    assert bad_good.loc["fnmr@fmr=0.01", "difference"] > 0
    assert bad_good.loc["accuracy", "ci_hi"] < 0
    same = diff[(diff["model_a"] == "good") & (diff["model_b"] == "same")]
    assert (same["verdict"] == "not significant").all() and (same["difference"] == 0).all()
    assert (same["p"] == 1).all()
    board = pd.read_csv(tmp_path / "out" / "leaderboard.csv", keep_default_na=False)
    rows = board.set_index("model")
    assert rows.loc["good", "rank"] == rows.loc["same", "rank"] == 1
    assert rows.loc["bad", "rank"] == 3
    assert rows.loc["bad", "worse_than"] == "good, same" and rows.loc["bad", "better_than"] == ""
    assert set(rows.loc["good", "better_than"].split(", ")) == {"bad"}
    md = (tmp_path / "out" / "leaderboard.md").read_text()
    assert "Holm family: all 12 tests" in md and "| 3 | bad |" in md
    assert (tmp_path / "out" / "report.html").stat().st_size > 0
    assert list(pd.read_parquet(tmp_path / "out" / "differences.parquet").columns[:13]) == [
        "benchmark", "model_a", "model_b", "metric", "value_a", "value_b", "difference",
        "ci_lo", "ci_hi", "test", "p", "p_adjusted", "verdict"]


def test_ranks_do_not_chain_through_ties() -> None:
    """A beats C; A ~ B and B ~ C: A and B share rank 1, C is 2nd (not all three 1st)."""
    values = {"A": 0.95, "B": 0.93, "C": 0.90}
    board = leaderboard(values, {("A", "C")}).set_index("model")
    assert board["rank"].to_dict() == {"A": 1, "B": 1, "C": 2}
    assert board.loc["A", "better_than"] == "C" and board.loc["C", "worse_than"] == "A"
    assert board.loc["B", "better_than"] == board.loc["B", "worse_than"] == ""
    untested = leaderboard(values, set(), {("A", "B")}).set_index("model")
    assert untested.loc["A", "not_tested"] == "B" and untested.loc["C", "not_tested"] == ""


def test_too_few_identities_gives_no_verdict(tmp_path: Path) -> None:
    few = scored(n_ids=2, per_id=8)
    scores = {"tiny": {"x": few, "y": few.assign(score=few["score"] + 0.01 * few["label"])}}
    diff = run_compare(scores, tmp_path, {"n_boot": 20, "fmr": 0.1}, fars=[], seed=0)
    assert (diff["verdict"] == "n/a (2 identities)").all() and diff["p_adjusted"].isna().all()
    board = pd.read_csv(tmp_path / "leaderboard.csv", keep_default_na=False)
    assert (board["rank"] == 1).all() and set(board["not_tested"]) == {"x", "y"}


def test_align_takes_identities_from_either_file_and_pairs_in_either_order() -> None:
    a = scored(n_ids=20)
    b = a.drop(columns=["identity_a", "identity_b"]).rename(
        columns={"image_a": "image_b", "image_b": "image_a"})   # the same pairs, swapped
    p = align(b, a)                       # A lacks identities: B's, oriented as A's pairs
    assert len(p.label) == len(a) and p.n_identities == 20
    np.testing.assert_array_equal(p.identity_a, a["identity_b"].to_numpy())
    q = align(b, b)                       # neither has them: each image its own identity
    assert q.n_identities == len(pd.unique(np.r_[a["image_a"], a["image_b"]]))


def test_cli_compares_any_score_files(tmp_path: Path, capsys, caplog) -> None:
    good, bad = scored(), scored(noise=0.25, seed=1)
    good.assign(benchmark="one").to_parquet(tmp_path / "good.parquet")
    bad.drop(columns=["identity_a", "identity_b"]).assign(benchmark="one").to_parquet(
        tmp_path / "bad.parquet")
    with caplog.at_level(logging.WARNING, logger="facecast.compare"):
        rc = cli_main(["compare", "--scores", f"good={tmp_path / 'good.parquet'}",
                       f"bad={tmp_path / 'bad.parquet'}", "--out", str(tmp_path / "o"),
                       "--n-boot", "50", "--fars", "1e-2", "--fmr", "1e-2"])
    assert rc == 0
    assert "has no identity_a/identity_b" in caplog.text
    assert "one: bad - good accuracy" in capsys.readouterr().out
    diff = pd.read_parquet(tmp_path / "o" / "differences.parquet")
    assert set(diff["benchmark"]) == {"one"} and (diff["verdict"] == "good better").all()
    assert (diff["n_identities"] == 60).all()
    for name in ("leaderboard.md", "leaderboard.csv", "report.html", "differences.csv"):
        assert (tmp_path / "o" / name).stat().st_size > 0
    with pytest.raises(SystemExit) as bad_arg:
        cli_main(["compare", "--scores", str(tmp_path / "good.parquet"), "--out", "x"])
    assert bad_arg.value.code == 2
    with pytest.raises(SystemExit) as one_file:
        cli_main(["compare", "--scores", f"a={tmp_path / 'good.parquet'}", "--out", "x"])
    assert one_file.value.code == 2


def test_plan_says_why_compare_and_slices_are_off() -> None:
    import yaml

    from facecast.config.prepare import resolve_config

    repo = Path(__file__).parents[1]
    cfg = yaml.safe_load((repo / "config.yaml").read_text())
    cfg["evaluate"]["models"] = ["dlib"]
    cfg["fairness"].pop("leaderboard", None)  # its baseline (lbp) is not evaluated here
    cfg["slices"] = "off"
    plan = resolve_config(cfg, str(repo / "workflow/schemas/config.schema.yaml"))
    assert "slices: off (slices.enabled: false)" in plan
    assert any(line.startswith("compare: skipped - fewer than two") for line in plan)
