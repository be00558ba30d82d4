"""The FairFace 2020 bias metric on a hand-worked 3-group example and edge cases."""

import numpy as np
import pandas as pd
import pytest

from facecast.fairness.bias import discrimination, fairface_bias, legitimate_subsets

# positives: (group, combo, score); negatives likewise (see the worked numbers below)
POS = [("A", "X", 0.5), ("A", "X", 0.35), ("B", "X", 0.25), ("C", "X", 0.4),
       ("A", "Y", 0.05), ("B", "Y", 0.45)]
NEG = [("A", "X", 0.1), ("B", "X", 0.2), ("C", "X", 0.3), ("A", "Y", 0.4)]


def _arrays(pos=POS, neg=NEG):
    rows = [(*p, 1) for p in pos] + [(*n, 0) for n in neg]
    g, c, s, y = (np.array(v, dtype=object) for v in zip(*rows, strict=True))
    n = len(rows)
    return s.astype(float), y.astype(int), g, c, np.ones(n, bool), np.ones(n, bool)


def test_hand_worked_three_groups():
    r = fairface_bias(*_arrays(), min_pairs=1, min_groups=2)
    cells = r.cells.set_index(["sign", "group", "combo"])
    # AUC+: A,X = (4 + 3)/8; B,X = 2/4; C,X = (3 + 0.5)/4; A,Y = 0/4; B,Y = 4/4
    assert cells.loc[("+", "A", "X"), "auc"] == pytest.approx(0.875)
    assert cells.loc[("+", "B", "X"), "auc"] == pytest.approx(0.5)
    assert cells.loc[("+", "C", "X"), "auc"] == pytest.approx(0.875)
    assert cells.loc[("+", "A", "Y"), "auc"] == pytest.approx(0.0)
    # d+: X: A 0, B .375, C 0; Y: A 1, B 0 -> means A .5, B .1875, C 0
    assert cells.loc[("+", "B", "X"), "d"] == pytest.approx(0.375)
    assert cells.loc[("+", "A", "Y"), "d"] == pytest.approx(1.0)
    g = r.groups.set_index(["sign", "group"])["mean_d"]
    assert g[("+", "A")] == pytest.approx(0.5)
    assert g[("+", "B")] == pytest.approx(0.1875)
    assert g[("+", "C")] == pytest.approx(0.0)
    assert r.bias_pos == pytest.approx(0.5)
    # AUC-: all 6 positives against A,X (0.1): 5/6; B,X (0.2): 5/6; C,X (0.3): 4/6;
    # A,Y (0.4): 2.5/6 but Y has a single group -> left out with min_groups=2
    assert cells.loc[("-", "C", "X"), "auc"] == pytest.approx(4 / 6)
    assert cells.loc[("-", "A", "Y"), "auc"] == pytest.approx(2.5 / 6)
    assert not cells.loc[("-", "A", "Y"), "present"]
    assert g[("-", "C")] == pytest.approx(1 / 6)
    assert g[("-", "A")] == pytest.approx(0.0)
    assert r.bias_neg == pytest.approx(1 / 6)
    # accuracy: (4 + 3 + 2 + 3.5 + 0 + 4) / 24
    assert r.accuracy == pytest.approx(16.5 / 24)
    assert r.n_combos_used == {"+": 2, "-": 1}
    # most discriminated per combination: + X -> B, Y -> A; - X -> C
    worst = r.groups.set_index(["sign", "group"])["n_most_discriminated"]
    assert worst[("+", "A")] == 1 and worst[("+", "B")] == 1 and worst[("+", "C")] == 0
    assert worst[("-", "C")] == 1


def test_constant_scores_give_zero_bias():
    s, y, g, c, cells, ref = _arrays()
    r = fairface_bias(np.full_like(s, 0.3), y, g, c, cells, ref)
    assert r.bias_pos == 0.0 and r.bias_neg == 0.0
    assert r.accuracy == 0.5


def test_min_pairs_drops_sparse_cells_and_combinations():
    r = fairface_bias(*_arrays(), min_pairs=2, min_groups=2)
    # only (A, X) has 2 positives; X then has one group -> nothing takes part
    assert np.isnan(r.bias_pos)
    assert r.n_combos_used["+"] == 0
    assert r.cells.query("sign == '+'")["present"].sum() == 0


def test_pairs_outside_cells_still_count_as_reference():
    s, y, g, c, cells, ref = _arrays()
    s = np.r_[s, 0.15]
    y = np.r_[y, 0]
    g = np.r_[g, np.array(["mixed"], dtype=object)]
    c = np.r_[c, np.array(["X"], dtype=object)]
    cells = np.r_[cells, False]
    ref = np.r_[ref, True]
    r = fairface_bias(s, y, g, c, cells, ref, min_pairs=1)
    cell = r.cells.set_index(["sign", "group", "combo"])
    # B,X positive 0.25 now beats 0.1, 0.15, 0.2 out of 5 negatives
    assert cell.loc[("+", "B", "X"), "auc"] == pytest.approx(3 / 5)
    assert "mixed" not in set(r.cells["group"])


def test_discrimination_is_batched():
    auc = np.array([[[0.9, 0.6], [0.7, np.nan]], [[0.5, 0.5], [0.5, 0.5]]])
    d, mean_d = discrimination(auc, np.isfinite(auc), min_groups=1)
    np.testing.assert_allclose(d[0], [[0, 0], [0.2, np.nan]])
    np.testing.assert_allclose(mean_d, [[0, 0.2], [0, 0]])


def test_legitimate_subsets_max_min_per_subset():
    cells = pd.DataFrame({
        "sign": "+", "group": ["A", "B", "A", "B"],
        "combo": ["A0-A0,G0-G0", "A0-A0,G0-G0", "A0-A1,G0-G0", "A0-A1,G0-G0"],
        "present": True, "d": [0.0, 0.2, 0.1, 0.0]})
    t = legitimate_subsets(cells, ["age", "glasses"]).set_index(["attribute", "subset"])
    assert t.loc[("age", "A0-A0"), "max_group"] == "B"
    assert t.loc[("age", "A0-A0"), "max_d"] == pytest.approx(0.2)
    assert t.loc[("glasses", "G0-G0"), "max_d"] == pytest.approx(0.1)  # B: (0.2 + 0) / 2
    assert t.loc[("glasses", "G0-G0"), "min_d"] == pytest.approx(0.05)  # A: (0 + 0.1) / 2
    assert t.loc[("glasses", "G0-G0"), "n_combos"] == 2
