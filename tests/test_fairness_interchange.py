"""Challenge CSV interchange (TEMPLATE_ID1,TEMPLATE_ID2,SCORE): export and import."""

import numpy as np
import pandas as pd
import pytest

from facecast.fairness.interchange import read_interchange, write_interchange
from facecast.fairness.simulate import simulate


def test_round_trip(tmp_path):
    attrs, pairs = simulate(20, 3, seed=5)
    write_interchange(pairs, tmp_path / "pred.csv", tmp_path / "pairs.csv")
    head = (tmp_path / "pred.csv").read_text().splitlines()[0]
    assert head == "TEMPLATE_ID1,TEMPLATE_ID2,SCORE"
    back = read_interchange(tmp_path / "pred.csv", tmp_path / "pairs.csv", attrs)
    assert (back["status"] == "ok").all()
    for col in ("image_a", "image_b", "identity_a", "identity_b"):
        assert back[col].tolist() == pairs[col].tolist()
    assert back["label"].tolist() == pairs["label"].tolist()
    np.testing.assert_array_equal(back["score"].to_numpy(), pairs["score"].to_numpy())


def test_import_matches_unordered_keeps_missing_and_rejects_duplicates(tmp_path):
    truth = pd.DataFrame({"TEMPLATE_ID1": ["x", "y", "z"], "TEMPLATE_ID2": ["y", "z", "x"],
                          "LABEL": [1, 0, 0]})
    truth.to_csv(tmp_path / "truth.csv", index=False)
    pd.DataFrame({"TEMPLATE_ID1": ["y", "z", "q"], "TEMPLATE_ID2": ["x", "y", "r"],
                  "SCORE": [0.7, 0.1, 0.5]}).to_csv(tmp_path / "pred.csv", index=False)
    got = read_interchange(tmp_path / "pred.csv", tmp_path / "truth.csv")
    assert got["score"].tolist()[:2] == [0.7, 0.1] and np.isnan(got["score"].iloc[2])
    assert got["status"].tolist() == ["ok", "ok", "missing_score"]
    pd.DataFrame({"TEMPLATE_ID1": ["x", "y"], "TEMPLATE_ID2": ["y", "x"],
                  "SCORE": [0.7, 0.6]}).to_csv(tmp_path / "dup.csv", index=False)
    with pytest.raises(ValueError, match="duplicated"):
        read_interchange(tmp_path / "dup.csv", tmp_path / "truth.csv")
    pd.DataFrame({"A": [1]}).to_csv(tmp_path / "bad.csv", index=False)
    with pytest.raises(ValueError, match="TEMPLATE_ID1"):
        read_interchange(tmp_path / "bad.csv", tmp_path / "truth.csv")
