"""The mitigation table's bootstrap from identity counts (issue 41.5) gives every figure of
the pair-weight computation it replaced: the fairness bootstrap's own functions
(``Prepared``, ``replicate_thresholds``, ``weighted_rates``, ``GroupedAUC``) and
``ks_sorted`` on the weights ``identity_weights`` draws - on pairs with ties, pairs outside
the fairness reference, mixed pairs, a cell-less group and replicates that draw no
impostor of a group."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from facecast.compare.paired import fold_correct
from facecast.evaluate.resample import identity_counts, identity_weights
from facecast.fairness.bias import bias_of, discrimination
from facecast.fairness.bootstrap import Prepared, replicate_thresholds, weighted_rates
from facecast.fairness.threshold import disparity_arrays
from facecast.mitigation import ranked, replicates
from facecast.mitigation.calibrate import ks_sorted
from facecast.mitigation.metrics import MethodState
from facecast.mitigation.ranked import PairCodes

FAIRNESS = {"alpha": 0.3, "min_groups": 1, "min_pairs": 2}
FARS, FMR = [0.02, 0.1], 0.05


def _pairs(seed: int = 0, n_ids: int = 40) -> pd.DataFrame:
    """Annotated pairs of a small world: four groups (one of them in no cell), mixed
    pairs, a few pairs outside the reference set, scores rounded so that many tie."""
    rng = np.random.default_rng(seed)
    group = np.array(["a", "b", "c", "d"])[rng.integers(0, 4, n_ids)]
    combo = np.array(["x", "y"])[rng.integers(0, 2, n_ids)]
    rows = []
    for i in range(n_ids):
        for _ in range(3):
            rows.append((i, i))
    for _ in range(900):
        i, j = rng.choice(n_ids, 2, replace=False)
        rows.append((i, j))
    ia, ib = np.array(rows).T
    label = (ia == ib).astype(int)
    same = group[ia] == group[ib]
    score = np.round(rng.normal(0.2 + 0.5 * label + 0.1 * (group[ia] == "b"), 0.2), 2)
    ref = rng.random(len(ia)) > 0.05
    in_cells = same & (group[ia] != "d")
    return pd.DataFrame({
        "identity_a": [f"p{i}" for i in ia], "identity_b": [f"p{j}" for j in ib],
        "label": label, "score": score,
        "group": np.where(same, group[ia], None), "combo": combo[ia],
        "status": np.where(same, "ok", "mixed"), "in_cells": in_cells,
        "in_reference": ref, "eval_fold": (np.arange(len(ia)) % 5).astype(str)})


def _old(ann: pd.DataFrame, score: np.ndarray, prob: np.ndarray, w: np.ndarray
         ) -> dict[str, np.ndarray]:
    """The figures as the pair-weight bootstrap computed them (the fairness functions)."""
    prep = Prepared(ann.assign(score=score), min_pairs=FAIRNESS["min_pairs"])
    correct = fold_correct(score, ann["label"].to_numpy(), ann["eval_fold"].to_numpy(),
                           "exact")
    ok = np.isfinite(correct)
    targets = list(dict.fromkeys([FMR, *FARS]))
    thr = replicate_thresholds(prep, w * prep.ref[None, :], targets)
    tar, fmr, fnmr = weighted_rates(prep, w, thr)
    out = {"accuracy": (w[:, ok] * correct[ok]).sum(1) / w[:, ok].sum(1),
           "auc": prep.accuracy(w)[0][:, 0], "threshold": thr[:, 0],
           **{f"tar@far={f:g}": tar[:, targets.index(f)] for f in FARS}}
    for sign, key in (("+", "bias_pos"), ("-", "bias_neg")):
        auc, count = prep.cells[sign](w)
        auc = auc.reshape(-1, *prep.shape)
        pres = prep.present[sign][None] & (count.reshape(-1, *prep.shape) > 0)
        out[key] = np.atleast_1d(bias_of(discrimination(auc, pres, 1)[1]))
    disp = disparity_arrays(fmr[:, 0], fnmr[:, 0], FAIRNESS["alpha"])
    out.update({k: disp[k] for k in ("fmr_max_min", "fnmr_max_min", "fdr", "garbe")})
    for i, g in enumerate(prep.group_names):
        out[f"fmr_{g}"], out[f"fnmr_{g}"] = fmr[:, 0, i], fnmr[:, 0, i]
    order = np.argsort(prob, kind="stable")
    gap = (prob - ann["label"].to_numpy())[order]
    out["ks"] = ks_sorted(w[:, order], gap)
    group = ann["group"].to_numpy(object)[order]
    for g in prep.group_names:
        i = np.flatnonzero(group == g)
        out[f"ks_{g}"] = ks_sorted(w[:, order][:, i], gap[i])
    return out


def _same(new: dict[str, np.ndarray], old: dict[str, np.ndarray]) -> None:
    """Bit for bit; GARBE's Gini sums run over another memory layout: to 1e-15."""
    for k, v in old.items():
        if k == "garbe":
            np.testing.assert_allclose(new[k], v, rtol=0, atol=1e-15)
        else:
            assert np.array_equal(new[k], v, equal_nan=True), (k, new[k], v)


@pytest.mark.parametrize("prob_kind", ["monotone", "saturated", "zeros_ones", "other_order"])
@pytest.mark.parametrize("block", [None, 97, 7])   # 7: tie blocks longer than a block
def test_identity_count_replicates_equal_the_pair_weight_figures(prob_kind, block,
                                                                  monkeypatch):
    if block:                       # many blocks: running sums carried across them
        monkeypatch.setattr(ranked, "BLOCK", block)
    ann = _pairs()
    rng = np.random.default_rng(1)
    score = ann["score"].to_numpy(np.float64)
    prob = {"monotone": 1 / (1 + np.exp(-3 * score)),
            # runs of equal probabilities over many scores: reordered inside each block
            "saturated": np.round(1 / (1 + np.exp(-3 * score)), 1),
            # long runs of exactly 0 and 1 (a calibration map's saturation), cut by blocks
            "zeros_ones": np.where(score < 0.15, 0.0, np.where(
                score > 0.6, 1.0, 1 / (1 + np.exp(-3 * score)))),
            "other_order": np.round(rng.random(len(score)), 2)}[prob_kind]
    codes = PairCodes(ann["identity_a"].to_numpy(), ann["identity_b"].to_numpy())
    st = MethodState(ann, score, prob, codes=codes, fars=FARS, fmr=FMR, fairness=FAIRNESS)
    # the KS sums ride on the score sweep unless the probability order is another one (or
    # a long tie block is cut inside a run of equal probabilities strictly inside (0, 1))
    if block != 7:
        assert st.ks_order.shared == (prob_kind != "other_order" or block is None)
    assert (len(st.ranked.blocks) == 1) == (block is None)
    assert any(b.tied >= 0 for b in st.ranked.blocks) == (block == 7)
    # the same generator calls give the same replicates as the pair weights
    draws = list(identity_counts(codes.k, 40, np.random.default_rng(5), chunk=7))
    weights = list(identity_weights(ann["identity_a"], ann["identity_b"], 40,
                                    np.random.default_rng(5), chunk=13))
    counts, w = np.vstack(draws), np.vstack(weights)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        new = st.metrics(counts)
        _same(new, _old(ann, score, prob, w))
        # the point estimate: unit counts are unit weights
        point = _old(ann, score, prob, np.ones((1, len(ann))))
        point.pop("accuracy")                  # the point's accuracy is the 10-fold mean
        _same(st.metrics(np.ones((1, codes.k)), point=True), point)
    assert np.isfinite(new["bias_pos"]).all() and (new["threshold"] > 0).all()
    # ties at the thresholds and in the AUCs are exercised; some group has no false match
    assert sum(len(b.tie_p[0]) for b in st.ranked.blocks) > 0
    assert sum(len(b.tie_m[0]) for b in st.ranked.blocks) > 0
    assert (new["fmr_d"] == 0).any() or np.isnan(new["fmr_d"]).any()


def test_worker_processes_give_the_same_replicates(monkeypatch):
    ann = _pairs(seed=3)
    score = ann["score"].to_numpy(np.float64)
    scores = {"raw": score, "shift": np.round(score + 0.013 * ann["label"], 2)}
    probs = {m: 1 / (1 + np.exp(-s)) for m, s in scores.items()}
    kw = {"fars": FARS, "fmr": FMR, "fairness": FAIRNESS, "n_boot": 23, "seed": 4}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        here = replicates.bootstrap(ann, scores, probs, workers=1, **kw)
        monkeypatch.setattr(replicates, "PROCESS_WORK", 1)      # this small table too
        pool = replicates.bootstrap(ann, scores, probs, workers=2, **kw)
    assert here[0] == pool[0] == ["a", "b", "c", "d"]
    for m in scores:
        assert here[1][m] == pool[1][m]
        for k, v in here[2][m].items():
            assert len(v) == 23 and np.array_equal(v, pool[2][m][k], equal_nan=True), (m, k)
    # one draw stream shared by the methods: the same identity counts behind each row
    assert not np.array_equal(here[2]["raw"]["auc"], here[2]["shift"]["auc"])


def _production_pairs(seed: int = 3) -> pd.DataFrame:
    """:func:`_pairs` as the fairness annotation writes mixed pairs: ``group="mixed"``."""
    ann = _pairs(seed)
    return ann.assign(group=ann["group"].where(ann["status"] != "mixed", "mixed"))


def test_ks_summaries_cells_and_defaults_of_one_method():
    from facecast.mitigation.calibrate import ks_error

    ann = _production_pairs()
    score = ann["score"].to_numpy()
    prob = 1.0 / (1.0 + np.exp(-6.0 * (score - 0.45)))
    y = ann["label"].to_numpy()
    codes = PairCodes(ann["identity_a"].to_numpy(), ann["identity_b"].to_numpy())
    cells = ann[ann["in_cells"] & ann["in_reference"] & (y == 1)]
    per_cell = cells.groupby(["group", "combo"]).size().to_numpy()
    m = int(np.sort(per_cell)[len(per_cell) // 2])         # a cell count: the boundary
    st = MethodState(ann, score, prob, codes=codes, fars=FARS, fmr=FMR,
                     fairness={"min_groups": 1, "min_pairs": m})
    assert st.groups == ["a", "b", "c", "d"]                 # "mixed" is no group
    assert st.alpha == 0.5                                   # fairness.alpha's default
    assert int(st.present["+"].sum()) == int((per_cell >= m).sum())   # >=, not >
    point = st.metrics(np.ones((1, codes.k)), point=True)
    ks = np.array([ks_error(prob[ann["group"] == g], y[ann["group"] == g])[0]
                   for g in st.groups])
    assert np.allclose([point[f"ks_{g}"][0] for g in st.groups], ks, rtol=0, atol=1e-15)
    dev = np.abs(ks - ks.mean())
    assert point["ks_aad"][0] == pytest.approx(dev.mean(), abs=1e-15)
    assert point["ks_mad"][0] == pytest.approx(dev.max(), abs=1e-15)
    assert abs(dev.max() - (ks.max() - ks.min())) > 1e-3      # MAD is not max - min
    assert abs((ks - ks.mean()).mean()) < 1e-12 < dev.mean()  # the abs matters
    assert "ks_mixed" not in point


def test_every_method_reads_the_same_draws_and_the_point_is_no_replicate():
    ann = _production_pairs(5)
    score = ann["score"].to_numpy()
    prob = np.clip(score, 0.0, 1.0)
    groups, point, reps = replicates.bootstrap(
        ann, {"raw": score, "twin": score.copy(), "other": -score},
        {"raw": prob, "twin": prob.copy(), "other": 1.0 - prob}, fars=FARS, fmr=FMR,
        fairness=FAIRNESS, n_boot=12, seed=7)
    assert groups == ["a", "b", "c", "d"]
    for k in reps["raw"]:       # one draw per replicate shared by every method
        assert np.array_equal(reps["raw"][k], reps["twin"][k], equal_nan=True), k
    unit = _old(ann, score, prob, np.ones((1, len(ann))))      # every pair weighs 1
    for k in ("auc", "bias_pos", "threshold", "ks"):
        assert point["raw"][k] == pytest.approx(float(unit[k][0]), abs=1e-12), k
    y = ann["label"].to_numpy()
    assert point["raw"]["ks"] == pytest.approx(ks_sorted(
        np.ones((1, len(y))), (prob - y)[np.argsort(prob, kind="stable")])[0], abs=1e-15)
    assert not np.any(reps["raw"]["auc"] == point["raw"]["auc"])
