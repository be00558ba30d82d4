"""One failure rule for every rate (issue 46.1): a pair without a feature (no face, decode
error, no embedding) counts by ``evaluate.failed`` - ``nonmatch`` (ISO/IEC 19795-1's
generalized FMR/FNMR, the default) or ``drop`` - in evaluate, fairness, identification,
templates, slices, compare and covariates. Every figure below is counted by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facecast.compare.paired import align
from facecast.evaluate.checks import config_errors, fill_failure_rule
from facecast.evaluate.failures import (
    FAILED_SCORE,
    apply_failure_rule,
    decision_scores,
    failure_counts,
    rule_of,
    rule_text,
)
from facecast.evaluate.metrics import auc_score, equal_error_rate, roc_points, tar_at_far
from facecast.evaluate.stage import write_evaluation
from facecast.fairness.interchange import read_interchange, write_interchange
from facecast.fairness.stage import run_fairness
from facecast.fairness.threshold import group_failures, group_rates
from facecast.identification.metrics import cmc, fnir
from facecast.identification.misses import search_with_misses
from facecast.identification.search import search
from facecast.io.parquet_io import read_parquet, write_parquet
from facecast.slices.discover import score_pairs
from facecast.templates.groups import template_group_rates
from facecast.templates.targets import job_config

# genuine 0.9, 0.7, 0.4 and one without a feature; impostor 0.5, 0.2, 0.1 and one without
# a feature; a malformed line is no comparison under either rule
PAIRS = pd.DataFrame({
    "label": [1, 1, 1, 1, 0, 0, 0, 0, 1],
    "score": [0.9, 0.7, 0.4, np.nan, 0.5, 0.2, 0.1, np.nan, np.nan],
    "status": ["ok", "ok", "ok", "no_face", "ok", "ok", "ok", "decode_error", "malformed"]})


def _rates(frame: pd.DataFrame, t: float) -> tuple[float, float]:
    r = group_rates(frame["score"], frame["label"], np.full(len(frame), "all", object),
                    [t]).iloc[0]
    return float(r["fnmr"]), float(r["fmr"])


def test_nonmatch_and_drop_give_the_hand_counted_rates():
    keep = apply_failure_rule(PAIRS, "nonmatch")
    drop = apply_failure_rule(PAIRS, "drop")
    assert keep.index.tolist() == [0, 1, 2, 3, 4, 5, 6, 7]  # the malformed line: neither
    assert drop.index.tolist() == [0, 1, 2, 4, 5, 6]
    assert keep["failed"].tolist() == [False] * 3 + [True] + [False] * 3 + [True]
    assert keep.loc[[3, 7], "score"].tolist() == [FAILED_SCORE, FAILED_SCORE]
    # accept iff score >= 0.45: nonmatch FNMR 2/4 (0.4 and the failed genuine), FMR 1/4
    assert _rates(keep, 0.45) == (0.5, 0.25)
    assert _rates(drop, 0.45) == (pytest.approx(1 / 3), pytest.approx(1 / 3))
    # AUC: 8 of 9 ordered pairs under drop; under nonmatch 11 + 0.5 (the two -inf tie) of 16
    assert auc_score(drop["score"], drop["label"]) == pytest.approx(8 / 9)
    assert auc_score(keep["score"], keep["label"]) == pytest.approx(11.5 / 16)
    # TAR at FAR 0.25: 4 impostors allow 1 false accept (threshold 0.4: TAR 3/4); 3 allow 0
    # (threshold 0.7: TAR 2/3)
    for frame, n_imp, tar in ((keep, 4, 0.75), (drop, 3, 2 / 3)):
        far, tpr, thr = roc_points(frame["score"], frame["label"])
        assert tar_at_far(far, tpr, thr, 0.25, n_imp)["tar"] == pytest.approx(tar)
    # the ROC ends at the -inf point, the failed pairs' one tie: (FAR 1, TAR 1)
    far, tpr, thr = roc_points(keep["score"], keep["label"])
    assert len(thr) == 8 and thr[-1] == -np.inf and far[-2:].tolist() == [0.75, 1.0]
    eer, t = equal_error_rate(far, tpr, thr)
    assert np.isfinite(eer) and not np.isnan(t)


def test_decision_scores_counts_and_text():
    s, y = decision_scores(np.array([0.3, np.nan]), np.array([True, False]), np.array([1, 0]))
    assert s.tolist() == [0.3, -np.inf] and y.tolist() == [1, 0]
    s, y = decision_scores(np.array([0.3, np.nan]), np.array([True, False]), np.array([1, 0]),
                           "drop")
    assert s.tolist() == [0.3] and y.tolist() == [1]
    assert failure_counts(np.array([True, False, True]), np.array([1, 1, 0])) == {
        "n_pairs": 3, "n_failed": 2, "n_failed_genuine": 1, "n_failed_impostor": 1}
    assert rule_text("drop", 3).startswith("3 pair(s) without a feature: ")
    assert "ISO/IEC 19795-1" in rule_text("nonmatch")
    with pytest.raises(ValueError, match="evaluate.failed"):
        rule_text("skip")


def _scored() -> pd.DataFrame:
    """Two folds; scored genuine 0.9, 0.8 and impostors 0.1, 0.2 in each; fold 0 has a
    genuine pair without a feature, fold 1 an impostor one; one malformed line."""
    rows = []
    for fold in ("0", "1"):
        for k, (lab, s) in enumerate([(1, 0.9), (1, 0.8), (0, 0.1), (0, 0.2)]):
            rows.append((f"{fold}a{k}", f"{fold}b{k}", lab, s, "ok", fold))
    rows.append(("0fa", "0fb", 1, np.nan, "no_embedding", "0"))
    rows.append(("1fa", "1fb", 0, np.nan, "decode_error", "1"))
    rows.append(("xa", "xb", 1, np.nan, "malformed", "1"))
    f = pd.DataFrame(rows, columns=["image_a", "image_b", "label", "score", "status", "fold"])
    f["identity_a"], f["identity_b"] = f["image_a"], f["image_b"]
    f["message"] = ""
    return f


@pytest.mark.parametrize("rule", ["nonmatch", "drop"])
def test_evaluate_metrics_row_counts_failures_by_the_rule(tmp_path, rule):
    proto = tmp_path / "proto.parquet"
    write_parquet(_scored(), proto)
    row = write_evaluation(_scored(), proto, tmp_path / "s.parquet", tmp_path / "m",
                           model="m", benchmark="b",
                           cfg={"fars": [0.2], "thresholds": "exact", "failed": rule,
                                "plots": False})
    assert (row["failed"], row["n_failed"], row["n_failed_genuine"],
            row["n_failed_impostor"]) == (rule, 2, 1, 1)
    assert row["failed_statuses"] == "decode_error: 1, no_embedding: 1"
    if rule == "nonmatch":
        # fold 0's failed genuine pair is wrong at every threshold: 4/5, fold 1: 5/5
        assert (row["n_pairs"], row["n_skipped"]) == (10, 1)
        assert row["accuracy"] == pytest.approx(0.9) and row["accuracy_std"] == pytest.approx(0.1)
        assert row["auc"] == pytest.approx(20.5 / 25)
        assert row["tar@far=2e-1"] == pytest.approx(0.8)  # 5 impostors allow 1: t = 0.8
        assert row["genuine_mean"] == pytest.approx(0.85)  # over the scored pairs
    else:
        assert (row["n_pairs"], row["n_skipped"]) == (8, 3)
        assert row["skipped_statuses"] == "decode_error: 1, malformed: 1, no_embedding: 1"
        assert row["accuracy"] == 1.0 and row["auc"] == 1.0 and row["tar@far=2e-1"] == 1.0
    assert read_parquet(tmp_path / "m" / "metrics.parquet")["n_failed"].iloc[0] == 2


def test_fairness_puts_each_groups_failure_rate_beside_fmr_and_fnmr(tmp_path):
    t = group_failures(np.array(["a", "a", "a", "b", "b", None], object),
                       np.array([True, False, False, False, False, True]))
    assert t.to_dict("list") == {"group": ["a", "b"], "n_pairs": [3, 2], "n_failed": [1, 0],
                                 "fte": [pytest.approx(1 / 3), 0.0]}
    from facecast.fairness.simulate import simulate

    attrs, pairs = simulate(40, 4, seed=3)
    write_parquet(attrs, tmp_path / "attributes.parquet")
    dark = attrs.loc[attrs["label_skin_tone"] >= 0.5, "image_id"]
    gen = np.flatnonzero(pairs["label"].to_numpy() == 1)
    lost = [i for i in gen if pairs.loc[i, "image_a"] in set(dark)][:5]
    pairs["status"] = "ok"
    pairs.loc[lost, ["score", "status"]] = [np.nan, "no_face"]
    write_parquet(pairs, tmp_path / "scores.parquet")
    cfg = {"protected": {"skin": {"column": "label_skin_tone", "bins": [0.5],
                                  "labels": ["light", "dark"]}},
           "legitimate": {}, "min_pairs": 2, "n_boot": 2,
           "thresholds": {"fmr_targets": [0.1], "fixed": [], "from_protocol": ""}}
    out = {}
    for rule in ("nonmatch", "drop"):
        s = run_fairness(tmp_path / "scores.parquet", tmp_path / "attributes.parquet",
                         tmp_path / rule, cfg, model="m", protocol="p", seed=0, failed=rule)
        rates = read_parquet(tmp_path / rule / "rates.parquet").set_index("group")
        ann = read_parquet(tmp_path / rule / "pairs.parquet")
        lost_dark = int(ann.loc[lost, "group"].eq("dark").sum())
        assert lost_dark >= 1 and s["n_failed"] == 5 and s["failed"] == rule
        assert rates.loc["dark", "n_failed"] == lost_dark and rates.loc["light", "fte"] == 0
        assert rates.loc["dark", "fte"] == pytest.approx(
            lost_dark / rates.loc["dark", "n_pairs"])
        assert np.isfinite(s["accuracy"]) and np.isfinite(s["bias_pos"])
        out[rule] = (rates, ann, s)
    (rk, ak, sk), (rd, ad, sd) = out["nonmatch"], out["drop"]
    # nonmatch: the lost pairs count as false non-matches; drop: as nothing
    assert rk.loc["dark", "n_genuine"] == rd.loc["dark", "n_genuine"] + lost_dark
    assert rk.loc["dark", "false_non_matches"] >= rd.loc["dark", "false_non_matches"] + lost_dark
    assert (ak.loc[lost, "score"] == -np.inf).all() and ak.loc[lost, "in_reference"].all()
    assert (ad.loc[lost, "status"] == "no_feature").all()
    assert not ad.loc[lost, "in_reference"].any()
    assert sk["accuracy"] < sd["accuracy"]
    # the interchange file writes them at -inf and reads them back as such pairs
    back = read_interchange(tmp_path / "nonmatch" / "predictions.csv",
                            tmp_path / "nonmatch" / "pairs.csv")
    assert (back["status"] == "no_feature").sum() == 5 and back["score"].isna().sum() == 5


def test_interchange_round_trip_of_a_pair_without_a_feature(tmp_path):
    frame = pd.DataFrame({"image_a": ["x", "y"], "image_b": ["z", "w"], "label": [1, 0],
                          "score": [-np.inf, 0.25], "failed": [True, False]})
    write_interchange(frame, tmp_path / "p.csv", tmp_path / "t.csv")
    assert "-inf" in (tmp_path / "p.csv").read_text()
    back = read_interchange(tmp_path / "p.csv", tmp_path / "t.csv")
    assert back["status"].tolist() == ["no_feature", "ok"]
    assert apply_failure_rule(back, "nonmatch")["score"].tolist() == [-np.inf, 0.25]


def test_identification_entry_without_a_feature_is_a_miss():
    # gallery: identities A (e1), B (e2), C (its image has no feature)
    gal = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0]], np.float32)
    probes = np.array([[0.9, 0.1],     # mated A, found at rank 1
                       [0.0, 0.0],     # mated B, no feature: a miss
                       [0.1, 0.9],     # mated C, whose gallery entry has no feature
                       [0.0, 0.0],     # non-mated, no feature: no candidate
                       [0.7, 0.7]])    # non-mated with a feature
    mate = np.array([0, 1, 2, -1, -1])
    have_g = np.array([True, True, False])
    have_p = np.array([True, False, True, False, True])

    def run(g, p, m):
        return search(probes[p], gal[g], m, k=2, device="cpu")

    res, failed = search_with_misses(have_g, have_p, mate, 2, run)
    assert failed.tolist() == [False, True, True, True, False]
    assert res.mate_rank.tolist() == [1, 3, 3, 0, 0]  # k + 1: beyond the candidate list
    assert res.mate_score[1] == -np.inf and res.mate_score[2] == -np.inf
    assert res.top_score[3].tolist() == [-np.inf, -np.inf] and res.top_index[3].tolist() == [-1, -1]
    assert res.top_index[2].tolist() == [1, 0]  # C's probe still searched the others
    # CMC over the three mated searches: 1 of 3 at rank 1 and 2 (drop: 1 of 1)
    assert cmc(res.mate_rank, [1, 2]).tolist() == [pytest.approx(1 / 3)] * 2
    assert fnir(res.mate_rank, res.mate_score, 1, 0.5) == pytest.approx(2 / 3)


def test_templates_failed_is_an_alias_of_evaluate_failed():
    cfg = {"evaluate": {"failed": "drop"}, "templates": {"fars": [0.1]}}
    assert job_config(cfg)["failed"] == "drop"
    alias = {"evaluate": {}, "templates": {"failed": "drop"}}
    assert fill_failure_rule(alias) and alias["evaluate"]["failed"] == "drop"
    assert rule_of(alias) == job_config(alias)["failed"] == "drop"
    plain = {"evaluate": {}, "templates": {}}
    assert fill_failure_rule(plain) == [] and rule_of(plain) == "nonmatch"
    assert job_config(plain)["failed"] == "nonmatch"
    # the same implementation: the group rates of templates and evaluate's decision scores
    pairs = pd.DataFrame({"template_a": [1, 1, 2, 2], "template_b": [3, 4, 3, 4],
                          "label": [1, 1, 0, 0], "score": [0.8, np.nan, 0.3, np.nan],
                          "status": ["ok", "no_features", "ok", "no_features"]})
    groups = pd.DataFrame({"template_id": [1, 2, 3, 4], "group": ["g"] * 4})
    for rule, n_gen, fnm in (("nonmatch", 2, 1), ("drop", 1, 0)):
        r = template_group_rates(pairs, groups, [0.5], failed=rule).iloc[0]
        assert (r["n_genuine"], r["false_non_matches"]) == (n_gen, fnm)
        assert (r["n_pairs"], r["n_failed"], r["fte"]) == (4, 2, 0.5)  # whatever the rule
        s, _ = decision_scores(pairs["score"], pairs["status"] == "ok", pairs["label"], rule)
        assert len(s) == r["n_genuine"] + r["n_impostor"]


def test_config_check_names_the_key():
    assert any(e.startswith("evaluate.failed: 'ignore' is not a failure rule")
               for e in config_errors({"evaluate": {"failed": "ignore"}}))
    assert any(e.startswith("templates.failed: 'skip'")
               for e in config_errors({"evaluate": {}, "templates": {"failed": "skip"}}))
    both = config_errors({"evaluate": {"failed": "nonmatch"}, "templates": {"failed": "drop"}})
    assert any(e.startswith("templates.failed: 'drop' differs from evaluate.failed")
               for e in both)
    assert not [e for e in config_errors({"evaluate": {"failed": "drop"},
                                          "templates": {"failed": "drop"}}) if "failed" in e]


@pytest.mark.parametrize("rule, n_pairs, n_failed", [("nonmatch", 10, 2), ("drop", 8, 2)])
def test_slices_and_compare_count_by_the_rule(rule, n_pairs, n_failed):
    f = _scored()
    f["eval_fold"] = f["fold"]
    f.loc[f["status"] == "malformed", "eval_fold"] = ""
    scored, counts = score_pairs(f, pd.Index(f["image_a"]), {"threshold": {"value": 0.2}},
                                 {"failed": rule})
    assert (len(scored.pairs), counts["n_failed"], counts["failed"]) == (n_pairs, n_failed, rule)
    # the failed genuine pair is an error at any threshold under nonmatch
    assert int(scored.error.sum()) == (1 if rule == "nonmatch" else 0)
    ok = f.assign(score=f["score"].fillna(0.5), status="ok")  # model B scored every pair
    p = align(f, ok, {"failed": rule})
    assert len(p.label) == n_pairs and int(p.failed_a.sum()) == n_failed * (rule == "nonmatch")
    assert np.isneginf(p.score_a).sum() == (2 if rule == "nonmatch" else 0)


def test_template_1n_probe_or_gallery_without_a_feature_is_a_miss():
    # templates 1..3 enrol subjects a, b, c (3 has no feature); probes 4 (a), 5 (b, no
    # feature), 6 (c: its gallery template has none), 7 (z, not enrolled, no feature)
    templates = pd.DataFrame({"template_id": [1, 2, 3, 4, 5, 6, 7],
                              "status": ["ok", "ok", "no_features", "ok", "no_features", "ok",
                                         "no_features"]})
    feats = np.array([[1, 0], [0, 1], [0, 0], [1, 0], [0, 0], [0.6, 0.8], [0, 0]], float)
    proto = {"G1": pd.DataFrame({"template_id": [1, 2, 3], "subject_id": ["a", "b", "c"]}),
             "G2": pd.DataFrame({"template_id": [], "subject_id": []}),
             "probe": pd.DataFrame({"template_id": [4, 5, 6, 7],
                                    "subject_id": ["a", "b", "c", "z"]})}
    from facecast.templates.identify import identification_table

    def g1(rule):
        t = identification_table(templates, feats, proto, ranks=[1, 3], fpir_targets=[0.5],
                                 failed=rule)
        return t[t["gallery"] == "G1"].set_index("metric")

    keep, drop = g1("nonmatch"), g1("drop")
    # nonmatch: 3 mated searches (a found; b and c miss), 1 non-mated (no candidate)
    assert (keep.loc["rank_1", "n_mated"], keep.loc["rank_1", "n_nonmated"]) == (3, 1)
    assert keep.loc["rank_1", "value"] == keep.loc["rank_3", "value"] == pytest.approx(1 / 3)
    assert keep.loc["rank_1", "n_unscored"] == 3
    # drop: probes 5 and 7 and template 3 leave; c's probe is then a non-mated search
    assert (drop.loc["rank_1", "n_mated"], drop.loc["rank_1", "n_nonmated"]) == (1, 1)
    assert drop.loc["rank_1", "value"] == 1.0


def test_cross_group_matrix_and_group_thresholds_count_failed_impostors():
    """A failed impostor pair (-inf) is an impostor comparison no threshold accepts: it
    counts in the cross-group FMR matrix (n_impostor 4, 1 false match: FMR 0.25, not 1/3),
    and tied -inf scores form one run in the ranked thresholds (the weighted threshold
    equals the plain one)."""
    import numpy as np

    from facecast.fairness.cross_matrix import fmr_matrix
    from facecast.fairness.group_thresholds import threshold_at_fmr, weighted_threshold

    s = np.array([0.9, 0.1, 0.2, -np.inf])
    g = np.array(["a"] * 4, dtype=object)
    m = fmr_matrix(s, g, g, [0.5], ["t"])
    row = m.iloc[0]
    assert (row["n_impostor"], row["false_matches"]) == (4, 1) and row["fmr"] == 0.25
    s2 = np.array([-np.inf, -np.inf, -np.inf, 0.3])
    w = np.ones((1, 4))
    for target in (0.25, 0.5, 0.75):
        assert weighted_threshold(s2, w, target)[0] == threshold_at_fmr(s2, target)
