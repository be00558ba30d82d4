"""Attribute discretisation, per-identity majority vote, pair annotation."""

import numpy as np
import pandas as pd
import pytest

from facecast.fairness.groups import (
    annotate_pairs,
    discretise,
    image_labels,
    majority_vote,
    parse_specs,
)

PROTECTED = parse_specs({
    "gender": {"column": "label_male", "bins": [0.5], "labels": ["female", "male"]},
    "skin": {"column": "tone", "bins": [0.5], "labels": ["light", "dark"]}})
LEGIT = parse_specs({
    "age": {"column": "age", "bins": [35, 65], "labels": ["A0", "A1", "A2"]},
    "pose": {"column": "yaw", "abs": True, "bins": [15], "labels": ["P0", "P1"]}})


def test_discretise_bins_abs_categorical_and_missing():
    s = pd.Series([10.0, 35.0, 64.9, 65.0, np.nan])
    assert discretise(s, LEGIT[0]).tolist() == ["A0", "A1", "A1", "A2", None]
    assert discretise(pd.Series([-20.0, 14.0, 15.0]), LEGIT[1]).tolist() == ["P1", "P0", "P1"]
    src = parse_specs({"source": {"column": "src", "values": {1: "S0", 2: "S1"}}})[0]
    assert discretise(pd.Series([1.0, 2.0, 3.0, np.nan]), src).tolist() == [
        "S0", "S1", None, None]
    with pytest.raises(ValueError, match="labels"):
        parse_specs({"x": {"column": "x", "bins": [1, 2], "labels": ["a", "b"]}})


def test_majority_vote_ties_follow_label_order():
    labels = pd.Series(["dark", "light", "light", "dark", "light", None, None])
    ident = pd.Series(["a", "a", "a", "b", "b", "c", "a"])
    out = majority_vote(labels, ident, {"light": 0, "dark": 1})
    assert out.tolist() == ["light"] * 3 + ["light", "light", None, "light"]


def _attrs():
    return pd.DataFrame({
        "image_id": ["a1", "a2", "a3", "b1", "b2", "c1"],
        "identity": ["a", "a", "a", "b", "b", "c"],
        "label_male": [0, 0, 1, 1, 1, 0.0],
        "tone": [0.9, 0.8, 0.2, 0.1, 0.2, np.nan],
        "age": [30, 30, 40, 70, 70, 20.0],
        "yaw": [0, 30, -5, 0, np.nan, 0.0]})


def test_image_labels_vote_and_group():
    lab = image_labels(_attrs(), PROTECTED, LEGIT, sync="majority")
    assert lab.loc["a3", "gender"] == "female" and lab.loc["a3", "skin"] == "dark"
    assert lab.loc["a1", "group"] == "female_dark"
    assert lab.loc["b1", "group"] == "male_light"
    assert pd.isna(lab.loc["c1", "group"])  # skin unknown
    per_image = image_labels(_attrs(), PROTECTED, LEGIT, sync="none")
    assert per_image.loc["a3", "group"] == "male_light"
    with pytest.raises(KeyError, match="nope"):
        image_labels(_attrs(), parse_specs({"g": {"column": "nope"}}), [])


def test_annotate_pairs_statuses_and_combinations():
    lab = image_labels(_attrs(), PROTECTED, LEGIT)
    pairs = pd.DataFrame({
        "image_a": ["a2", "a1", "a1", "b1", "a1", "zz", "a1", "a1"],
        "image_b": ["a1", "b1", "c1", "b2", "a3", "a1", "a2", "a3"],
        "label": [1, 0, 0, 1, 1, 0, 1, 7], "score": [0.5, 0.1, 0.2, 0.4, 0.6, 0.3,
                                                     np.nan, 0.1]})
    ann = annotate_pairs(pairs, lab, PROTECTED, LEGIT)
    assert len(ann) == len(pairs)
    assert ann["status"].tolist() == ["ok", "mixed", "missing_protected", "missing_legitimate",
                                      "ok", "missing_image", "bad_score", "bad_label"]
    assert (ann["message"].str.len()[ann["status"] != "ok"] > 0).all()
    assert ann.loc[0, "combo"] == "A0-A0,P0-P1"  # unordered: P1 (a2) and P0 (a1)
    assert ann.loc[4, "combo"] == "A0-A1,P0-P0"
    assert ann.loc[0, "group"] == "female_dark"
    assert ann.loc[1, "group"] == "mixed"
    assert ann["in_cells"].tolist() == [True, False, False, False, True, False, False, False]
    assert ann["in_reference"].tolist() == [True] * 6 + [False, False]
    excl = annotate_pairs(pairs, lab, PROTECTED, LEGIT, mixed_pairs="exclude")
    assert not excl.loc[1, "in_reference"]
