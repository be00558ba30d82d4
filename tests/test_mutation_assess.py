"""Issue 51: survivors of `make mutate MODULES=fairness.assess` in its helpers - the
global-threshold table of each branch (target FMRs, the default targets, fixed values,
reused from a dev run with and without its counts) counted by hand, the unresolvable
warning, the config's attribute columns, the plot sweep, and which pairs count, are valid
and have a group for the rates."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd
import pytest

from facecast.fairness.assess import (
    _counted,
    _needed_columns,
    _rate_groups,
    _read_scores,
    _scores_labels,
    _thresholds,
    _thresholds_and_rates,
    _valid_pairs,
    load_attributes,
    sweep_thresholds,
    write_frame,
)
from facecast.fairness.threshold import binomial_interval
from facecast.io.parquet_io import read_provenance

IMP = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
GEN = [0.35, 0.65, 0.95, 0.5]


def _ann():
    """Ten reference impostors 0.1 .. 1.0, four reference genuines; one impostor (5.0) and
    one genuine (-1.0) outside the reference set, which no threshold or rate may see."""
    return pd.DataFrame({
        "score": [*IMP, *GEN, 5.0, -1.0],
        "label": [0] * 10 + [1] * 4 + [0, 1],
        "in_reference": [True] * 14 + [False, False]})


def _check_counts(thr):
    assert thr["n_impostor"].tolist() == [10] * len(thr)
    assert thr["n_genuine"].tolist() == [4] * len(thr)


def test_thresholds_at_target_fmrs_by_hand():
    """FMR 0.2 of 10 impostors allows 2: just above the third highest (0.8), reaching FMR
    0.2 (0.9, 1.0) and TAR 1/4 (0.95); FMR 0.1 allows 1: just above 0.9."""
    thr = _thresholds(_ann(), {"thresholds": {"fmr_targets": [0.2, 0.1]}}, None)
    assert thr.columns.tolist() == ["name", "threshold", "target_fmr", "source", "fmr_reached",
                                    "false_matches", "n_impostor", "tar", "n_genuine",
                                    "resolvable", "threshold_n_impostor"]
    assert thr["name"].tolist() == ["fmr=0.2", "fmr=0.1"]
    assert thr["threshold"].tolist() == [np.nextafter(0.8, 1), np.nextafter(0.9, 1)]
    assert thr["target_fmr"].tolist() == [0.2, 0.1]
    assert thr["source"].tolist() == ["all impostor pairs of this protocol"] * 2
    assert thr["fmr_reached"].tolist() == [0.2, 0.1]
    assert thr["false_matches"].tolist() == [2, 1]
    assert thr["tar"].tolist() == [0.25, 0.25]
    _check_counts(thr)
    assert thr["resolvable"].tolist() == [True, True] and thr["resolvable"].dtype == bool
    assert thr["threshold_n_impostor"].tolist() == [10, 10]
    assert thr["threshold_n_impostor"].dtype == np.int64


def test_default_targets_are_1e3_and_1e4_and_unresolvable_ones_warn(caplog):
    """Without ``fmr_targets``: 1e-3 and 1e-4, neither resolvable by 10 impostors (they need
    1000 and 10000); each says so in the log. Both allow no impostor: just above 1.0."""
    with caplog.at_level(logging.WARNING, logger="facecast.fairness.assess"):
        thr = _thresholds(_ann(), {}, None)
    assert thr["name"].tolist() == ["fmr=0.001", "fmr=0.0001"]
    assert thr["target_fmr"].tolist() == [1e-3, 1e-4]
    assert thr["threshold"].tolist() == [np.nextafter(1.0, 2)] * 2
    assert thr["fmr_reached"].tolist() == [0.0, 0.0] and thr["tar"].tolist() == [0.0, 0.0]
    assert thr["resolvable"].tolist() == [False, False]
    assert [r.getMessage() for r in caplog.records] == [
        "threshold fmr=0.001 needs at least 1000 impostor pairs, it rests on 10: flagged "
        "unresolvable, shown as n/a",
        "threshold fmr=0.0001 needs at least 10000 impostor pairs, it rests on 10: flagged "
        "unresolvable, shown as n/a"]


def test_fixed_thresholds_count_ties_as_accepted():
    """Fixed 0.5: impostors 0.5 .. 1.0 (6 of 10, the tie accepted), genuines 0.65, 0.95,
    0.5 (3 of 4); fixed 0.95: 1.0 and 0.95. No target: NaN, resolvable."""
    thr = _thresholds(_ann(), {"thresholds": {"fixed": [0.5, 0.95],
                                              "fmr_targets": [0.2]}}, None)
    assert thr["name"].tolist() == ["t=0.5", "t=0.95"]
    assert thr["threshold"].tolist() == [0.5, 0.95]
    assert thr["source"].tolist() == ["fixed in config"] * 2
    assert thr["target_fmr"].isna().all() and thr["target_fmr"].dtype == np.float64
    assert thr["fmr_reached"].tolist() == [0.6, 0.1]
    assert thr["false_matches"].tolist() == [6, 1]
    assert thr["tar"].tolist() == [0.75, 0.25]
    _check_counts(thr)
    assert thr["resolvable"].tolist() == [True, True]


def test_reused_thresholds_keep_the_dev_runs_counts(caplog):
    """Reused from a dev run: its names, thresholds and targets, its impostor count (40)
    and its verdict (unresolvable, though 40 impostors would resolve FMR 0.05: the dev
    run's word stands), said in the log; without those columns the count is this
    protocol's (10) and FMR 0.05 is unresolvable by it."""
    cfg = {"thresholds": {"from_protocol": "dev", "fmr_targets": [0.2]}}
    reuse = pd.DataFrame({"name": ["fmr=0.05"], "threshold": [0.55], "target_fmr": [0.05],
                          "n_impostor": [40], "resolvable": [False]})
    with caplog.at_level(logging.WARNING, logger="facecast.fairness.assess"):
        thr = _thresholds(_ann(), cfg, reuse)
    assert [r.getMessage() for r in caplog.records] == [
        "threshold fmr=0.05 needs at least 20 impostor pairs, it rests on 40: flagged "
        "unresolvable, shown as n/a"]
    caplog.clear()
    assert thr["name"].tolist() == ["fmr=0.05"] and thr["threshold"].tolist() == [0.55]
    assert thr["target_fmr"].tolist() == [0.05]
    assert thr["source"].tolist() == ["reused from dev"]
    # impostors 0.6 .. 1.0 (5 of 10), genuines 0.65, 0.95 (2 of 4)
    assert thr["fmr_reached"].tolist() == [0.5] and thr["tar"].tolist() == [0.5]
    assert thr["false_matches"].tolist() == [5]
    _check_counts(thr)
    assert thr["threshold_n_impostor"].tolist() == [40] and thr["resolvable"].tolist() == [False]
    with caplog.at_level(logging.WARNING, logger="facecast.fairness.assess"):
        bare = _thresholds(_ann(), cfg, reuse[["name", "threshold", "target_fmr"]])
    assert bare["threshold_n_impostor"].tolist() == [10]
    assert bare["threshold_n_impostor"].dtype == np.int64
    assert bare["resolvable"].tolist() == [False]
    assert "needs at least 20 impostor pairs, it rests on 10" in caplog.text


def test_needed_columns_of_the_config():
    """Protected and legitimate columns plus each soft category's column (``1 - x`` reads
    ``x``), sorted, once each; absent sections are empty."""
    cfg = {"protected": {"g": {"column": "label_g"}},
           "legitimate": {"a": {"column": "label_age"}, "b": {"column": "label_male"}},
           "soft_attributes": {"sex": {"categories": {"m": "label_male",
                                                      "f": "1 - label_p"}},
                               "none": {}}}
    assert _needed_columns(cfg) == ["label_age", "label_g", "label_male", "label_p"]
    assert _needed_columns({"protected": None}) == []


def test_sweep_thresholds_quantiles_by_hand():
    """n = 4: quantiles 0, 1/4 .. 1 of the finite scores 0 .. 4, and the impostors' (0 and
    1) quantiles at 1 - FMR for FMR 1e-5, 10**(-5/3), 10**(-10/3)... (1 - 10**(-5 + 5k/3));
    the failed pair's -inf is left out; no pair: empty."""
    ref = pd.DataFrame({"score": [0.0, 1.0, 2.0, 3.0, 4.0, -np.inf],
                        "label": [0, 0, 1, 1, 1, 0]})
    got = sweep_thresholds(ref, n=4)
    tail = [1 - 10 ** (-5 + 5 * k / 3) for k in (2, 1, 0)]
    np.testing.assert_allclose(got, [0.0, *tail, 1.0, 2.0, 3.0, 4.0], rtol=0, atol=1e-12)
    assert len(sweep_thresholds(ref.iloc[[5]])) == 0
    # the default n = 200: 201 quantiles of 0 .. 4 and 200 impostor quantiles, the lowest
    # (0) shared
    assert len(sweep_thresholds(ref.assign(label=0).iloc[:5])) == 201 + 200 - 1
    genuine_only = sweep_thresholds(ref[ref["label"] == 1], n=2)
    assert genuine_only.tolist() == [2.0, 3.0, 4.0]


def test_pairs_counted_valid_and_grouped_for_rates():
    """Counted: ok / missing_legitimate / no_feature pairs with a single group; valid: in
    the reference set or a cell, renumbered, int labels; mixed pairs have no rate group."""
    ann = pd.DataFrame({
        "status": ["ok", "missing_legitimate", "no_feature", "mixed", "held_out", "ok", "ok"],
        "group": ["A", "B", "A", "mixed", "A", None, "mixed"],
        "in_reference": [True, False, True, True, False, False, True],
        "in_cells": [True, True, False, False, False, False, False],
        "label": [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0],
        "score": [0.5, 0.25, 0.75, 0.125, 0.0, 1.0, 0.375]}, index=range(10, 17))
    assert _counted(ann).tolist() == [True, True, True, False, False, False, False]
    valid = _valid_pairs(ann)
    assert valid.index.tolist() == [0, 1, 2, 3, 4] and "index" not in valid.columns
    assert valid["status"].tolist() == ["ok", "missing_legitimate", "no_feature", "mixed", "ok"]
    assert valid["label"].dtype == np.int64 and valid["label"].tolist() == [1, 0, 1, 0, 1]
    assert _rate_groups(valid).tolist() == ["A", "B", "A", None, "mixed"]
    s, y = _scores_labels(valid)
    assert s.dtype == np.float64 and s.tolist() == [0.5, 0.25, 0.75, 0.125, 0.375]
    assert y.dtype == bool and y.tolist() == [True, False, True, False, True]


def test_write_frame_and_read_scores(tmp_path):
    """Parquet and CSV of a frame (CSV optional); scored pairs need image_a, image_b, label
    and score, get their status renamed and their image ids as text."""
    df = pd.DataFrame({"image_a": [1, 2], "image_b": ["x", "y"], "label": [1, 0],
                       "score": [0.5, 0.25], "status": ["ok", "ok"], "message": ["", "m"]})
    write_frame(df, tmp_path, "pairs", {"stage": "t"})
    csv = pd.read_csv(tmp_path / "pairs.csv")
    assert csv.columns.tolist() == df.columns.tolist() and csv["score"].tolist() == [0.5, 0.25]
    assert read_provenance(tmp_path / "pairs.parquet")["stage"] == "t"
    write_frame(df, tmp_path, "nocsv", {"stage": "t"}, csv=False)
    assert (tmp_path / "nocsv.parquet").exists() and not (tmp_path / "nocsv.csv").exists()
    got = _read_scores(tmp_path / "pairs.parquet")
    assert got["image_a"].tolist() == ["1", "2"] and got["image_b"].tolist() == ["x", "y"]
    assert got["input_status"].tolist() == ["ok", "ok"]
    assert got["input_message"].tolist() == ["", "m"]
    assert "status" not in got and "message" not in got
    write_frame(df.drop(columns=["label", "score"]), tmp_path, "bad", {}, csv=False)
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['label', 'score'\]; scored "
                                         r"pairs need \['image_a', 'image_b', 'label', "
                                         r"'score'\]"):
        _read_scores(tmp_path / "bad.parquet")


def test_no_impostor_or_genuine_reads_nan_without_a_warning():
    """A protocol without reference impostors (genuines) has FMR (TAR) NaN at a fixed
    threshold, not numpy's mean of an empty slice."""
    import warnings

    ann = _ann()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gen_only = _thresholds(ann[ann["label"] == 1], {"thresholds": {"fixed": [0.5]}}, None)
        imp_only = _thresholds(ann[ann["label"] == 0], {"thresholds": {"fixed": [0.5]}}, None)
    assert np.isnan(gen_only["fmr_reached"].iloc[0]) and gen_only["tar"].iloc[0] == 0.75
    assert np.isnan(imp_only["tar"].iloc[0]) and imp_only["fmr_reached"].iloc[0] == 0.6


def _valid():
    """Group a: impostors 0.6, 0.1, genuines 0.9, 0.8; group b: impostors 0.1, 0.2,
    genuines 0.9, 0.7; one mixed impostor pair 0.65 (in the reference, in no group)."""
    return pd.DataFrame({
        "score": [0.6, 0.1, 0.1, 0.2, 0.9, 0.8, 0.9, 0.7, 0.65],
        "label": [0, 0, 0, 0, 1, 1, 1, 1, 0],
        "group": ["a", "a", "b", "b", "a", "a", "b", "b", "a|b"],
        "status": ["ok"] * 8 + ["mixed"], "in_reference": True, "in_cells": True})


def test_thresholds_and_rates_defaults_names_and_reuse(caplog):
    """Defaults: alpha 0.5, Wilson intervals at 95 %; each rate row named by its
    threshold (first column); a reused threshold is the one used. At 0.65: a has FMR 0/2
    and FNMR 0/2, b FMR 0/2 and FNMR 0/2; the mixed pair counts for no group."""
    reuse = pd.DataFrame({"name": ["dev"], "threshold": [0.65], "target_fmr": [np.nan]})
    thr, rates = _thresholds_and_rates(_valid(), {}, reuse)
    assert thr["threshold"].tolist() == [0.65] and thr["source"].tolist() == ["reused from None"]
    assert thr["alpha"].tolist() == [0.5]
    assert rates.columns[0] == "threshold_name" and rates["threshold_name"].tolist() == \
        ["dev", "dev"]
    assert rates["group"].tolist() == ["a", "b"] and rates["n_impostor"].tolist() == [2, 2]
    lo, hi = binomial_interval(np.array([0, 0]), np.array([2, 2]), 0.95, "wilson")
    assert rates["fmr_lo"].tolist() == lo.tolist() and rates["fmr_hi"].tolist() == hi.tolist()
    cfg = {"thresholds": {"fixed": [0.5]}, "alpha": 1.0, "confidence": 0.8,
           "interval": "clopper-pearson"}
    with caplog.at_level(logging.WARNING, logger="facecast.fairness.assess"):
        thr, rates = _thresholds_and_rates(_valid(), cfg, None)
    assert [r.getMessage() for r in caplog.records] == [
        "threshold t=0.5: fmr_max_min, fmr_max_geomean, inequity_rate infinite (a ratio over "
        "a zero rate), shown as n/a (0 false matches in b)"]
    # at 0.5: a FMR 1/2, b 0/2 -> FDR with alpha 1 = 1 - 0.5; FNMR 0 in both
    assert thr["alpha"].tolist() == [1.0] and thr["fdr"].tolist() == [0.5]
    lo, hi = binomial_interval(np.array([1, 0]), np.array([2, 2]), 0.8, "clopper-pearson")
    assert rates["fmr_lo"].tolist() == lo.tolist() and rates["fmr_hi"].tolist() == hi.tolist()


def test_load_attributes_reads_the_named_columns_of_the_identities(tmp_path):
    """Only image_id, identity and the named columns; only the given identities' rows
    (all rows when none are given); a missing column is a KeyError naming it."""
    pd.DataFrame({"image_id": ["a/1", "a/2", "b/1"], "identity": ["a", "a", "b"],
                  "label_x": [1, 0, 1], "other": [5, 6, 7]}).to_parquet(tmp_path / "t.parquet")
    got = load_attributes(tmp_path / "t.parquet", ["a"], ["label_x", "identity"])
    assert got.columns.tolist() == ["image_id", "identity", "label_x"]
    assert got["image_id"].tolist() == ["a/1", "a/2"]
    every = load_attributes(tmp_path / "t.parquet", [], ["image_id", "label_x"])
    assert every["image_id"].tolist() == ["a/1", "a/2", "b/1"]
    assert every.columns.tolist() == ["image_id", "identity", "label_x"]
    with pytest.raises(KeyError, match=r"lacks attribute column\(s\) \['label_y', 'label_z'\] "
                                       r"named in the fairness config; available: "
                                       r"\['identity', 'image_id', 'label_x', 'other'\]"):
        load_attributes(tmp_path / "t.parquet", ["a"], ["label_z", "label_x", "label_y"])
