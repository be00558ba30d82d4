"""Issue 51: :func:`facecast.fairness.assess.run_fairness` end to end on a protocol small
enough to count by hand - six identities of two genders, two images each, six genuine
pairs, six impostor pairs inside a gender, two across (mixed) - one of them a pair without a
feature - so every figure it writes (summary, thresholds, per-group rates, bootstrap,
hardest pairs, the report's sentences, the log) is pinned to a number worked out here, not
read back from the code under test. Two more runs take the other branches: failures
dropped, mixed pairs excluded, target-FMR thresholds, soft attributes and the config's
defaults; thresholds reused from another run."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from facecast.fairness.assess import (
    OUTPUT_FILES,
    _annotated_pairs,
    _bias,
    _thresholds_and_rates,
    _uncertainty,
    run_fairness,
)
from facecast.fairness.bootstrap import bootstrap
from facecast.io.parquet_io import read_parquet, read_provenance, write_parquet

GENUINE = {"f1": 0.9, "f2": 0.45, "f3": 0.8, "m1": 0.7, "m2": 0.85, "m3": 0.6}
#: (identity a, identity b, score): inside a gender, then across (mixed) pairs; NaN: the
#: model produced no feature for one image of the pair
IMPOSTOR = [("f1", "f2", 0.5), ("f1", "f3", 0.1), ("f2", "f3", np.nan), ("m1", "m2", 0.3),
            ("m1", "m3", 0.65), ("m2", "m3", 0.05), ("f1", "m1", 0.4), ("f2", "m2", 0.2)]
PROTECTED = {"gender": {"column": "label_male", "bins": [0.5], "labels": ["female", "male"]}}
LEGITIMATE = {"glasses": {"column": "label_glasses", "bins": [0.5], "labels": ["G0", "G1"]}}
#: a pair's chance of a category: the mean of its two images' (a mixed pair is half male)
SOFT_MEAN = {"gender": {"categories": {"male": "label_male", "female": "1-label_male"},
                        "pair_prob": "mean"}}
CFG = {"protected": PROTECTED, "legitimate": LEGITIMATE, "min_pairs": 1, "min_groups": 2,
       "n_boot": 5, "hard_pairs": 2, "thresholds": {"fixed": [0.5, 0.75]},
       "soft_attributes": SOFT_MEAN}
#: the second run: every optional key at its default but soft attributes and mixed pairs
CFG_DEFAULTS = {"protected": PROTECTED, "legitimate": LEGITIMATE, "n_boot": 4,
                "mixed_pairs": "exclude",
                "soft_attributes": {"gender": {"categories": {"male": "label_male",
                                                              "female": "1-label_male"}}}}


def _inputs(root, extra=(), held_out=False):
    """The attribute table (image 0 without glasses, image 1 with) and the scored pairs
    (image 0 of identity a against image 1 of identity b; ``extra`` impostor pairs
    after those of :data:`IMPOSTOR`; ``held_out``: one more genuine pair without a feature
    in evaluate's held-out fold, ``eval_fold`` "")."""
    attrs = pd.DataFrame([{"image_id": f"{i}/{j}.jpg", "identity": i,
                           "label_male": float(i[0] == "m"), "label_glasses": float(j)}
                          for i in GENUINE for j in (0, 1)])
    rows = [(i, i, 1, s) for i, s in GENUINE.items()] + [(a, b, 0, s) for a, b, s in [*IMPOSTOR, *extra]]
    pairs = pd.DataFrame({"image_a": [f"{a}/0.jpg" for a, _, _, _ in rows],
                          "image_b": [f"{b}/1.jpg" for _, b, _, _ in rows],
                          "identity_a": [a for a, _, _, _ in rows],
                          "identity_b": [b for _, b, _, _ in rows],
                          "label": [y for _, _, y, _ in rows],
                          "score": [s for _, _, _, s in rows]})
    if held_out:
        pairs["eval_fold"] = "0"
        pairs.loc[len(pairs)] = ["f1/0.jpg", "f1/1.jpg", "f1", "f1", 1, np.nan, ""]
    write_parquet(attrs, root / "attributes.parquet")
    write_parquet(pairs, root / "scores.parquet")
    return attrs, pairs


def _run(root, name, cfg, *, exists=False, **kw):
    """One run of :func:`run_fairness` on the inputs in ``root`` into ``root/name/proto``
    (two new folders, or an existing one: Snakemake may have made it): (summary, output
    folder, log messages). Each test makes its own runs: mutmut counts a function as
    reached by the test during which it ran, and a shared fixture runs during the first
    test only."""
    if exists:
        (root / name / "proto").mkdir(parents=True)
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("facecast.fairness.assess")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        summary = run_fairness(root / "scores.parquet", root / "attributes.parquet",
                               root / name / "proto", cfg, model="mdl", protocol="proto",
                               seed=3,
                               provenance={"config_hash": "h"}, **kw)
    finally:
        logger.removeHandler(handler)
    return summary, root / name / "proto", [r.getMessage() for r in records]


def _auc(pos, neg):
    """Probability that a genuine score beats an impostor score, ties half."""
    p = np.asarray(pos, float)[:, None]
    n = np.asarray(neg, float)[None, :]
    return float(((p > n) + 0.5 * (p == n)).mean())


NEG_INF = -np.inf
GEN_F, GEN_M = [0.9, 0.45, 0.8], [0.7, 0.85, 0.6]
IMP_F, IMP_M = [0.5, 0.1, NEG_INF], [0.3, 0.65, 0.05]  # the failed pair at -inf
IMP_ALL = [*IMP_F, *IMP_M, 0.4, 0.2]


def _check_summary_counts_accuracy_and_bias_by_hand(s, out, messages):
    assert (s["model"], s["protocol"], s["failed"]) == ("mdl", "proto", "nonmatch")
    assert (s["n_pairs"], s["n_valid"], s["n_genuine"], s["n_impostor"]) == (14, 14, 6, 8)
    assert (s["n_in_cells"], s["n_groups"], s["n_combos"]) == (12, 2, 1)
    assert (s["n_combos_used_pos"], s["n_combos_used_neg"]) == (1, 1)
    assert (s["min_pairs"], s["min_groups"]) == (1, 2)
    assert (s["n_failed"], s["n_failed_genuine"], s["n_failed_impostor"]) == (1, 0, 1)
    assert s["accuracy"] == pytest.approx(_auc([*GEN_F, *GEN_M], IMP_ALL))  # 45 / 48
    # Bias+: the groups' genuine pairs against every impostor pair; Bias-: the groups'
    # impostor pairs against every genuine pair; the spread of the two AUCs each
    gen_all = [*GEN_F, *GEN_M]
    assert s["bias_pos"] == pytest.approx(_auc(GEN_M, IMP_ALL) - _auc(GEN_F, IMP_ALL))
    assert s["bias_neg"] == pytest.approx(_auc(gen_all, IMP_F) - _auc(gen_all, IMP_M))
    assert s["tar@t=0.5"] == pytest.approx(5 / 6) and s["tar@t=0.75"] == pytest.approx(3 / 6)
    assert s["resolvable@t=0.5"] is True and s["note@t=0.5"] == ""
    assert s["fairness_note"] == ""
    # FDR = 1 - (alpha |dFMR| + (1 - alpha) |dFNMR|), alpha 0.5: at 0.5 the groups' FMRs
    # are 1/3 and 1/3, FNMRs 1/3 and 0; at 0.75 FMRs 0 and 0, FNMRs 1/3 and 2/3
    assert s["fdr@t=0.5"] == pytest.approx(1 - 0.5 / 3)
    assert s["fdr@t=0.75"] == pytest.approx(1 - 0.5 / 3)
    # GARBE = alpha Gini(FMR) + (1 - alpha) Gini(FNMR), Gini of two groups
    # 2 * |x1 - x2| / (2 * 2^2 * mean): FMRs equal (0), FNMRs 1/3, 0 -> 1; 1/3, 2/3 -> 1/3
    assert s["garbe@t=0.5"] == pytest.approx(0.5 * 1.0)
    assert s["garbe@t=0.75"] == pytest.approx(0.5 / 3)
    saved = read_parquet(out / "summary.parquet").iloc[0]
    assert saved["bias_pos"] == pytest.approx(s["bias_pos"]) and saved["n_pairs"] == 14


def _check_every_output_written_with_provenance_and_csv_twins(s, out, messages):
    for name in OUTPUT_FILES:
        assert (out / name).is_file(), name
    for name in OUTPUT_FILES:
        if name.endswith(".parquet"):
            prov = read_provenance(out / name)
            assert (prov["stage"], prov["model"], prov["protocol"], prov["config_hash"]) == (
                "fairness", "mdl", "proto", "h"), name
    for stem in ("summary", "cells", "groups", "subsets", "thresholds", "rates",
                 "uncertainty", "soft_accuracy", "hard_pairs"):
        parquet = read_parquet(out / f"{stem}.parquet")
        csv = pd.read_csv(out / f"{stem}.csv")
        assert list(csv.columns) == list(parquet.columns), stem
        assert len(csv) == len(parquet), stem
    assert len(pd.read_csv(out / "predictions.csv")) == 14


def _check_thresholds_and_group_rates_by_hand(s, out, messages):
    thr = read_parquet(out / "thresholds.parquet")
    assert thr["name"].tolist() == ["t=0.5", "t=0.75"]
    assert thr["source"].tolist() == ["fixed in config"] * 2
    # 0.5 and 0.65 accepted at 0.5 (>=); none of the eight at 0.75
    assert thr["false_matches"].tolist() == [2, 0]
    assert thr["fmr_reached"].tolist() == pytest.approx([2 / 8, 0.0])
    assert thr["alpha"].tolist() == [0.5, 0.5]
    rates = read_parquet(out / "rates.parquet")
    got = {(r.threshold_name, r.group): (r.false_matches, r.n_impostor, r.false_non_matches,
                                         r.n_genuine, r.n_failed, r.n_pairs)
           for r in rates.itertuples()}
    assert got == {("t=0.5", "female"): (1, 3, 1, 3, 1, 6), ("t=0.5", "male"): (1, 3, 0, 3, 0, 6),
                   ("t=0.75", "female"): (0, 3, 1, 3, 1, 6),
                   ("t=0.75", "male"): (0, 3, 2, 3, 0, 6)}
    assert rates.set_index(["threshold_name", "group"])["fte"].to_dict() == pytest.approx(
        {("t=0.5", "female"): 1 / 6, ("t=0.5", "male"): 0.0,
         ("t=0.75", "female"): 1 / 6, ("t=0.75", "male"): 0.0})
    # the mixed pairs (f1-m1 at 0.4, f2-m2 at 0.2) are in no group's rates
    assert set(rates["group"]) == {"female", "male"}


def _check_failures_are_logged_per_group(s, out, messages):
    assert "mdl/proto: 14 pairs, statuses {'ok': 12, 'mixed': 2}" in messages
    failed = [m for m in messages if "pairs without a feature per group" in m]
    assert failed == ["mdl/proto: pairs without a feature per group: {'female': 1, 'male': 0}; "
                      "Pairs without a feature count as non-matches (evaluate.failed: nonmatch,"
                      " ISO/IEC 19795-1 generalized FMR/FNMR): a false non-match when genuine, a"
                      " correct reject when impostor."]


def _check_bootstrap_replicates_and_estimates(s, out, messages):
    reps = read_parquet(out / "bootstrap.parquet")
    assert reps["replicate"].tolist() == [0, 1, 2, 3, 4]  # n_boot 5
    unc = read_parquet(out / "uncertainty.parquet").set_index("metric")
    # thresholds fixed in config stay fixed in every replicate
    assert unc.loc["threshold@t=0.5", ["lo", "hi"]].tolist() == [0.5, 0.5]
    assert unc.loc["accuracy", "estimate"] == pytest.approx(s["accuracy"])
    assert unc.loc["bias_pos", "estimate"] == pytest.approx(s["bias_pos"])
    assert unc.loc["bias_neg", "estimate"] == pytest.approx(s["bias_neg"])
    # every replicate has an accuracy; a Bias only where a draw keeps both groups in the
    # combination (min_groups 2)
    assert unc.loc["accuracy", "n_boot"] == 5 and unc["n_identities"].iloc[0] == 6
    assert (unc["n_boot"] <= 5).all() and unc.loc["bias_neg", "n_boot"] < 5
    # few false matches (default 10): every figure at a threshold says what it rests on
    assert unc.loc["tar@t=0.5", "note"] == "rests on 2 false matches"
    assert unc.loc["accuracy", "note"] == ""


def _check_soft_accuracy_by_hand(s, out, messages):
    """At t = 0.5 the male category holds the six male pairs (weight 1) and the two mixed
    pairs (weight 0.5, ``pair_prob: mean``): 7; right are three genuine, two impostor and
    both mixed impostors (rejected) - 6 / 7. Hard: the six male pairs, 5 right."""
    soft = read_parquet(out / "soft_accuracy.parquet").set_index(["category", "threshold_name"])
    male = soft.loc[("male", "t=0.5")]
    assert male["prob_mass"] == pytest.approx(7.0)
    assert male["prob_accuracy"] == pytest.approx(6 / 7)
    assert (male["hard_accuracy"], male["hard_n"]) == (pytest.approx(5 / 6), 6)
    assert set(soft["attribute"]) == {"gender"}


def _check_hardest_pairs_of_each_kind(s, out, messages):
    hard = read_parquet(out / "hard_pairs.parquet")
    got = list(zip(hard["kind"], hard["identity_a"], hard["identity_b"], hard["score"],
                   strict=True))
    assert got == [("genuine", "f2", "f2", 0.45), ("genuine", "m3", "m3", 0.6),
                   ("impostor", "m1", "m3", 0.65), ("impostor", "f1", "f2", 0.5)]


RULE_NONMATCH = (
    "1 pair(s) without a feature: pairs without a feature count as non-matches "
    "(evaluate.failed: nonmatch, ISO/IEC 19795-1 generalized FMR/FNMR): a false non-match "
    "when genuine, a correct reject when impostor.")
NA_NOTE = (
    "n/a (N impostors): fewer than 1/FMR impostor pairs, too few to resolve the target. n/a "
    "(0 false matches in <group>): a max/min or max/geomean ratio (and the inequity rate) "
    "over a group without false matches (non-matches) has no finite value.")
FTE_NOTE = ("fte: the group's pairs with an image without a feature (n_failed of n_pairs), a "
            "bias in its own right beside FMR and FNMR.")


def _skeleton(lines):
    """The page's lines with each run of table rows as one ``<table>``."""
    out = []
    for line in lines:
        key = "<table>" if line.startswith("|") else line
        if not (key == "<table>" and out and out[-1] == "<table>"):
            out.append(key)
    return out


def _check_report_sentences_and_sections(s, out, messages):
    """The page line by line (tables as ``<table>``; the two generated verdict paragraphs,
    :mod:`facecast.fairness.verdict`'s, by their start), then its tables' key rows."""
    lines = (out / "report.md").read_text().splitlines()
    page = _skeleton(lines)
    assert page[2].startswith("**In short** (generated from this page's tables): Groups: "
                              "gender (2 with pairs)")
    assert page[4].startswith("mdl's FNMR at t = 0.5 is highest for female")
    assert page[:2] + page[3:4] + page[5:] == [
        "# Fairness: mdl on proto", "", "", "",
        "ChaLearn FairFace 2020 metric (lower Bias is fairer; accuracy = AUC over all pairs):",
        "", "<table>", "", RULE_NONMATCH, "",
        "Cells need >= 1 pairs of their sign and a combination needs >= 2 groups to take "
        "part; combinations used: 1 (+), 1 (-). Mixed pairs: reference.", "",
        "## Pair statuses", "", "<table>", "",
        "## Average discrimination per group (Table A7) and times most discriminated (A8)",
        "", "<table>", "",
        "## Per legitimate attribute subset: max/min average discrimination (A9-A14)", "",
        "<table>", "",
        "## Global thresholds (accept if score >= threshold)", "", NA_NOTE, "", "<table>", "",
        "## Error rates per group", "", FTE_NOTE, "", "<table>", "",
        "## Identity-clustered bootstrap", "", "<table>", "",
        "## Probabilistic (CAST) vs hard inter-category accuracy", "", "<table>", "",
        "## Hardest pairs", "", "![hardest pairs](hard_pairs.png)", "", "<table>", "", "",
        "![rates](rates_vs_threshold.png) ![fdr](fdr_vs_fmr.png)"]
    assert ("| bias_pos | bias_neg | accuracy | n_pairs | n_valid | n_failed | n_in_cells | "
            "n_groups | n_combos |") in lines
    assert "| 0.04167 | 0.05556 | 0.9375 | 14 | 14 | 1 | 12 | 2 | 1 |" in lines
    assert lines[lines.index("## Pair statuses") + 2:][:4] == [
        "| status | count |", "|---|---|", "| ok | 12 |", "| mixed | 2 |"]
    # the tables, in the columns the report promises, with their numbers
    assert ("| name | threshold | source | fmr_reached | false_matches | n_impostor | tar | "
            "fmr_max_min | fmr_max_geomean | fnmr_max_min | fnmr_max_geomean | fdr | garbe | "
            "inequity_rate |") in lines
    assert ("| threshold_name | group | false_matches | n_impostor | fmr | fmr_lo | fmr_hi | "
            "false_non_matches | n_genuine | fnmr | fnmr_lo | fnmr_hi | n_failed | n_pairs | "
            "fte |") in lines
    assert "| + | glasses | G0-G1 | 1 | 0.04167 | female | 0 | male |" in lines
    assert "| female | 0.04167 | 0 | 1 | 0 | 1 | 1 |" in lines
    html = (out / "report.html").read_text()
    assert "Pair statuses" in html and "<table" in html


#: four more impostor pairs inside a gender, below every genuine score
EXTRA = [("f2", "f1", 0.02), ("f3", "f1", 0.03), ("f3", "f2", 0.04), ("m2", "m1", 0.01)]


def test_defaults_drop_failures_exclude_mixed_pairs_and_score_soft_categories(tmp_path):
    _inputs(tmp_path, EXTRA, held_out=True)
    s, out, messages = _run(tmp_path, "defaults", CFG_DEFAULTS, exists=True,
                               failed="drop")
    assert s["failed"] == "drop" and (s["min_pairs"], s["min_groups"]) == (10, 1)
    # mixed pairs out of everything, the failed pair out under drop
    assert (s["n_pairs"], s["n_valid"], s["n_in_cells"]) == (19, 15, 15)
    assert (s["n_genuine"], s["n_impostor"]) == (6, 9)
    # the held-out pair without a feature is outside evaluate's test: not counted
    assert (s["n_failed"], s["n_failed_genuine"], s["n_failed_impostor"]) == (1, 0, 1)
    ann = read_parquet(out / "pairs.parquet")
    assert ann["status"].value_counts().to_dict() == {"ok": 15, "mixed": 2, "no_feature": 1,
                                                         "held_out": 1}
    # no cell reaches the default 10 pairs: no combination takes part, Bias is NaN
    assert (s["n_combos_used_pos"], s["n_combos_used_neg"]) == (0, 0)
    assert np.isnan(s["bias_pos"]) and np.isnan(s["bias_neg"])
    imp = [0.5, 0.1, 0.3, 0.65, 0.05, *(x for _, _, x in EXTRA)]
    assert s["accuracy"] == pytest.approx(_auc([*GEN_F, *GEN_M], imp))
    # default targets 1e-3 and 1e-4: nine impostors resolve neither
    thr = read_parquet(out / "thresholds.parquet")
    assert thr["name"].tolist() == ["fmr=0.001", "fmr=0.0001"]
    assert thr["source"].tolist() == ["all impostor pairs of this protocol"] * 2
    assert not thr["resolvable"].any()
    assert s["note@fmr=0.001"] == "n/a (9 impostors)" and np.isnan(s["fdr@fmr=0.001"])
    assert read_parquet(out / "bootstrap.parquet")["replicate"].tolist() == [0, 1, 2, 3]
    soft = read_parquet(out / "soft_accuracy.parquet")
    assert sorted(set(soft["category"])) == ["female", "male"]
    assert set(soft["attribute"]) == {"gender"}
    # default hard_pairs 8: all 6 genuine pairs, the 8 highest of the 9 impostors
    hard = read_parquet(out / "hard_pairs.parquet")
    assert hard["kind"].value_counts().to_dict() == {"impostor": 8, "genuine": 6}
    assert hard.loc[hard["kind"] == "impostor", "score"].min() == 0.02
    report = (out / "report.md").read_text()
    assert "Mixed pairs: exclude." in report
    lines = report.splitlines()
    assert lines[lines.index("## Per legitimate attribute subset: max/min average "
                             "discrimination (A9-A14)") + 2:][:2] == [
        "(no combinations took part)", ""]
    assert "(no soft attributes configured)" not in report
    failed = [m for m in messages if "pairs without a feature per group" in m]
    assert failed == ["mdl/proto: pairs without a feature per group: {'female': 1, 'male': 0}; "
                      "Pairs without a feature are left out (evaluate.failed: drop): each rate "
                      "is over the pairs the model scored."]


def test_reused_thresholds_stay_fixed_through_the_bootstrap(tmp_path, monkeypatch):
    """Thresholds reused from another run's table; the figures get the manifest, the
    dataset root and the title (the figures themselves stood in for: their inputs are
    what is checked here)."""
    import facecast.fairness.assess as assess

    _inputs(tmp_path)
    _, fixed, _ = _run(tmp_path, "fixed", CFG)
    reuse = {**CFG, "thresholds": {"fmr_targets": [0.25], "from_protocol": "dev"},
             "soft_attributes": {}, "hard_pairs": 20}
    calls = {}
    monkeypatch.setattr(assess, "_plot_hard_pairs", lambda *a: calls.update(hard=a))
    monkeypatch.setattr(assess, "_plot_rates", lambda *a: calls.update(rates=a))
    s, out, _ = _run(tmp_path, "reused", reuse,
                     reuse_thresholds=fixed / "thresholds.parquet", faces_paths=["f"],
                     manifest_path=tmp_path / "m.parquet", dataset_root=tmp_path)
    assert calls["hard"][1:] == (out / "hard_pairs.png", ["f"], tmp_path / "m.parquet",
                                 tmp_path)
    assert calls["rates"][2:] == (reuse, out, "mdl on proto")
    thr = read_parquet(out / "thresholds.parquet")
    assert thr["name"].tolist() == ["t=0.5", "t=0.75"]  # the dev run's, not fmr=0.25
    assert thr["threshold"].tolist() == [0.5, 0.75]
    assert thr["source"].tolist() == ["reused from dev"] * 2
    assert s["tar@t=0.5"] == pytest.approx(5 / 6)
    unc = read_parquet(out / "uncertainty.parquet").set_index("metric")
    assert unc.loc["threshold@t=0.75", ["lo", "hi"]].tolist() == [0.75, 0.75]
    assert "threshold@fmr=0.25" not in unc.index
    lines = (out / "report.md").read_text().splitlines()
    assert "(no soft attributes configured)" in lines
    soft = read_parquet(out / "soft_accuracy.parquet")
    assert len(soft) == 0 and soft.columns.tolist() == [
        "attribute", "category", "threshold_name", "threshold", "prob_accuracy", "prob_mass",
        "hard_accuracy", "hard_n"]
    # more hard pairs asked than there are: every scored pair, the one without a feature
    # (an impostor at -inf) not among them
    hard = read_parquet(out / "hard_pairs.parquet")
    assert hard["kind"].value_counts().to_dict() == {"impostor": 7, "genuine": 6}
    assert np.isfinite(hard["score"]).all()
    # the same seed and thresholds: the same identity draws, replicate by replicate
    first = read_parquet(fixed / "bootstrap.parquet")
    again = read_parquet(out / "bootstrap.parquet")
    assert again["accuracy"].tolist() == first["accuracy"].tolist()
    assert again["accuracy"].nunique() > 1


def test_run_with_thresholds_fixed_in_config(tmp_path):
    """Every figure of the run whose thresholds are fixed in config (0.5, 0.75)."""
    _inputs(tmp_path)
    s, out, messages = _run(tmp_path, "fixed", CFG)
    _check_summary_counts_accuracy_and_bias_by_hand(s, out, messages)
    _check_every_output_written_with_provenance_and_csv_twins(s, out, messages)
    _check_thresholds_and_group_rates_by_hand(s, out, messages)
    _check_failures_are_logged_per_group(s, out, messages)
    _check_bootstrap_replicates_and_estimates(s, out, messages)
    _check_hardest_pairs_of_each_kind(s, out, messages)
    _check_soft_accuracy_by_hand(s, out, messages)
    _check_report_sentences_and_sections(s, out, messages)


def test_bias_defaults_ten_pairs_a_cell_and_one_group_a_combination():
    """``_bias`` with an empty config: a cell of exactly 10 pairs of a sign takes part
    (``min_pairs`` 10) and a combination of one group does too (``min_groups`` 1)."""
    rng = np.random.default_rng(0)
    cells = [("a", "female"), ("a", "male"), ("b", "female")]
    rows = [{"combo": c, "group": g, "label": y, "score": rng.normal(0.6 * y, 0.1),
             "in_cells": True, "in_reference": True}
            for c, g in cells for y in (1, 0) for _ in range(10)]
    res, groups, _ = _bias(pd.DataFrame(rows), [], {})
    assert res.n_combos_used == {"+": 2, "-": 2}
    assert set(groups["group"]) == {"female", "male"}
    assert "n_most_discriminated_pos" in groups.columns  # the A7/A8 table, not the raw one
    nine = pd.DataFrame(rows).drop(index=[40])  # b's (female) genuine pairs: 9, too few
    res9, _, _ = _bias(nine, [], {})
    assert res9.n_combos_used == {"+": 1, "-": 2}


def test_annotated_pairs_sync_labels_errors_and_bad_labels(tmp_path):
    """The config's ``sync`` reaches the labels (``none``: each image its own gender, so
    f3's genuine pair is mixed), a text label that is no number is a ``bad_label`` row,
    not an error, and a table without identities or a config without protected
    attributes stops with a message saying which."""
    attrs, pairs = _inputs(tmp_path)
    attrs.loc[attrs["image_id"] == "f3/1.jpg", "label_male"] = 0.9
    attrs = pd.concat([attrs, pd.DataFrame([{"image_id": "f3/2.jpg", "identity": "f3",
                                             "label_male": 0.0, "label_glasses": 0.0}])])
    write_parquet(attrs, tmp_path / "attributes.parquet")
    pairs["label"] = pairs["label"].astype(str)
    pairs.loc[1, "label"] = "?"
    write_parquet(pairs, tmp_path / "scores.parquet")
    args = (tmp_path / "scores.parquet", tmp_path / "attributes.parquet")
    ann, _, legitimate = _annotated_pairs(*args, {**CFG, "sync": "none"})
    assert [s.name for s in legitimate] == ["glasses"]
    assert ann.loc[2, "status"] == "mixed" and ann.loc[1, "status"] == "bad_label"
    assert np.isnan(ann.loc[1, "label"]) and ann.loc[0, "label"] == 1
    assert ann["score"].dtype == np.float64
    voted, _, _ = _annotated_pairs(*args, CFG)  # majority: f3 is female (two of three)
    assert voted.loc[2, "status"] == "ok" and voted.loc[2, "group"] == "female"
    with pytest.raises(ValueError, match=r"^fairness\.protected names no attribute; the "
                                         r"bias metric needs groups$"):
        _annotated_pairs(*args, {**CFG, "protected": {}})
    write_parquet(pairs.drop(columns=["identity_b"]), tmp_path / "no_b.parquet")
    with pytest.raises(ValueError, match="no_b.parquet lacks identity_a/identity_b"):
        _annotated_pairs(tmp_path / "no_b.parquet", args[1], CFG)


def _cells_frame(n=10):
    """Valid pairs in three cells of ``n`` genuine and ``n`` impostor pairs: combination
    ``a`` holds both genders, ``b`` women only; five identities per gender."""
    rng = np.random.default_rng(1)
    rows = []
    for combo, group in (("a", "female"), ("a", "male"), ("b", "female")):
        for y in (1, 0):
            for i in range(n):
                rows.append({"combo": combo, "group": group, "label": y,
                             "score": rng.normal(0.6 * y + 0.1 * (group == "male"), 0.15),
                             "in_cells": True, "in_reference": True, "status": "ok",
                             "identity_a": f"{group}{i % 5}",
                             "identity_b": f"{group}{(i + 1 - y) % 5}"})
    return pd.DataFrame(rows)


def _expected(valid, thr, **kw):
    """facecast's bootstrap called with every setting spelled out."""
    args = {"n_boot": 1000, "alpha": 0.5, "min_pairs": 10, "min_groups": 1,
            "confidence": 0.95, "interval": "auto", "jackknife_blocks": 100, **kw}
    return bootstrap(valid, seed=5, targets=[], fixed_thresholds=thr["threshold"].tolist(),
                     **args)


def test_uncertainty_passes_every_setting_of_the_config_to_the_bootstrap():
    valid = _cells_frame()
    cfg = {"thresholds": {"fixed": [0.3]}, "n_boot": 7, "alpha": 0.2, "min_pairs": 11,
           "min_groups": 2, "confidence": 0.8, "bootstrap_interval": "percentile",
           "few_false_matches": 2}
    thr, _ = _thresholds_and_rates(valid, cfg, None)
    reps, unc = _uncertainty(valid, thr, cfg, None, 5)
    want_reps, want = _expected(valid, thr, n_boot=7, alpha=0.2, min_pairs=11, min_groups=2,
                                confidence=0.8, interval="percentile")
    pd.testing.assert_frame_equal(reps, want_reps)
    pd.testing.assert_frame_equal(unc.drop(columns="note"), want.drop(columns="note"))
    assert unc["interval"].iloc[0] == "percentile (7 replicates)"
    # every cell has 10 pairs: none reaches min_pairs 11, so Bias has no value
    assert np.isnan(unc.set_index("metric").loc["bias_pos", "estimate"])
    # 0.3 accepts 2 impostors: not fewer than few_false_matches 2, so no note (the
    # default 10 would note every figure at the threshold)
    assert int(thr["false_matches"].iloc[0]) == 2 and (unc["note"] == "").all()
    jack = _uncertainty(valid, thr, {**cfg, "bootstrap_interval": "bca",
                                     "jackknife_blocks": 3}, None, 5)[1]
    assert jack["interval"].iloc[0] == "bca (7 replicates, jackknife over 3 identity blocks)"


def test_uncertainty_defaults_a_thousand_replicates_and_ten_false_matches():
    valid = _cells_frame()
    cfg = {"thresholds": {"fixed": [0.3]}}
    thr, _ = _thresholds_and_rates(valid, cfg, None)
    thr["false_matches"] = 10  # on the bound: "fewer than 10" is not met
    reps, unc = _uncertainty(valid, thr, cfg, None, 5)
    want_reps, want = _expected(valid, thr)
    assert len(reps) == 1000
    pd.testing.assert_frame_equal(reps, want_reps)
    pd.testing.assert_frame_equal(unc.drop(columns="note"), want.drop(columns="note"))
    # cells of exactly 10 pairs count (min_pairs 10), combination b of one group too
    assert np.isfinite(unc.set_index("metric").loc["bias_pos", "estimate"])
    assert not unc["note"].str.contains("rests on").any()
    thr["false_matches"] = 9
    assert unc["metric"][_uncertainty(valid, thr, cfg, None, 5)[1]["note"].str.contains(
        "rests on 9 false matches")].tolist() == ["threshold@t=0.3", "tar@t=0.3", "fdr@t=0.3",
                                                  "garbe@t=0.3"]


def test_uncertainty_resets_target_fmr_thresholds_in_every_replicate():
    """A threshold at a target FMR is set again in each replicate (its interval has a
    width); one fixed in config is not."""
    valid = _cells_frame()
    cfg = {"thresholds": {"fmr_targets": [0.1]}, "n_boot": 20}
    thr, _ = _thresholds_and_rates(valid, cfg, None)
    unc = _uncertainty(valid, thr, cfg, None, 5)[1].set_index("metric")
    assert unc.loc["threshold@fmr=0.1", "hi"] > unc.loc["threshold@fmr=0.1", "lo"]
    want = bootstrap(valid, n_boot=20, seed=5, targets=[0.1], fixed_thresholds=None,
                     min_pairs=10, min_groups=1)[1].set_index("metric")
    assert unc.loc["threshold@fmr=0.1", "lo"] == want.loc["threshold@fmr=0.1", "lo"]


def test_hard_pairs_figure_gets_the_tiles_of_the_pairs_shown(tmp_path, monkeypatch):
    """``_plot_hard_pairs`` asks for the tiles of the shown pairs (image a's, then image
    b's), handing over the faces shards, the dataset root and only the manifest rows of
    those images (all rows when no pair is shown, none without a manifest)."""
    import facecast.fairness.assess as assess

    calls = {}
    monkeypatch.setattr(assess, "load_tiles", lambda ids, faces, manifest, root: calls.update(
        ids=ids, faces=faces, manifest=manifest, root=root) or {"tile": 1})
    monkeypatch.setattr(assess, "hard_pairs_grid", lambda hard, tiles, path: calls.update(
        grid=(len(hard), tiles, path)))
    write_parquet(pd.DataFrame({"image_id": ["a", "b", "c", "d"], "path": ["a.jpg", "b.jpg",
                                                                           "c.jpg", "d.jpg"],
                                "other": [1, 2, 3, 4]}), tmp_path / "manifest.parquet")
    hard = pd.DataFrame({"image_a": ["c", "a"], "image_b": ["b", "c"]})
    assess._plot_hard_pairs(hard, tmp_path / "h.png", ["f.parquet"],
                            tmp_path / "manifest.parquet", tmp_path)
    assert calls["ids"] == ["c", "a", "b", "c"] and calls["faces"] == ["f.parquet"]
    assert calls["root"] == tmp_path
    assert calls["manifest"].columns.tolist() == ["image_id", "path"]
    assert sorted(calls["manifest"]["image_id"]) == ["a", "b", "c"]
    assert calls["grid"] == (2, {"tile": 1}, tmp_path / "h.png")
    assess._plot_hard_pairs(hard.iloc[:0], tmp_path / "h.png", [],
                            tmp_path / "manifest.parquet", tmp_path)
    assert sorted(calls["manifest"]["image_id"]) == ["a", "b", "c", "d"]
    assess._plot_hard_pairs(hard, tmp_path / "h.png", [], None, None)
    assert calls["manifest"] is None and calls["root"] is None


def test_rate_figures_sweep_the_reference_pairs(tmp_path, monkeypatch):
    """``_plot_rates`` draws both figures from one sweep over the reference pairs'
    thresholds, the groups of the rates (mixed pairs in none), with the config's alpha
    (default 0.5), into the output folder under the given title."""
    import facecast.fairness.assess as assess
    from facecast.fairness.threshold import sweep_rates

    calls = {}
    monkeypatch.setattr(assess, "plot_rates_vs_threshold", lambda sweep, thr, path, title:
                        calls.update(rates=(sweep, thr, path, title)))
    monkeypatch.setattr(assess, "plot_fdr_vs_fmr", lambda sweep, alpha, path, title:
                        calls.update(fdr=(sweep, alpha, path, title)))
    valid = pd.DataFrame({"score": [0.9, 0.2, 0.8, 0.4, 0.7, 0.1, 0.95],
                          "label": [1, 0, 1, 0, 1, 0, 1],
                          "group": ["f", "f", "m", "m", "mixed", "mixed", "f"],
                          "status": ["ok", "ok", "ok", "ok", "mixed", "mixed", "ok"],
                          "in_reference": [True] * 6 + [False]})
    thr = pd.DataFrame({"name": ["t"], "threshold": [0.5]})
    assess._plot_rates(valid, thr, {"alpha": 0.2}, tmp_path, "m on p")
    sweep, got_thr, path, title = calls["rates"]
    want = sweep_rates(valid["score"].to_numpy(), valid["label"].to_numpy(bool),
                       np.array(["f", "f", "m", "m", None, None, "f"], dtype=object),
                       assess.sweep_thresholds(valid.iloc[:6]))
    pd.testing.assert_frame_equal(sweep, want)
    assert got_thr is thr and path == tmp_path / "rates_vs_threshold.png" and title == "m on p"
    assert calls["fdr"][1:] == (0.2, tmp_path / "fdr_vs_fmr.png", "m on p")
    assert calls["fdr"][0] is sweep
    assess._plot_rates(valid, thr, {}, tmp_path, "m on p")
    assert calls["fdr"][1] == 0.5


def test_one_group_reads_na_naming_it(tmp_path):
    """Bins that put everyone in one group: no figure comparing groups has a value - the
    summary's are NaN with the reason, and the report's tables say so."""
    _inputs(tmp_path)
    one = {**CFG, "protected": {"gender": {"column": "label_male", "bins": [2.0],
                                           "labels": ["anyone", "nobody"]}}}
    s, out, _ = _run(tmp_path, "one", one)
    assert s["fairness_note"] == "n/a (1 group: anyone)"
    assert np.isnan(s["bias_pos"]) and np.isnan(s["fdr@t=0.5"])
    lines = (out / "report.md").read_text().splitlines()
    # the thresholds table's row: its seven group-comparing columns
    thr = [line for line in lines if line.startswith("| t=0.5 | 0.5 | fixed in config |")]
    assert len(thr) == 1 and thr[0].count("n/a (1 group: anyone)") == 7
    at = lines.index("## Average discrimination per group (Table A7) and times most "
                     "discriminated (A8)")
    assert lines[at + 4] == ("| anyone | n/a (1 group: anyone) | n/a (1 group: anyone) | n/a "
                             "(1 group: anyone) | n/a (1 group: anyone) | 0 | 0 |")


def test_no_pair_inside_a_group_is_a_clear_error(tmp_path):
    """Pairs none of which has both images in one group: a message naming the
    attributes, the tables and how many images have a group (before, numpy's "zero-size
    array to reduction operation fmax" from the rates of no group)."""
    attrs, _ = _inputs(tmp_path)
    attrs["label_male"] = np.nan
    write_parquet(attrs, tmp_path / "attributes.parquet")
    two = {**CFG, "protected": {**PROTECTED, "sex": PROTECTED["gender"]}}
    with pytest.raises(ValueError, match=r"scores.parquet: none of its 14 pairs has two "
                                         r"images of one group under fairness.protected "
                                         r"\(gender: label_male, sex: label_male\); 0 of "
                                         r"their 12 images have a group in \S*attributes."
                                         r"parquet. Fairness compares groups through pairs "
                                         r"inside a group.$"):
        _run(tmp_path, "none", two)
    # each image its own label (sync none), only the first images labelled, so every
    # pair's image b has no group: the same
    attrs["label_male"] = np.where(attrs["image_id"].str.endswith("/0.jpg"), 1.0, np.nan)
    write_parquet(attrs, tmp_path / "attributes.parquet")
    with pytest.raises(ValueError, match=r"none of its 14 pairs .* 6 of their 12 images"):
        _run(tmp_path, "half", {**CFG, "sync": "none"})
    # every pair mixed (first images male, second female): no group has a pair either
    attrs["label_male"] = np.where(attrs["image_id"].str.endswith("/0.jpg"), 1.0, 0.0)
    write_parquet(attrs, tmp_path / "attributes.parquet")
    with pytest.raises(ValueError, match=r"none of its 14 pairs .* 12 of their 12 images"):
        _run(tmp_path, "mixed", {**CFG, "sync": "none"})


def test_uncertainty_jackknife_default_is_a_hundred_identity_blocks():
    """BCa's acceleration comes from a delete-one-block jackknife over at most 100
    identity blocks by default: 120 identities make 100 blocks."""
    valid = _cells_frame()
    valid["identity_a"] = [f"a{i}" for i in range(len(valid))]  # 60 pairs, 120 people
    valid["identity_b"] = [f"b{i}" for i in range(len(valid))]
    cfg = {"thresholds": {"fixed": [0.3]}, "n_boot": 3}
    thr, _ = _thresholds_and_rates(valid, cfg, None)
    unc = _uncertainty(valid, thr, cfg, None, 5)[1].set_index("metric")
    assert unc.loc["accuracy", "n_identities"] == 120
    assert unc.loc["accuracy", "interval"] == ("bca (3 replicates, jackknife over 100 identity "
                                               "blocks)")
