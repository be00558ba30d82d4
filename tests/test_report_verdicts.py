"""The generated opening sentences of the report pages (issues #47 item 8, #50 item 4):
each stage's ``verdict_lines`` on small frames, every sentence pinned, and the helpers
that format figures and place the sentences under a page's title."""

from __future__ import annotations

import numpy as np
import pandas as pd

from facecast.fairness.groups import parse_specs
from facecast.fairness.verdict import bin_legend, rate_extremes
from facecast.fairness.verdict import verdict_lines as fairness_lines
from facecast.labels.estimators_verdict import verdict_lines as estimator_lines
from facecast.mitigation.verdict import verdict_lines as mitigation_lines
from facecast.quality.verdict import verdict_lines as quality_lines
from facecast.report.verdict import interval_text, verdict_markdown, with_verdict
from facecast.slices.verdict import verdict_lines as slices_lines

FAIR_CFG = {
    "protected": {"gender": {"column": "label_male", "bins": [0.5], "labels": ["female", "male"]},
                  "skin": {"column": "fitzpatrick_dark", "bins": [0.5],
                           "labels": ["light", "dark"]}},
    "legitimate": {"age": {"column": "label_age", "bins": [35, 65], "labels": ["A0", "A1", "A2"]},
                   "pose": {"column": "label_yaw", "abs": True, "bins": [15],
                            "labels": ["P0", "P1"]},
                   "race": {"column": "label_race", "values": {0: "white", 1: "black"}}},
    "confidence": 0.9}


def fair_frames():
    thr = pd.DataFrame({"name": ["fmr=0.001", "fmr=0.0001"], "threshold": [0.43217, 0.6],
                        "target_fmr": [1e-3, 1e-4],
                        "source": ["all impostor pairs of this protocol"] * 2,
                        "resolvable": [True, False], "threshold_n_impostor": [5000, 5000]})
    rates = pd.DataFrame({
        "threshold_name": ["fmr=0.001"] * 3 + ["fmr=0.0001"],
        "group": ["female_dark", "male_light", "female_light", "female_dark"],
        "fnmr": [0.979, 0.12, 0.05, 0.99], "fnmr_lo": [0.95, 0.1, np.nan, 0.9],
        "fnmr_hi": [0.99, 0.15, np.nan, 1.0],
        "fmr": [0.002, 0.0, "n/a (0 false matches)", 0.0],
        "fmr_lo": [0.001, 0.0, np.nan, 0.0], "fmr_hi": [0.004, 0.003, np.nan, 0.0]})
    summary = {"model": "dlib", "bias_pos": 0.21034, "bias_neg": 0.0502, "n_groups": 3}
    return summary, thr, rates


def est_table():
    rows = [("age_gender", "gender", "all", "all", 0.9, 0.88, 0.92, np.nan),
            ("age_gender", "gender", "race", "Black", 0.7, 0.6, 0.78, 0.001),
            ("age_gender", "gender", "race", "White", 0.97, 0.95, 0.98, 0.2),
            ("age_gender", "gender", "race x gender", "Black / Female", 0.5, 0.4, 0.6, 0.001),
            ("age_gender", "gender", "age", "0-2", np.nan, np.nan, np.nan, np.nan),
            ("fairface", "race", "all", "all", 0.6, 0.55, 0.65, np.nan),
            ("fairface", "race", "race", "Black", 0.58, 0.5, 0.66, 0.9),
            ("fairface", "race", "race", "White", 0.62, np.nan, np.nan, 0.9),
            ("lonely", "age", "all", "all", 0.5, 0.4, 0.6, np.nan),
            ("lonely", "age", "race", "Black", 0.5, 0.4, 0.6, np.nan),
            ("detector", "face", "all", "all", 0.95, 0.94, 0.96, np.nan),
            ("detector", "face", "gender", "Female", 0.93, 0.9, 0.95, 0.04),
            ("detector", "face", "gender", "Male", 0.97, 0.95, 0.98, 0.04)]
    return pd.DataFrame(rows, columns=["estimator", "attribute", "group_by", "group", "accuracy",
                                       "accuracy_lo", "accuracy_hi", "p_adjusted"])


def mit_table():
    return pd.DataFrame({
        "method": ["raw", "fsn", "oracle_cal", "arcface_only"],
        "status": ["ok", "ok", "ok", "n/a"],
        "fnmr_g0": [0.2, 0.15, 0.1, np.nan], "fnmr_g0_lo": [0.1, 0.1, 0.05, np.nan],
        "fnmr_g0_hi": [0.3, 0.2, 0.15, np.nan],
        "fnmr_g1": [0.5, 0.3, 0.25, np.nan], "fnmr_g1_lo": [0.4, 0.2, 0.2, np.nan],
        "fnmr_g1_hi": [0.6, 0.4, 0.3, np.nan],
        "fmr_g0": [0.001, 0.002, 0.001, np.nan], "fmr_g0_lo": [0.0, 0.001, 0.0, np.nan],
        "fmr_g0_hi": [0.002, 0.003, 0.002, np.nan],
        "fmr_g1": [0.004, 0.002, 0.001, np.nan], "fmr_g1_lo": [np.nan, 0.001, 0.0, np.nan],
        "fmr_g1_hi": [np.nan, 0.003, 0.002, np.nan],
        "fnmr_max_min": [2.5, 2.0, 2.5, np.nan], "fnmr_max_min_lo": [2.0, 1.5, 2.0, np.nan],
        "fnmr_max_min_diff_lo": [np.nan, -1.0, -0.5, np.nan],
        "fnmr_max_min_verdict": [np.nan, "lower", "not significant", "n/a (no embeddings)"],
        "bias_pos": [0.2682, 0.1, 0.05, np.nan]})


def slice_inputs():
    info = {"columns": ["label_male", "label_age", "blur"], "n_pairs": 4144,
            "threshold": {"policy": "eer", "value": 0.001, "threshold": 0.308841, "why": ""},
            "by_error": {"fnmr": {}, "fmr": {}}}
    findings = pd.DataFrame({
        "error_type": ["fnmr", "fnmr"], "finding": [1, 2],
        "slice": ["label_male = 0 and label_age in rank [0.75, 1]", "blur in rank [0.9, 1]"],
        "size": [84, 40], "n_identities": [56, 30], "error_rate": [0.381, 0.2],
        "error_lo": [0.237, 0.1], "error_hi": [0.534, 0.3], "rest_rate": [0.0512, 0.06],
        "q": [8.4e-05, 0.01]})
    return info, findings


def quality_frames():
    bias = pd.DataFrame({
        "measure": ["sharp", "sharp", "bright", "bright", "sharp"],
        "attribute": ["group", "group", "group", "group", "gender"],
        "group": ["female_dark", "male_light", "female_dark", "male_light", "female"],
        "status": ["ok"] * 5, "significant": [True, False, True, True, True],
        "difference": [-1.29, 0.1, -0.4, 0.3, -2.0], "ci_lo": [-1.41, -0.1, -0.6, 0.1, -2.2],
        "ci_hi": [-1.18, 0.3, -0.2, 0.5, -1.8], "p_adjusted": [7.2e-107, 0.4, 0.01, 0.02, 1e-9]})
    rejection = pd.DataFrame({
        "measure": ["sharp"] * 6, "reject": [0.1, 0.1, 0.1, 0.2, 0.2, 0.2],
        "attribute": ["all", "group", "group", "all", "group", "group"],
        "group": ["all", "female_dark", "male_light", "all", "female_dark", "male_light"],
        "status": ["ok"] * 6, "discarded_share": [0.1, 0.3, 0.05, 0.2, 0.502, 0.1],
        "fnmr_before": [0.1, 0.287, 0.0495, 0.1, 0.287, 0.0495],
        "fnmr_after": [0.09, 0.25, 0.049, 0.08, 0.193, 0.048]})
    return bias, rejection


OTHERS = ("slices set theirs at the EER of the pairs they search (slices.threshold) and "
          "mitigation at its own FMR (mitigation.fmr) on its evaluated split, so one group's "
          "rates differ between those pages")


def test_figures_read_with_their_interval_or_say_they_have_none():
    assert interval_text(0.97912, 0.951, 0.9923) == "0.979, 95 % CI 0.951 to 0.992"
    assert interval_text(0.5, np.nan, 0.6, 0.9) == "0.5, no interval"
    assert interval_text("n/a (262 impostors)") == "n/a (262 impostors)"
    assert interval_text(np.inf, 0, 1) == "n/a"
    assert verdict_markdown([]) == ""
    md = verdict_markdown(["A b.", "C d."], width=30)
    assert md == "**In short** (generated from this page's tables): A b.\n\nC d.\n"
    assert with_verdict("# T\n\nbody", ["S."]) == (
        "# T\n\n**In short** (generated from this page's tables): S.\n\n\nbody")
    assert with_verdict("no title", ["S."]).startswith("**In short**")


def test_bin_legend_reads_every_kind_of_spec():
    age, pose, race = parse_specs(FAIR_CFG["legitimate"])
    assert bin_legend(age) == "label_age: A0 < 35 ≤ A1 < 65 ≤ A2"
    assert bin_legend(pose) == "|label_yaw|: P0 < 15 ≤ P1"
    assert bin_legend(race) == "label_race: 0 = white, 1 = black"
    assert bin_legend(parse_specs({"c": {"column": "x"}})[0]) == "x: its values as written"


def test_fairness_verdict_from_its_tables():
    """Issue 47.8's example sentence, from the table: the worst and best group's FNMR and
    FMR at the first threshold with their intervals (a missing one said), the groups'
    source and bins, the threshold against the other pages', the bias."""
    summary, thr, rates = fair_frames()
    assert fairness_lines(summary, thr, rates, FAIR_CFG) == [
        "Groups: gender × skin (3 with pairs), from the dataset's labels and an estimator's "
        "columns (label_male: female < 0.5 ≤ male; fitzpatrick_dark: light < 0.5 ≤ dark).",
        "Legitimate bins (a pair's x_L joins both images' bins, A0-A1): label_age: A0 < 35 ≤ "
        "A1 < 65 ≤ A2; |label_yaw|: P0 < 15 ≤ P1; label_race: 0 = white, 1 = black.",
        "Threshold: FMR 0.001 over all impostor pairs of this protocol (t = 0.4322); "
        + OTHERS + ".",
        "dlib's FNMR at FMR 0.001 is highest for female_dark (0.979, 90 % CI 0.95 to 0.99) "
        "and lowest for female_light (0.05, no interval); its FMR is highest for female_dark "
        "(0.002, 90 % CI 0.001 to 0.004) and lowest for male_light (0, 90 % CI 0 to 0.003).",
        "Bias+ 0.2103 and Bias- 0.0502 (FairFace 2020: the spread of the groups' AUC gaps, "
        "0 = fair); what mitigation buys on these gaps is on the mitigation page."]
    unresolved = fairness_lines(summary, thr.iloc[[1]].reset_index(drop=True), rates, {})
    assert unresolved[:3] == [
        "No protected attribute is configured: every pair is in one group.",
        "No legitimate attribute: all pairs form one combination x_L.",
        "Threshold: FMR 0.0001 over all impostor pairs of this protocol (t = 0.6); 5000 "
        "impostors cannot resolve it, so its per-group rates read n/a; " + OTHERS + "."]
    assert len(unresolved) == 4 and unresolved[3].startswith("Bias+")  # no rates sentence
    one = rates[rates["group"] == "male_light"]
    assert rate_extremes(one, "fnmr", 0.95) == ("male_light (0.12, 95 % CI 0.1 to 0.15)", "")
    assert rate_extremes(one.iloc[:0], "fnmr", 0.95) is None


def test_estimator_verdict_names_the_widest_gaps_and_the_detector():
    assert estimator_lines(est_table(), 0.05, 0.95, top=1) == [
        "age_gender's gender accuracy overall is 0.9, 95 % CI 0.88 to 0.92; it is lowest for "
        "race Black (0.7, 95 % CI 0.6 to 0.78; differs from the rest after Holm, p 0.001) and "
        "highest for race White (0.97, 95 % CI 0.95 to 0.98).",
        "2 more estimate(s) in the tables below (the widest gaps between groups come first "
        "here).",
        "The detector's share of faces found overall is 0.95, 95 % CI 0.94 to 0.96; it is "
        "lowest for gender Female (0.93, 95 % CI 0.9 to 0.95; differs from the rest after "
        "Holm, p 0.04) and highest for gender Male (0.97, 95 % CI 0.95 to 0.98; differs from "
        "the rest after Holm, p 0.04)."]
    lines = estimator_lines(est_table(), 0.05, 0.95)
    assert lines[1] == ("fairface's race accuracy overall is 0.6, 95 % CI 0.55 to 0.65; it is "
                        "lowest for race Black (0.58, 95 % CI 0.5 to 0.66) and highest for "
                        "race White (0.62, no interval).")
    assert lines[2] == ("lonely's age accuracy overall is 0.5, 95 % CI 0.4 to 0.6; fewer than "
                        "two groups have a figure, no comparison.")


def test_mitigation_verdict_says_the_threshold_the_gap_the_words_and_the_oracle():
    lines = mitigation_lines(mit_table(), {"fmr": 1e-3})
    assert lines == [
        "Groups: g0, g1, the fairness groups (fairness.protected; their source and bins are "
        "listed on the fairness page).",
        "Threshold: one per method at FMR 0.001 on the evaluated split's impostors; the "
        "fairness page uses all pairs of the protocol at its own FMR, so raw's Bias+ and group "
        "rates here (another split, another threshold) differ from it.",
        "Before mitigation (raw), FNMR is highest for g1 (0.5, 95 % CI 0.4 to 0.6) and lowest "
        "for g0 (0.2, 95 % CI 0.1 to 0.3); FMR is highest for g1 (0.004, no interval) and "
        "lowest for g0 (0.001, 95 % CI 0 to 0.002).",
        "On that gap, fsn does most: FNMR max/min 2.5 (raw) -> 2 (significantly lower after "
        "Holm); Bias+ 0.2682 -> 0.1.",
        "Words: AUC is the area under the ROC of the evaluated pairs; accuracy % is the "
        "10-fold best-threshold accuracy; a * or 'significant' is after Holm across the whole "
        "table.",
        "oracle_cal needs each test pair's group labels at test time: a bound on what "
        "calibration per group can do, not a deployable method."]
    raw_only = mitigation_lines(mit_table().iloc[[0, 3]], {"fmr": 1e-2})
    assert raw_only[1].startswith("Threshold: one per method at FMR 0.01 ")
    assert raw_only[3] == ("On the FNMR gap: FNMR max/min is n/a for every method (see 'Not a "
                           "number' below).")
    assert len(raw_only) == 5  # no oracle_cal, no oracle sentence


def test_slices_verdict_names_what_its_groups_are_and_the_worst_finding():
    info, findings = slice_inputs()
    assert slices_lines(info, findings) == [
        "Groups here are slices, not the fairness groups: conjunctions of attribute predicates "
        "over label_male, label_age, blur (a class per value of a categorical column, "
        "percentile-rank bins of a continuous one; each slice names its own bins).",
        "Threshold: EER: t = 0.308841, one over all 4144 searched pairs; the fairness page "
        "sets its own at a target FMR and mitigation at mitigation.fmr on its evaluated split, "
        "so a group's rates differ between the pages.",
        "Worst FNMR finding: label_male = 0 and label_age in rank [0.75, 1] (84 genuine pairs, "
        "56 identities) at 0.381, 95 % CI 0.237 to 0.534, against 0.0512 for the rest of the "
        "pairs (no interval), q 8.4e-05 (2 FNMR finding(s) in all).",
        "No FMR finding: no slice is significant at the false-discovery rate.",
        "What mitigation buys on these slices is on the slices pages of the mitigated models "
        "(<model>+<method>), where the mitigation stage runs."]


def test_quality_verdict_from_the_bias_and_rejection_tables():
    bias, rejection = quality_frames()
    assert quality_lines(bias, rejection, 0.91944, FAIR_CFG, 0.9) == [
        "Groups: gender × skin (2 with enough identities), from the dataset's labels and an "
        "estimator's columns (label_male: female < 0.5 ≤ male; fitzpatrick_dark: light < 0.5 "
        "≤ dark).",
        "Threshold: tau = 0.9194, the EDC's one threshold (quality.threshold) on this "
        "protocol's comparisons; the fairness page sets its own at a target FMR, slices theirs "
        "at the EER and mitigation at mitigation.fmr on its split, so a group's FNMR differs "
        "between the pages.",
        "At tau, FNMR is highest for female_dark (0.287) and lowest for male_light (0.0495), "
        "no interval (the rejection table has none); FMR per group is not on this page "
        "(rejection judges mated pairs only).",
        "The largest quality gap: female_dark has lower sharp than the rest (standardised "
        "difference -1.29, 90 % CI -1.41 to -1.18; BH-adjusted p 7.2e-107).",
        "Rejecting the lowest 20 % of images by sharp discards 50.2 % of female_dark's images "
        "against 20 % overall; female_dark's FNMR goes 0.287 -> 0.193.",
        "What mitigation buys on the FNMR gap is on the mitigation page."]
    flat = quality_lines(bias.assign(significant=False), rejection, 0.5)
    assert flat[0] == "Groups: 2 protected groups (fairness.protected)."
    assert flat[3] == ("No group's quality differs significantly from the rest's "
                       "(Benjamini-Hochberg over the table).")
    assert len(flat) == 5  # no rejection sentence without a gap's measure
