"""Stage mitigation (issue 35): every method against an independent computation, the
calibration split, and that no method sees the evaluated pairs.

Small real data made here (seeded embeddings with identity and group structure); no
pipeline run (the demo run's outputs are checked in tests/test_mitigation_workflow.py).
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import REPO
from scipy.optimize import minimize
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from facecast.compare import targets as compare_targets
from facecast.config.check import collect
from facecast.config.schema import validate_config
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.io.shard_index import write_shard_index
from facecast.mitigation import checks as mitigation_checks
from facecast.mitigation import targets as mitigation_targets
from facecast.mitigation.calibrate import BetaMap, beta_fit, ks_error, logistic_fit
from facecast.mitigation.clusters import (
    ClusterCal,
    both_members,
    cluster_cap,
    clustercal_fit,
    clustercal_prob,
    fit_kmeans,
    fsn_fit,
    fsn_scores,
)
from facecast.mitigation.cohort import (
    choose_cohort,
    cohort_self_stats,
    image_stats,
    l2_normalise,
    normalised_scores,
)
from facecast.mitigation.fusion import fusion_fit, group_shift_fit, group_shift_scores
from facecast.mitigation.report import table_markdown
from facecast.mitigation.split import check_sides, split_by_fraction, split_by_source
from facecast.mitigation.stage import run_mitigation
from facecast.mitigation.table import build_tables
from facecast.mitigation.targets import METHODS
from facecast.slices import targets as slices_targets

# ------------------------------------------------------------------ cohort normalisation


def _cohort_case(seed=0):
    rng = np.random.default_rng(seed)
    emb = l2_normalise(rng.normal(size=(9, 6)))
    ident = np.array([0, 0, 1, 2, 3, 3, 4, 5, 6])
    cohort_idx = np.array([2, 3, 4, 5, 6])      # images of identities 1, 2, 3, 3, 4
    return emb, ident, cohort_idx


def _direct_stats(emb, ident, cohort_idx, i, top_k):
    """Mean/SD over the cohort images of other identities, by explicit loops."""
    vals = [float(emb[i] @ emb[c]) for c in cohort_idx if ident[c] != ident[i]]
    top = sorted(vals)[-top_k:]
    return np.mean(vals), np.std(vals), np.mean(top), np.std(top), vals


def _bob_sd(vals):
    """ZTNorm.cpp's SD: n - 1 divisor, 0 for one value, an SD <= DBL_MIN replaced by 1."""
    sd = float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0
    return 1.0 if sd <= np.finfo(np.float64).tiny else sd


def test_cohort_norms_equal_their_formulas_on_a_small_cohort():
    emb, ident, cidx = _cohort_case()
    cohort, cid = emb[cidx], ident[cidx]
    self_stats = cohort_self_stats(cohort, cid)
    st = image_stats(emb, ident, cohort, cid, self_stats, top_k=2)
    # each cohort image's own statistics, over the other cohort identities
    own = {}
    for j, c in enumerate(cidx):
        vals = [float(emb[c] @ emb[d]) for d in cidx if ident[d] != ident[c]]
        own[c] = (np.mean(vals), _bob_sd(vals))     # ZTNorm.cpp's D rows: n - 1
        assert self_stats[0][j] == pytest.approx(own[c][0])
        assert self_stats[1][j] == pytest.approx(own[c][1])
    ia, ib = np.array([0, 1, 7, 2]), np.array([7, 8, 8, 5])
    s = np.array([float(emb[a] @ emb[b]) for a, b in zip(ia, ib, strict=True)])
    for k, (a, b) in enumerate(zip(ia, ib, strict=True)):
        mu_a, sd_a, mk_a, sk_a, vals_a = _direct_stats(emb, ident, cidx, a, 2)
        mu_b, sd_b, mk_b, sk_b, _ = _direct_stats(emb, ident, cidx, b, 2)
        z = (s[k] - mu_a) / sd_a
        t = (s[k] - mu_b) / sd_b
        zcoh = [(float(emb[b] @ emb[c]) - own[c][0]) / own[c][1] for c in cidx
                if ident[c] != ident[b]]
        z1 = (s[k] - mu_a) / _bob_sd(vals_a)        # ZTNorm.cpp: n - 1 at all three steps
        assert _bob_sd(vals_a) != pytest.approx(sd_a) and len(zcoh) > 1
        want = {"znorm": z, "tnorm": t, "ztnorm": (z1 - np.mean(zcoh)) / _bob_sd(zcoh),
                "snorm": (z + t) / 2,
                "asnorm": ((s[k] - mk_a) / sk_a + (s[k] - mk_b) / sk_b) / 2}
        for method, value in want.items():
            got = normalised_scores(method, s, ia, ib, st)[k]
            assert got == pytest.approx(value, rel=1e-5, abs=1e-6), method


def test_ztnorm_replaces_a_zero_sd_by_one_as_ztnorm_cpp():
    # cohort: identities 1 and 2 (one image each) - each cohort image's own statistics
    # rest on ONE score (ZTNorm.cpp: SD 0, replaced by 1); identical embeddings of the two
    # cohort images give the probe constant cohort scores (SD exactly 0 -> 1 again)
    e = l2_normalise(np.array([[1.0, 0.2, 0.0], [0.3, 1.0, 0.5], [0.3, 1.0, 0.5],
                               [0.0, 0.4, 1.0]]))
    ident = np.array([0, 1, 2, 3])
    cidx = np.array([1, 2])
    self_stats = cohort_self_stats(e[cidx], ident[cidx])
    assert self_stats[1].tolist() == [1.0, 1.0]            # one value each: SD 0 -> 1
    st = image_stats(e, ident, e[cidx], ident[cidx], self_stats, top_k=2)
    s = np.array([float(e[0] @ e[3])])
    c = e[cidx]
    mu_a = float(np.mean(c @ e[0]))
    z1 = s[0] - mu_a                                       # constant cohort scores: SD 1
    zc = c @ e[3] - self_stats[0]                          # each divided by its SD 1
    want = (z1 - zc.mean()) / 1.0                          # constant again: SD 0 -> 1
    got = normalised_scores("ztnorm", s, np.array([0]), np.array([3]), st)[0]
    assert np.isfinite(got) and got == pytest.approx(want, abs=1e-12)
    # the Z-norm of bob.bio.base's ZNormScores keeps its population SD (floored, not 1)
    assert abs(normalised_scores("znorm", s, np.array([0]), np.array([3]), st)[0]) > 1e6


def test_cohort_sample_is_seeded_and_capped():
    a = choose_cohort(50, 10, seed=3)
    assert np.array_equal(a, choose_cohort(50, 10, seed=3)) and len(set(a)) == 10
    assert not np.array_equal(a, choose_cohort(50, 10, seed=4))
    assert len(choose_cohort(7, 10, seed=3)) == 7


# ------------------------------------------------------------------ FSN


def test_fsn_cluster_thresholds_are_the_clusters_own_fmr_quantiles():
    rng = np.random.default_rng(1)
    n, k, fmr = 6000, 3, 0.01
    ca, cb = rng.integers(0, k, n), rng.integers(0, k, n)
    label = (rng.random(n) < 0.2).astype(int)
    score = rng.normal(0.3 + 0.1 * ca + 0.05 * cb, 0.1) + 0.5 * label
    fsn = fsn_fit(score, label, ca, cb, k, fmr)
    imp = label == 0

    def lowest_threshold(values):   # the lowest t with mean(values >= t) <= fmr, directly
        v = np.sort(values)
        cands = np.r_[v, np.nextafter(v, np.inf)]   # the scores and just above each
        ok = [t for t in cands if np.mean(values >= t) <= fmr]
        return min(ok)

    assert fsn.global_threshold == lowest_threshold(score[imp])
    for c in range(k):
        mine = score[imp & ((ca == c) | (cb == c))]
        assert fsn.n_impostors[c] == len(mine)
        assert fsn.thresholds[c] == pytest.approx(lowest_threshold(mine), abs=0)
        assert fsn.offsets[c] == pytest.approx(fsn.thresholds[c] - fsn.global_threshold)
    s2 = fsn_scores(fsn, score[:5], ca[:5], cb[:5])
    want = score[:5] - (fsn.offsets[ca[:5]] + fsn.offsets[cb[:5]]) / 2
    assert np.allclose(s2, want)


def test_fsn_cluster_without_enough_impostors_keeps_the_global_threshold():
    score = np.r_[np.linspace(0, 1, 500), np.linspace(0, 1, 50)]
    label = np.zeros(550, int)
    ca = np.r_[np.zeros(500, int), np.ones(50, int)]
    fsn = fsn_fit(score, label, ca, ca, 2, 0.01)
    assert list(fsn.resolvable) == [True, False] and fsn.offsets[1] == 0.0
    assert cluster_cap(100, 1000, 1000, 0.01)[0] == 5     # 2 x 1000 / (4 x 100)
    assert cluster_cap(3, 1000, 10**6, 0.01) == (3, "")
    # FairCal has no thresholds: only the images bound its clusters
    assert cluster_cap(100, 1000) == (100, "")
    assert cluster_cap(100, 40) == (40, "40 clusters, not 100: 40 calibration images")


def test_kmeans_is_faircals_scikit_learn_call_with_ten_initialisations():
    from sklearn.cluster import KMeans

    x = np.random.default_rng(9).random((300, 3)).astype(np.float32)
    ten = KMeans(n_clusters=12, n_init=10, random_state=5).fit(x)
    one = KMeans(n_clusters=12, n_init=1, random_state=5).fit(x)
    assert ten.inertia_ < one.inertia_                   # the initialisations matter here
    assert np.allclose(fit_kmeans(x, 12, seed=5), ten.cluster_centers_)


# ------------------------------------------------------------------ calibration maps


def test_beta_calibration_equals_a_direct_fit_of_its_three_parameters():
    rng = np.random.default_rng(2)
    s = np.tanh(rng.normal(0.2, 0.6, 3000))
    u = (s + 1) / 2
    true = expit(2.0 * np.log(u) - 0.7 * np.log1p(-u) + 0.3)
    y = (rng.random(3000) < true).astype(int)
    got = beta_fit(s, y)

    def nll(p):
        z = p[0] * np.log(u) - p[1] * np.log1p(-u) + p[2]
        return np.sum(np.logaddexp(0, z) - y * z)

    direct = minimize(nll, x0=[1.0, 1.0, 0.0], method="BFGS", options={"gtol": 1e-9}).x
    assert got.a > 0 and got.b > 0
    assert [got.a, got.b, got.c] == pytest.approx(list(direct), abs=1e-4)
    assert np.allclose(got(s), expit(direct[0] * np.log(u) - direct[1] * np.log1p(-u)
                                     + direct[2]), atol=1e-6)


def _nll_fit(feats, y):
    """Unpenalised logistic regression on ``feats`` (+ intercept) by BFGS (independent of
    facecast's Newton solver)."""
    x1 = np.column_stack([feats, np.ones(len(y))])

    def nll(p):
        z = x1 @ p
        return np.sum(np.logaddexp(0, z) - y * z)

    return minimize(nll, x0=np.zeros(x1.shape[1]), method="BFGS",
                    options={"gtol": 1e-10}).x


@pytest.mark.parametrize("dropped", ["a", "b"])
def test_beta_calibration_drops_a_negative_coefficient_like_betacal(dropped):
    # data whose full fit has a negative coefficient on ln s (a) or on -ln(1 - s) (b):
    # betacal's "abm" then drops that feature and refits the other alone
    rng = np.random.default_rng(3)
    s = rng.uniform(-0.95, 0.95, 4000)
    u = (s + 1) / 2
    z = (-1.5 * np.log(u) - 2.0 * np.log1p(-u) - 2.0 if dropped == "a"
         else 2.0 * np.log(u) + 1.5 * np.log1p(-u) + 1.0)
    y = (rng.random(4000) < expit(z)).astype(int)
    feats = np.column_stack([np.log(u), -np.log1p(-u)])
    full = _nll_fit(feats, y)
    assert full[0 if dropped == "a" else 1] < -0.5           # the data force the drop
    m = beta_fit(s, y)
    keep = 1 if dropped == "a" else 0
    coef, inter = _nll_fit(feats[:, keep:keep + 1], y)
    if dropped == "a":
        assert m.a == 0.0 and m.b == pytest.approx(coef, abs=1e-4)
    else:
        assert m.b == 0.0 and m.a == pytest.approx(coef, abs=1e-4)
    assert m.c == pytest.approx(inter, abs=1e-4)


def test_fusion_weights_equal_scikit_learns_logistic_regression():
    rng = np.random.default_rng(4)
    x = rng.normal(size=(4000, 2)) + np.array([0.5, 0.0])
    y = (x @ [2.0, -1.0] + rng.logistic(size=4000) > 0.5).astype(int)
    fu = fusion_fit(["a", "b"], x, y)
    ref = LogisticRegression(C=99999999999, tol=1e-12, max_iter=10000).fit(x, y)
    assert fu.weights == pytest.approx(ref.coef_[0], rel=1e-5)
    assert fu.intercept == pytest.approx(ref.intercept_[0], rel=1e-5)
    assert np.allclose(fu.probability(x), ref.predict_proba(x)[:, 1], atol=1e-6)
    assert np.allclose(fu.mean_z(x), ((x - x.mean(0)) / x.std(0)).mean(1))
    w, b = logistic_fit(x, y)
    assert np.allclose(w, fu.weights)


def test_ks_error_is_faircals_formula():
    rng = np.random.default_rng(5)
    p, y = rng.random(500), (rng.random(500) < 0.4).astype(int)
    o = np.argsort(p)
    want = np.max(np.abs(np.cumsum(p[o]) / 500 - np.cumsum(y[o]) / 500))
    assert ks_error(p, y)[0] == pytest.approx(want)
    w = np.vstack([np.ones(500), np.r_[np.ones(250), np.zeros(250)]])
    q = p[:250]
    o2 = np.argsort(q)
    want2 = np.max(np.abs(np.cumsum(q[o2] - y[:250][o2]))) / 250
    assert ks_error(p, y, w)[1] == pytest.approx(want2)


def test_faircal_pair_probability_is_the_size_weighted_mean_of_its_clusters_maps():
    maps = [BetaMap(1.0, 1.0, 0.0), BetaMap(2.0, 0.5, -1.0), BetaMap(0.5, 0.5, 0.2)]
    cc = ClusterCal(np.array([m.a for m in maps]), np.array([m.b for m in maps]),
                    np.array([m.c for m in maps]), np.array([30, 10]), np.array([True] * 2))
    s = np.array([0.2, 0.7, 0.5, 0.1])
    ca, cb = np.array([0, 1, 0, -1]), np.array([1, 1, -1, -1])
    got = clustercal_prob(cc, s, ca, cb)
    assert got[0] == pytest.approx((30 * maps[0](s[:1])[0] + 10 * maps[1](s[:1])[0]) / 40)
    assert got[1] == pytest.approx(maps[1](s[1:2])[0])
    assert got[2] == pytest.approx(maps[0](s[2:3])[0])      # no group: the other decides
    assert got[3] == pytest.approx(maps[2](s[3:4])[0])      # neither: the global map


def test_oracle_maps_are_fitted_on_the_groups_own_pairs():
    rng = np.random.default_rng(8)
    n = 3000
    ga, gb = rng.integers(0, 2, n), rng.integers(0, 2, n)
    label = (rng.random(n) < 0.3).astype(int)
    s = np.tanh(rng.normal(0.1 + 0.6 * label - 0.2 * ga, 0.4))
    cc = clustercal_fit(s, label, both_members(ga, gb, 2), beta_fit(s, label))
    for g in (0, 1):
        own = (ga == g) & (gb == g)
        direct = beta_fit(s[own], label[own])
        assert [cc.a[g], cc.b[g], cc.c[g]] == pytest.approx([direct.a, direct.b, direct.c])
        assert cc.n_pairs[g] == own.sum()
        pair = np.flatnonzero(own)[:3]
        assert np.allclose(clustercal_prob(cc, s[pair], ga[pair], gb[pair]), direct(s[pair]))


def test_group_thresholds_shift_one_group_pairs_only():
    rng = np.random.default_rng(6)
    n = 4000
    ga = rng.integers(0, 2, n)
    gb = np.where(rng.random(n) < 0.7, ga, 1 - ga)
    label = np.zeros(n, int)
    score = rng.normal(0.2 - 0.4 * (ga != gb), 0.1)
    gs = group_shift_fit(score, label, ga, gb, ["a", "b"], 0.01)
    for g in (0, 1):
        mine = score[(ga == g) & (gb == g)]
        assert np.mean(mine >= gs.thresholds[g]) <= 0.01
        assert np.mean(mine >= np.nextafter(gs.thresholds[g], -np.inf)) > 0.01
    shifted = group_shift_scores(gs, score, ga, gb)
    same = ga == gb
    assert np.allclose(shifted[~same], score[~same])
    assert np.allclose(shifted[same], score[same] - gs.offsets[ga[same]])
    # FairCal's gst bounds: [-1 - max d, 1 - min d] over the groups' offsets, no 0 added
    # (both offsets are positive here: the low-scoring mixed pairs pull t_G down)
    assert (gs.offsets > 0).all()
    assert gs.bounds == (-1 - gs.offsets.max(), 1 - gs.offsets.min())
    # as decisions: one group's pairs accepted at t_G after the shift iff s >= t_g
    g0 = same & (ga == 0)
    assert np.array_equal(shifted[g0] >= gs.global_threshold,
                          score[g0] >= gs.global_threshold + gs.offsets[0])


# ------------------------------------------------------------------ split and stage


def _world(tmp_path, n_ids=40, per=4, dim=16, seed=7):
    """Scores of two models, an embed index and an attribute table of a small world."""
    rng = np.random.default_rng(seed)
    ids = [f"p{i:03d}" for i in range(n_ids)]
    group = rng.integers(0, 2, n_ids)
    centre = rng.normal(size=(n_ids, dim)) + 1.5 * group[:, None] * np.eye(dim)[0]
    rows, emb = [], {}
    for i, who in enumerate(ids):
        for k in range(per):
            name = f"{who}/{k}.jpg"
            emb[name] = centre[i] + rng.normal(scale=0.8 + 0.4 * group[i], size=dim)
            rows.append((name, who, float(group[i])))
    imgs = pd.DataFrame(rows, columns=["image_id", "identity", "label_g"])
    pairs = [(a, b) for who in ids for ka in range(per) for kb in range(ka + 1, per)
             for a, b in [(f"{who}/{ka}.jpg", f"{who}/{kb}.jpg")]]
    names = imgs["image_id"].to_numpy()
    for _ in range(1500):
        a, b = rng.choice(len(names), 2, replace=False)
        if imgs["identity"].iloc[a] != imgs["identity"].iloc[b]:
            pairs.append((names[a], names[b]))
    frame = pd.DataFrame(pairs, columns=["image_a", "image_b"]).drop_duplicates()
    who = imgs.set_index("image_id")["identity"]
    frame["identity_a"] = who.reindex(frame["image_a"]).to_numpy()
    frame["identity_b"] = who.reindex(frame["image_b"]).to_numpy()
    frame["label"] = (frame["identity_a"] == frame["identity_b"]).astype("int8")
    frame["fold"] = (np.arange(len(frame)) % 10).astype(str)
    frame["eval_fold"] = frame["fold"]
    unit = {k: v / np.linalg.norm(v) for k, v in emb.items()}
    frame["score"] = [float(unit[a] @ unit[b]) for a, b in zip(frame["image_a"],
                                                              frame["image_b"], strict=True)]
    other = frame.assign(score=np.clip(frame["score"] + rng.normal(0, 0.2, len(frame)), -1, 1))
    write_parquet(frame, tmp_path / "m.parquet")
    write_parquet(other, tmp_path / "o.parquet")
    shard = pd.DataFrame({"image_id": list(emb), "embedding": [v.astype(np.float32).tolist()
                                                              for v in emb.values()],
                          "norm": 1.0})
    write_parquet(shard, tmp_path / "embed" / "0.parquet")
    write_shard_index([tmp_path / "embed" / "0.parquet"], tmp_path / "index.parquet")
    write_parquet(imgs, tmp_path / "attributes.parquet")
    return frame


FAIRNESS = {"protected": {"g": {"column": "label_g", "bins": [0.5], "labels": ["g0", "g1"]}},
            "legitimate": {}, "min_pairs": 1, "min_groups": 1, "alpha": 0.5}


def _run(tmp_path, out, scores="m.parquet", n_boot=8, **cfg):
    inputs = {"scores": str(tmp_path / scores), "embeddings": str(tmp_path / "index.parquet"),
              "attributes": str(tmp_path / "attributes.parquet"),
              "partners": [str(tmp_path / "o.parquet")]}
    mit = {"n_boot": n_boot, "fmr": 0.01, "calibration": {"fraction": 0.5},
           "cohort_size": 50, "top_k": 10, "clusters": 100, **cfg}
    return run_mitigation(inputs, tmp_path / out, mit, FAIRNESS, methods=list(METHODS),
                          partners=["o"], fars=[1e-2, 1e-4], seed=11, model="m",
                          protocol="p", ds="d")


def test_fraction_split_is_by_identity_and_every_pair_keeps_a_status(tmp_path):
    frame = _world(tmp_path)
    split = split_by_fraction(frame, 0.5, seed=3)
    cal = set(split.calibration_ids)
    assert len(cal) == 20
    ev = split.evaluated
    assert not (set(ev["identity_a"]) | set(ev["identity_b"])) & cal
    assert set(split.calibration["identity_a"]) | set(split.calibration["identity_b"]) <= cal
    assert len(split.pairs) == len(frame)
    assert set(split.pairs["status"]) <= {"evaluated", "calibration", "cross"}
    assert split_by_fraction(frame, 0.5, seed=3).calibration_ids == split.calibration_ids
    counts = check_sides(split, "p")
    assert counts["evaluated_identities"] == 20 and counts["calibration_genuine"] > 0


def test_a_split_with_too_few_identities_names_the_problem(tmp_path):
    frame = _world(tmp_path, n_ids=5)
    with pytest.raises(ValueError) as err:
        check_sides(split_by_fraction(frame, 0.2, seed=1), "p")
    text = str(err.value)
    assert text.startswith("mitigation.calibration:") and "1 calibration identities" in text
    assert "mitigation.calibration.fraction" in text
    # a calibration benchmark on the same dataset: its identities leave the evaluated pairs
    src = frame[frame["identity_a"].isin(["p000", "p001", "p002"])]
    split = split_by_source(frame, src, same_dataset=True, name="b on d")
    assert set(split.pairs.loc[split.pairs["status"] == "excluded", "identity_a"]) | set(
        split.pairs.loc[split.pairs["status"] == "excluded", "identity_b"]) >= {"p000"}
    assert not {"p000", "p001", "p002"} & set(split.evaluated["identity_a"])


def test_stage_writes_every_method_and_the_table(tmp_path):
    _world(tmp_path)
    table = _run(tmp_path, "out")
    assert list(table["method"]) == list(METHODS)
    out = tmp_path / "out"
    diff = read_parquet(out / "differences.parquet")
    assert set(diff["method"]) == set(METHODS) - {"raw"}
    # Holm across every tested row of the table, by hand: sorted p, (m - i) p_(i),
    # running maximum, capped at 1; untested rows stay out of the family
    tested = diff["p"].notna().to_numpy()
    p = diff.loc[tested, "p"].to_numpy()
    m = len(p)
    order = np.argsort(p, kind="stable")
    stepped = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    want = np.empty(m)
    want[order] = stepped
    assert m > 20 and (~tested).any()
    assert np.allclose(diff.loc[tested, "p_adjusted"].to_numpy(), want, rtol=1e-12)
    assert diff.loc[~tested, "p_adjusted"].isna().all()
    assert (diff["significant"] == (diff["p_adjusted"] <= 0.05)).all()
    # TAR at 1e-4 cannot be resolved by these impostors: n/a, never a number
    tar = table["tar@far=0.0001"]
    assert tar.isna().all() and table["note"].str.contains("tar@far=0.0001: n/a").all()
    assert (diff.loc[diff["metric"] == "tar@far=0.0001", "note"].str.startswith("n/a")).all()
    split = read_parquet(out / "split.parquet")
    ev_pairs = read_parquet(out / "fsn" / "pairs.parquet")
    assert len(ev_pairs) == int((split["status"] == "evaluated").sum()) == table["n_pairs"][0]
    assert {"image_a", "image_b", "label", "score", "identity_a", "identity_b", "fold",
            "eval_fold"} <= set(ev_pairs.columns)
    cal = set(read_parquet(out / "calibration.parquet")["identity"])
    assert not cal & (set(ev_pairs["identity_a"]) | set(ev_pairs["identity_b"]))
    md = (out / "table.md").read_text()
    bullets = [line for line in md.split("## What each method buys and costs")[1].split(
        "## Values")[0].splitlines() if line.startswith("- ")]
    assert [b.split("`")[1] for b in bullets] == list(METHODS)[1:]  # one per method
    assert all(len(b) < 400 and "Bias+" in b and "Accuracy" in b for b in bullets)
    assert (out / "pareto.png").stat().st_size > 0 and (out / "report.html").is_file()
    # FSN's clusters are capped by the calibration impostors, FairCal's only by the images
    learned = json.loads((out / "learned.json").read_text())
    n_cal_images = len(set(read_parquet(out / "split.parquet").query(
        "status == 'calibration'")[["image_a", "image_b"]].to_numpy().ravel()))
    assert learned["kmeans"]["faircal"]["clusters"] == min(100, n_cal_images)
    assert learned["kmeans"]["fsn"]["clusters"] < learned["kmeans"]["faircal"]["clusters"]


def test_a_ratio_over_a_group_without_false_matches_says_why_not_inf():
    names = ["accuracy", "bias_pos", "bias_neg", "fmr_max_min", "fnmr_max_min",
             "fmr_g0", "fmr_g1", "fnmr_g0", "fnmr_g1"]
    rng = np.random.default_rng(0)

    def vals(fmr0):
        return {"accuracy": 0.9, "bias_pos": 0.1, "bias_neg": 0.1,
                "fmr_max_min": np.inf if fmr0 == 0 else 0.02 / fmr0, "fnmr_max_min": 2.0,
                "fmr_g0": fmr0, "fmr_g1": 0.02, "fnmr_g0": 0.1, "fnmr_g1": 0.2}

    point = {"raw": vals(0.01), "fsn": vals(0.0)}
    reps = {m: {k: v + rng.normal(0, 0.01, 50) if np.isfinite(v) else np.full(50, np.inf)
                for k, v in point[m].items()} for m in point}
    table, diff = build_tables(point, reps, notes={k: "" for k in names}, n_identities=40,
                               confidence=0.95, alpha=0.05, counts={"n_pairs": 100})
    fsn = table.set_index("method").loc["fsn"]
    assert np.isnan(fsn["fmr_max_min"]) and np.isfinite(fsn["fnmr_max_min"])
    assert "fmr_max_min: n/a (0 false matches in g0)" in fsn["note"]
    row = diff.set_index(["method", "metric"]).loc[("fsn", "fmr_max_min")]
    assert row["verdict"] == "n/a (0 false matches in g0)" and np.isnan(row["p"])
    md = table_markdown(table, diff, title="t", intro="i", sentences=[])
    line = next(s for s in md.splitlines() if s.startswith("| fsn |"))
    assert "n/a (0 false matches in g0)" in line and "inf" not in md


def _flip(tmp_path, name: str, frame: pd.DataFrame) -> None:
    split = split_by_fraction(frame.rename(columns={}), 0.5, seed=11)
    ev = split.pairs["status"].to_numpy() == "evaluated"
    flipped = frame.copy()
    flipped.loc[ev, "label"] = 1 - flipped.loc[ev, "label"]
    write_parquet(flipped, tmp_path / name)


def test_no_method_sees_the_evaluated_pairs(tmp_path):
    frame = _world(tmp_path)
    _flip(tmp_path, "flipped.parquet", frame)
    _run(tmp_path, "a", n_boot=2)
    _run(tmp_path, "b", scores="flipped.parquet", n_boot=2)
    la = json.loads((tmp_path / "a" / "learned.json").read_text())
    lb = json.loads((tmp_path / "b" / "learned.json").read_text())
    la.pop("split"), lb.pop("split")         # the evaluated side's label counts differ
    assert la == lb
    for m in METHODS:
        sa = read_parquet(tmp_path / "a" / m / "pairs.parquet")
        sb = read_parquet(tmp_path / "b" / m / "pairs.parquet")
        assert (sa["label"] != sb["label"]).all()
        assert np.array_equal(sa["score"].to_numpy(), sb["score"].to_numpy()), m
        assert np.array_equal(sa["probability"].to_numpy(), sb["probability"].to_numpy()), m


def test_same_config_same_bytes(tmp_path):
    _world(tmp_path)
    _run(tmp_path, "a", n_boot=4)
    _run(tmp_path, "b", n_boot=4)
    for name in ("table.csv", "differences.csv", "learned.json", "table.md"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


# ------------------------------------------------------------------ config and DAG side


SCHEMA = str(REPO / "workflow/schemas/config.schema.yaml")


def _demo(drop: tuple[str, ...] = (), **sections) -> dict:
    """config.yaml with ``sections`` merged in and ``drop`` left out, schema-validated."""
    with open(REPO / "config.yaml") as fh:
        cfg = yaml.safe_load(fh)
    for key, value in sections.items():
        cfg[key] = {**cfg.get(key, {}), **copy.deepcopy(value)}
    for key in drop:
        cfg.pop(key)
    validate_config(cfg, SCHEMA)
    return cfg


def _errors(cfg: dict) -> list[str]:
    return collect(cfg)[0]


def test_the_demo_runs_every_method_and_an_explicit_false_is_off():
    cfg = _demo()
    assert mitigation_targets.methods(cfg) == list(METHODS) and _errors(cfg) == []
    assert mitigation_targets.targets(cfg, "demo") == [
        "results/demo/mitigation/lbp/fair_pool/table.md",
        "results/demo/mitigation/dlib/fair_pool/table.md"]
    assert mitigation_checks.fill_defaults(cfg, set())[0] == (
        "mitigation: on (mitigation.enabled: true)")
    off = _demo(mitigation={"enabled": False})
    assert mitigation_targets.targets(off, "demo") == []
    assert mitigation_checks.fill_defaults(off, set())[0].startswith("mitigation: off")
    one = _demo(evaluate={"models": ["dlib"]}, fairness={"enabled": False})
    assert mitigation_targets.methods(one) == [m for m in METHODS if m not in (
        "oracle_cal", "group_thresholds", "fusion", "fusion_lr")]
    lines = mitigation_checks.fill_defaults(one, set())
    assert "mitigation: fusion left out - needs two or more evaluated models " \
           "(evaluate.models)" in lines


@pytest.mark.parametrize("sections, key, words", [
    ({"compare": {"models": ["dlib", "dlib+fsm"]}}, "compare.models",
     "'fsm' is not a mitigation method"),
    ({"slices": {"models": ["dlib+fsn"]}, "mitigation": {"enabled": False}}, "slices.models",
     "needs mitigation.enabled: true"),
    ({"compare": {"models": ["dlib", "dlib+fsn"]}, "mitigation": {"methods": ["faircal"]}},
     "compare.models", "does not run 'fsn'"),
    ({"mitigation": {"calibration": {"benchmark": "fair_pool"}}},
     "mitigation.calibration.benchmark", "would leave its own evaluated pairs"),
    ({"mitigation": {"calibration": {"benchmark": "randm"}}},
     "mitigation.calibration.benchmark", "'randm' is not a benchmark"),
    ({"mitigation": {"calibration": {"dataset": "other"}}}, "mitigation.calibration.dataset",
     "'other' is not a configured dataset"),
    ({"mitigation": {"methods": ["oracle_cal"]}, "fairness": {"enabled": False}},
     "mitigation.methods", "needs the fairness stage's protected groups"),
    ({"mitigation": {"models": ["arcface"]}}, "mitigation.models", "not an embed model"),
    ({"mitigation": {"calibration": {"benchmark": "random", "folds": 5}}},
     "mitigation.calibration.folds", "a calibration source (mitigation.calibration.benchmark"),
])
def test_config_mistakes_name_their_key(sections, key, words):
    errs = _errors(_demo(**sections))
    assert len(errs) == 1, errs
    assert errs[0].startswith(f"{key}:") and words in errs[0], errs[0]


def test_slices_and_compare_read_a_mitigated_model_from_the_mitigation_stage():
    cfg = _demo(compare={"models": ["dlib", "dlib+fsn"]}, slices={"models": ["dlib+fsn"]})
    assert _errors(cfg) == []
    inputs = compare_targets.score_inputs(cfg, "demo")
    assert inputs["fair_pool/dlib+fsn"] == (
        "results/demo/mitigation/dlib/fair_pool/fsn/pairs.parquet")
    assert inputs["fair_pool/dlib"] == "results/demo/eval/dlib/fair_pool.parquet"
    assert "random/dlib+fsn" not in inputs and "random/dlib" in inputs  # not mitigated there
    assert compare_targets.accuracy(cfg)["thresholds"] == "exact"
    assert slices_targets.targets(cfg, "demo") == [
        "results/demo/slices/dlib+fsn/fair_pool/discovered.yaml"]
    assert slices_targets.scores_input("demo", "dlib+fsn", "fair_pool").endswith(
        "mitigation/dlib/fair_pool/fsn/pairs.parquet")
    assert slices_targets.accuracy_config(cfg, ["dlib"])["thresholds"] == "insightface"


def test_without_fairness_groups_bias_is_said_to_be_missing(tmp_path):
    _world(tmp_path)
    inputs = {"scores": str(tmp_path / "m.parquet"),
              "embeddings": str(tmp_path / "index.parquet"), "partners": []}
    table = run_mitigation(inputs, tmp_path / "out", {"n_boot": 4, "fmr": 0.01}, {},
                           methods=["raw", "snorm", "faircal"], partners=[], fars=[1e-2],
                           seed=1, model="m", protocol="p", ds="d")
    assert list(table["method"]) == ["raw", "snorm", "faircal"]
    assert table["bias_pos"].isna().all() and np.isfinite(table["ks"]).all()
    assert table["note"].str.contains("bias_pos: n/a (no fairness groups)", regex=False).all()
    assert "fmr_max_min" not in table.columns


def test_a_calibration_benchmark_on_the_same_or_another_dataset(tmp_path):
    frame = _world(tmp_path)
    ids = sorted(set(frame["identity_a"]))[:20]
    write_parquet(frame[frame["identity_a"].isin(ids) & frame["identity_b"].isin(ids)],
                  tmp_path / "bench.parquet")
    base = {"scores": str(tmp_path / "m.parquet"),
            "embeddings": str(tmp_path / "index.parquet"),
            "attributes": str(tmp_path / "attributes.parquet"), "partners": [],
            "cal_embeddings": str(tmp_path / "index.parquet"),
            "cal_attributes": str(tmp_path / "attributes.parquet"), "cal_partners": []}
    kw = {"methods": ["raw", "asnorm", "fsn", "oracle_cal"], "partners": [], "fars": [1e-2],
          "seed": 1, "model": "m", "protocol": "p", "ds": "d"}
    cfg = {"n_boot": 4, "fmr": 0.01, "cohort_size": 50, "top_k": 10}
    run_mitigation({**base, "cal_scores": str(tmp_path / "bench.parquet")}, tmp_path / "same",
                   cfg, FAIRNESS, source=("d", "bench"), **kw)
    split = read_parquet(tmp_path / "same" / "split.parquet")
    excluded = split[split["status"] == "excluded"]
    assert set(excluded["identity_a"]) | set(excluded["identity_b"]) >= set(ids)
    ev = split[split["status"] == "evaluated"]
    assert not set(ids) & (set(ev["identity_a"]) | set(ev["identity_b"]))
    # another dataset: its people are others (names namespaced), every pair is evaluated
    run_mitigation({**base, "cal_scores": str(tmp_path / "m.parquet")}, tmp_path / "other",
                   cfg, FAIRNESS, source=("d2", "p"), **kw)
    split = read_parquet(tmp_path / "other" / "split.parquet")
    assert set(split["status"]) == {"evaluated"}
    cal = read_parquet(tmp_path / "other" / "calibration.parquet")
    assert set(cal["dataset"]) == {"d2"} and set(cal["identity"]) == set(frame["identity_a"])
    learned = json.loads((tmp_path / "other" / "learned.json").read_text())
    assert all(i.startswith("d2::") for i in learned["cohort"]["images"])
