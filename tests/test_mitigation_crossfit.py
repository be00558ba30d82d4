"""Cross-fitting, FairCal's figures and the failure rule in the mitigation stage (issue 46,
item 4): every evaluated pair scored by a fit that excludes its identities' folds, no pair
thrown away on BFW-like folds, FairCal's figures in FairCal's convention, and pairs
without a feature as non-matches."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.mitigation.crossfit import (
    choose_split,
    fits_table,
    fold_setting,
    protocol_fold_map,
    seeded_fold_map,
)
from facecast.mitigation.faircal_figures import (
    deviations,
    ece_error,
    faircal_figures,
    faircal_table,
    roc_curve_points,
    subgroup_fpr_at,
)
from facecast.mitigation.stage import run_mitigation

FAIRNESS = {"protected": {"g": {"column": "label_g", "bins": [0.5], "labels": ["g0", "g1"]}},
            "legitimate": {}, "min_pairs": 1, "min_groups": 1, "alpha": 0.5}
SCORE_LEVEL = ["raw", "oracle_cal", "group_thresholds", "fusion", "fusion_lr"]


def _bfw_like(tmp_path, n_folds=5, per_fold=6, per=3, seed=5, cross=False):
    """A BFW-like protocol: ``n_folds`` identity-disjoint folds (every pair within one
    fold; with ``cross`` also impostors across folds, as a protocol whose folds share
    no identity but not its pairs), two models' scores, groups by identity."""
    rng = np.random.default_rng(seed)
    ids = [f"i{k:02d}" for k in range(n_folds * per_fold)]
    fold_of = {who: str(1 + k // per_fold) for k, who in enumerate(ids)}
    group = {who: float(k % 2) for k, who in enumerate(ids)}
    imgs = [(f"{who}/{j}.jpg", who) for who in ids for j in range(per)]
    rows = []
    for a in range(len(imgs)):
        for b in range(a + 1, len(imgs)):
            (ia, wa), (ib, wb) = imgs[a], imgs[b]
            same_fold = fold_of[wa] == fold_of[wb]
            if (same_fold or cross) and (wa == wb or rng.random() < 0.35):
                rows.append((ia, ib, wa, wb, int(wa == wb)))
    frame = pd.DataFrame(rows, columns=["image_a", "image_b", "identity_a", "identity_b",
                                        "label"])
    frame["fold"] = frame["identity_a"].map(fold_of)
    frame["eval_fold"] = frame["fold"]
    frame["status"] = "ok"
    shift = frame["identity_a"].map(group).to_numpy() * 0.1
    frame["score"] = np.clip(0.15 + 0.45 * frame["label"] + shift
                             + rng.normal(0, 0.12, len(frame)), -1, 1)
    other = frame.assign(score=np.clip(frame["score"] + rng.normal(0, 0.1, len(frame)),
                                       -1, 1))
    write_parquet(frame, tmp_path / "m.parquet")
    write_parquet(other, tmp_path / "o.parquet")
    attrs = pd.DataFrame({"image_id": [i for i, _ in imgs], "identity": [w for _, w in imgs],
                          "label_g": [group[w] for _, w in imgs]})
    write_parquet(attrs, tmp_path / "attributes.parquet")
    return frame, other, fold_of


def _run(tmp_path, out, scores="m.parquet", methods=SCORE_LEVEL, failed="nonmatch", **cal):
    inputs = {"scores": str(tmp_path / scores),
              "attributes": str(tmp_path / "attributes.parquet"),
              "partners": [str(tmp_path / "o.parquet")]}
    cfg = {"n_boot": 4, "fmr": 0.05, "calibration": cal, "ece_bins": 4}
    return run_mitigation(inputs, tmp_path / out, cfg, FAIRNESS, methods=methods,
                          partners=["o"], fars=[0.05], seed=3, model="m", protocol="p",
                          ds="d", failed=failed)


# ------------------------------------------------------------------ cross-fitting


def test_bfw_like_folds_cross_fit_every_pair_with_a_fit_excluding_its_fold(tmp_path):
    frame, other, fold_of = _bfw_like(tmp_path)
    table = _run(tmp_path, "out")
    out = tmp_path / "out"
    fits = read_parquet(out / "fits.parquet")
    sizes = frame["fold"].value_counts().sort_index()
    assert fits["fit"].tolist() == ["1", "2", "3", "4", "5"]
    assert fits["excluded"].tolist() == ["1", "2", "3", "4", "5"]
    assert fits["n_evaluated"].tolist() == sizes.tolist()
    assert fits["n_calibration"].tolist() == (len(frame) - sizes).tolist()
    assert (fits["n_left_out"] == 0).all()
    assert fits["calibration_identities"].tolist() == [24] * 5
    # no pair is lost: every pair of the protocol is evaluated, once
    assert table["n_pairs"].iat[0] == len(frame) and table["n_fits"].iat[0] == 5
    assert table["n_left_out"].iat[0] == 0
    split = read_parquet(out / "split.parquet")
    assert (split["status"] == "evaluated").all() and (split["fit"] == split["fold"]).all()
    # each fold's fusion is fitted on the other four folds alone (mean and population SD
    # of both models' calibration scores), computed here directly
    fused = read_parquet(out / "fusion" / "pairs.parquet")
    key = ["image_a", "image_b"]
    both = frame.merge(other[[*key, "score"]], on=key, suffixes=("", "_o"))
    both = fused[[*key, "score"]].rename(columns={"score": "z"}).merge(both, on=key)
    learned = json.loads((out / "learned.json").read_text())
    assert [f["fit"] for f in learned["fits"]] == ["1", "2", "3", "4", "5"]
    for rec in learned["fits"]:
        k = rec["fit"]
        rest = both[both["fold"] != k]
        x = rest[["score", "score_o"]].to_numpy()   # models sorted: m, o
        mu, sd = x.mean(axis=0), x.std(axis=0)
        assert np.allclose(rec["fusion"]["mean"], mu, rtol=0, atol=1e-12)
        assert np.allclose(rec["fusion"]["sd"], sd, rtol=0, atol=1e-12)
        mine = both[both["fold"] == k]
        want = ((mine[["score", "score_o"]].to_numpy() - mu) / sd).mean(axis=1)
        assert np.allclose(mine["z"].to_numpy(), want, rtol=0, atol=1e-12)
        assert rec["n_calibration"] == len(rest) and rec["excluded"] == [k]
    # FairCal's table: one row per fold, mean and SD over the five, pooled
    fc = read_parquet(out / "faircal.parquet")
    raw = fc[fc["method"] == "raw"].set_index("fold")
    assert raw.index.tolist() == ["1", "2", "3", "4", "5", "mean", "std", "pooled"]
    per = [roc_auc_score(g["label"], g["score"]) for _, g in frame.groupby("fold")]
    assert np.allclose(raw.loc[["1", "2", "3", "4", "5"], "auroc"], per, atol=1e-12)
    assert raw.loc["mean", "auroc"] == pytest.approx(np.mean(per), abs=1e-12)
    assert raw.loc["std", "auroc"] == pytest.approx(np.std(per), abs=1e-12)   # ddof 0
    assert raw.loc["pooled", "auroc"] == pytest.approx(
        roc_auc_score(frame["label"], frame["score"]), abs=1e-12)
    md = (out / "table.md").read_text()
    assert "## FairCal's figures (FairCal's convention)" in md and "## Fits" in md
    assert "cross-fitted over the protocol's 5 identity-disjoint folds" in md


def test_seeded_folds_score_a_cross_fold_pair_by_a_fit_excluding_both(tmp_path):
    frame, _, _ = _bfw_like(tmp_path, n_folds=3, per_fold=4, cross=True)
    fold_of, why = protocol_fold_map(frame.assign(fold=(np.arange(len(frame)) % 3 + 1)
                                                  .astype(str)))
    assert fold_of is None and why.startswith("the protocol's 3 folds share identities")
    # the seeded folds: sorted identities, permuted with the seed, dealt round-robin
    ids = sorted(set(frame["identity_a"]) | set(frame["identity_b"]))
    perm = np.random.default_rng(9).permutation(len(ids))
    want = {ids[p]: str(1 + r % 4) for r, p in enumerate(perm)}
    assert seeded_fold_map(frame, 4, 9) == want
    split, how = choose_split(frame, {"folds": 4}, 9)
    assert how == "folds: 4 - 4 seeded identity folds (seed 9)"
    ev = split.evaluated
    assert len(ev) == len(frame) and (split.pairs["status"] == "evaluated").all()
    fa, fb = ev["identity_a"].map(want), ev["identity_b"].map(want)
    names = [f.name for f in split.fits]
    assert names == ["1", "2", "3", "4", "1+2", "1+3", "1+4", "2+3", "2+4", "3+4"]
    for f in split.fits:
        rows = ev.iloc[f.rows]
        assert set(rows["fit"]) == {f.name}
        assert set(fa.iloc[f.rows]) | set(fb.iloc[f.rows]) == set(f.excluded)
        cal = f.calibration
        seen = set(cal["identity_a"].map(want)) | set(cal["identity_b"].map(want))
        assert not seen & set(f.excluded)
        outside = ~fa.isin(f.excluded) & ~fb.isin(f.excluded)
        assert len(cal) == int(outside.sum())
    cross = ev[fa != fb].iloc[0]
    pair_fit = next(f for f in split.fits if cross["fit"] == f.name)
    assert set(pair_fit.excluded) == {want[cross["identity_a"]], want[cross["identity_b"]]}
    assert sum(len(f.rows) for f in split.fits) == len(frame)
    assert fits_table(split)["n_evaluated"].sum() == len(frame)


def test_fold_settings_and_their_errors(tmp_path):
    frame, _, _ = _bfw_like(tmp_path, n_folds=3, per_fold=4)
    assert choose_split(frame, {}, 1)[0].how == "protocol"
    split, how = choose_split(frame, {"folds": 1, "fraction": 0.5}, 1)
    assert split.how == "fraction" and len(split.fits) == 1 and how.startswith("folds: 1")
    shared = frame.assign(fold=(np.arange(len(frame)) % 3 + 1).astype(str))
    split, how = choose_split(shared, {"folds": "auto"}, 1)
    assert split.how == "fraction" and "share identities" in how
    with pytest.raises(ValueError, match=r"^mitigation\.calibration\.folds: 'protocol'"):
        choose_split(shared, {"folds": "protocol"}, 1)
    for bad in (0, "five", True, 2.5):
        with pytest.raises(ValueError, match=r"^mitigation\.calibration\.folds"):
            fold_setting(bad)


# ------------------------------------------------------------------ FairCal's figures


def test_roc_auroc_and_tpr_at_fpr_are_scikit_learns_roc_read_as_faircal_reads_it():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 400)
    s = np.round(0.4 * y + rng.normal(0, 0.3, 400), 2) / 2    # ties, all below 1
    fpr, tpr, thr = roc_curve_points(s, y)
    sk_fpr, sk_tpr, sk_thr = roc_curve(y, s, drop_intermediate=False)
    assert np.array_equal(fpr, sk_fpr) and np.array_equal(tpr, sk_tpr)
    assert np.array_equal(thr[1:], sk_thr[1:]) and thr[0] == 1.0   # np.fmin(inf, 1)
    g = np.where(rng.random(400) < 0.5, "a", "b").astype(object)
    fig = faircal_figures(s, np.clip(s + 0.5, 0, 1), y, g, ["a", "b"])
    assert fig["auroc"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    for f in (1e-3, 1e-2):
        assert fig[f"tpr@fpr={f:g}"] == pytest.approx(np.interp(f, sk_fpr, sk_tpr), abs=1e-15)
        t = np.interp(f, sk_fpr, np.fmin(sk_thr, 1))
        for name in ("a", "b"):
            sel = g == name
            sf, _, st = roc_curve(y[sel], s[sel], drop_intermediate=False)
            want = np.interp(t, np.fmin(st, 1)[::-1], sf[::-1])
            assert fig[f"fpr_{name}@fpr={f:g}"] == pytest.approx(want, abs=1e-15)


def test_subgroup_fpr_at_the_global_threshold_by_hand():
    # global: impostors 0.9, 0.5, 0.1 and genuine 0.95, 0.6 -> the ROC's points
    s = np.array([0.95, 0.9, 0.6, 0.5, 0.1])
    y = np.array([1, 0, 1, 0, 0])
    fpr, tpr, thr = roc_curve_points(s, y)
    assert np.allclose(fpr, [0, 0, 1 / 3, 1 / 3, 2 / 3, 1])
    assert np.allclose(tpr, [0, 0.5, 0.5, 1, 1, 1])
    assert np.allclose(thr, [1, 0.95, 0.9, 0.6, 0.5, 0.1])
    # global FPR 1/6: between (0, 0.95) and (1/3, 0.9) -> threshold 0.925; a subgroup
    # of impostors 0.9 and 0.1 (and a genuine 0.95): its ROC thresholds 1, .95, .9, .1
    # with FPR 0, 0, .5, 1 -> FPR at .925 = 0.25
    sub = roc_curve_points(np.array([0.95, 0.9, 0.1]), np.array([1, 0, 0]))
    assert subgroup_fpr_at((fpr, tpr, thr), sub, [1 / 6])[0] == pytest.approx(0.25)


def test_deviations_are_faircals_aad_mad_and_population_std():
    out = deviations(np.array([0.1, 0.3, 0.5, np.nan]), "x", mean=True)
    assert out["x_mean"] == pytest.approx(0.3)
    assert out["x_aad"] == pytest.approx(0.4 / 3)          # mean |x - mean|
    assert out["x_mad"] == pytest.approx(0.2)              # max |x - mean|, not max - min
    assert out["x_std"] == pytest.approx(np.sqrt(0.08 / 3))   # ddof 0, not 0.2
    assert "x_mean" not in deviations(np.array([0.1, 0.3]), "x")


def test_ece_is_faircals_equal_mass_binning():
    p = np.array([0.4, 0.1, 0.3, 0.2])
    y = np.array([1, 0, 1, 0])
    # n = 4, 2 bins: int(linspace(0, 3, 3)) + 1 = 1, 2, 4 -> sorted positions {0, 1},
    # {2, 3}: |0.15 - 0| and |0.35 - 1|, each half the pairs
    assert ece_error(p, y, 2) == pytest.approx(0.4)
    # 3 bins on 7 pairs: edges 1, 3, 5, 7 -> bins {0..2}, {3, 4}, {5, 6}
    p7 = np.linspace(0.05, 0.95, 7)
    y7 = np.array([0, 1, 0, 0, 1, 1, 1])
    want = (3 / 7 * abs(p7[:3].mean() - 1 / 3) + 2 / 7 * abs(p7[3:5].mean() - 0.5)
            + 2 / 7 * abs(p7[5:].mean() - 1.0))
    assert ece_error(p7, y7, 3) == pytest.approx(want, abs=1e-15)
    assert np.isnan(ece_error(p[:2], y[:2], 4))     # an empty bin: not a number


def test_faircal_table_keeps_mixed_pairs_out_of_the_subgroups():
    rng = np.random.default_rng(4)
    n = 300
    y = rng.integers(0, 2, n)
    s = 0.5 * y + rng.normal(0, 0.3, n)
    prob = 1 / (1 + np.exp(-4 * s))
    group = rng.choice(np.array(["g0", "g1", "mixed"], dtype=object), n)
    ann = pd.DataFrame({"label": y, "group": group,
                        "status": np.where(group == "mixed", "mixed", "ok")})
    fits = np.where(np.arange(n) < 150, "1", "2")
    fc = faircal_table(ann, {"raw": s}, {"raw": prob}, fits=fits, nbins=5)
    assert fc["fold"].tolist() == ["1", "2", "mean", "std", "pooled"]
    assert not [c for c in fc.columns if "mixed" in c]
    pooled = fc.set_index("fold").loc["pooled"]
    from facecast.mitigation.calibrate import ks_error
    for g in ("g0", "g1"):
        sel = group == g
        assert pooled[f"ks_{g}"] == pytest.approx(ks_error(prob[sel], y[sel])[0], abs=1e-15)
    assert pooled["ks"] == pytest.approx(ks_error(prob, y)[0], abs=1e-15)   # mixed in
    ks = np.array([pooled["ks_g0"], pooled["ks_g1"]])
    assert pooled["ks_aad"] == pytest.approx(abs(ks[0] - ks[1]) / 2, abs=1e-15)
    folds = fc.set_index("fold").loc[["1", "2"], "ece"].to_numpy()
    assert fc.set_index("fold").loc["std", "ece"] == pytest.approx(abs(folds[0] - folds[1]) / 2)


# ------------------------------------------------------------------ the failure rule


def _with_failures(tmp_path, frame):
    """The scores file with the first three genuine and two impostor pairs of fold 1 and
    one pair of fold 2 not scored (status ``no_face``, score NaN)."""
    lost = pd.concat([frame[(frame["fold"] == "1") & (frame["label"] == 1)].head(3),
                      frame[(frame["fold"] == "1") & (frame["label"] == 0)].head(2),
                      frame[frame["fold"] == "2"].head(1)]).index
    bad = frame.copy()
    bad.loc[lost, "status"] = "no_face"
    bad.loc[lost, "score"] = np.nan
    write_parquet(bad, tmp_path / "bad.parquet")
    return lost


@pytest.mark.parametrize("rule", ["nonmatch", "drop"])
def test_pairs_without_a_feature_are_non_matches_and_teach_nothing(tmp_path, rule):
    frame, _, _ = _bfw_like(tmp_path, n_folds=3, per_fold=6)
    lost = _with_failures(tmp_path, frame)
    table = _run(tmp_path, rule, scores="bad.parquet", failed=rule,
                 methods=["raw", "group_thresholds", "fusion"]).set_index("method")
    out = tmp_path / rule
    split = read_parquet(out / "split.parquet")
    raw = read_parquet(out / "raw" / "pairs.parquet")
    # the methods learn on scored pairs only: fit 2's calibration (folds 1, 3) lacks the
    # five failed pairs of fold 1
    learned = json.loads((out / "learned.json").read_text())
    fit2 = next(f for f in learned["fits"] if f["fit"] == "2")
    assert fit2["n_calibration"] == int((frame["fold"] != "2").sum()) - 5
    if rule == "nonmatch":
        assert table["n_failed"].tolist() == [6] * 3 and table["n_pairs"].iat[0] == len(frame)
        assert (split.loc[lost, "status"] == "evaluated").all()
        assert split.loc[lost, "failed"].all()
        for m in ("raw", "group_thresholds", "fusion"):
            pairs = read_parquet(out / m / "pairs.parquet").set_index(["image_a", "image_b"])
            gone = pairs.loc[list(zip(frame.loc[lost, "image_a"], frame.loc[lost, "image_b"],
                                      strict=True))]
            assert np.isneginf(gone["score"]).all() and (gone["probability"] == 0).all()
        # raw's AUC counts them as rejected at every threshold
        s = frame["score"].to_numpy().copy()
        s[frame.index.isin(lost)] = -np.inf
        fc = read_parquet(out / "faircal.parquet").set_index(["method", "fold"])
        assert fc.loc[("raw", "pooled"), "auroc"] == pytest.approx(
            roc_auc_score(frame["label"], np.where(np.isinf(s), -9.0, s)), abs=1e-12)
        assert "6 pair(s) without a feature: pairs without a feature count as non-matches" \
            in (out / "table.md").read_text()
    else:
        assert table["n_pairs"].iat[0] == len(frame) - 6 and table["n_failed"].iat[0] == 6
        assert (split.loc[lost, "status"] == "failed").all() and len(raw) == len(frame) - 6
        assert "6 pair(s) without a feature: pairs without a feature are left out " \
            "(evaluate.failed: drop)" in (out / "table.md").read_text()
    assert set(table["failed"]) == {rule}


def test_a_pair_without_a_partner_score_leaves_every_fit(tmp_path):
    frame, other, _ = _bfw_like(tmp_path, n_folds=3, per_fold=5)
    lost = frame.index[[0, 7, len(frame) // 2, len(frame) - 1]]
    write_parquet(other.drop(index=lost), tmp_path / "o.parquet")
    table = _run(tmp_path, "out", methods=["raw", "fusion"]).set_index("method")
    out = tmp_path / "out"
    split = read_parquet(out / "split.parquet")
    assert (split.loc[lost, "status"] == "no_partner_score").all()
    assert table.loc["raw", "n_pairs"] == len(frame) - 4
    keep = frame.drop(index=lost).merge(other[["image_a", "image_b", "score"]],
                                        on=["image_a", "image_b"], suffixes=("", "_o"))
    fused = read_parquet(out / "fusion" / "pairs.parquet").merge(
        keep, on=["image_a", "image_b"], suffixes=("", "_in"))
    assert len(fused) == len(keep) and (fused["fit"] == fused["fold"]).all()
    for k in ("1", "2", "3"):
        rest = keep[keep["fold"] != k][["score", "score_o"]].to_numpy()
        mine = fused[fused["fold"] == k]
        want = ((mine[["score_in", "score_o"]].to_numpy() - rest.mean(0)) / rest.std(0)
                ).mean(axis=1)
        assert np.allclose(mine["score"].to_numpy(), want, rtol=0, atol=1e-12)
    fits = read_parquet(out / "fits.parquet")
    assert fits["n_evaluated"].sum() == len(frame) - 4
