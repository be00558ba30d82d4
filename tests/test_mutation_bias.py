"""Issue 51: survivors of `make mutate MODULES=fairness.bias` - Bias = max - min over the
groups with a value (batched, NaN rows), the cell codes of pairs outside the cells, 0/1
masks read as truth values, the per-cell and per-group tables' counts and columns, a
combination where one group is most discriminated twice, pairs outside the reference set,
and the legitimate-subset table's ties, empty case and missing attribute."""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest

from facecast.fairness.bias import (
    bias_of,
    cell_index,
    codes_of,
    discrimination,
    fairface_bias,
    legitimate_subsets,
)


def test_bias_of_is_max_minus_min_over_groups_with_a_value():
    """NaN groups are left out of both ends; a batch is one Bias per row; a row without
    any value is NaN; one row gives a Python float."""
    assert bias_of(np.array([0.1, np.nan, 0.35])) == pytest.approx(0.25)
    assert type(bias_of(np.array([0.1, 0.35]))) is float
    out = bias_of(np.array([[0.1, 0.3], [0.5, 0.6], [np.nan, np.nan]]))
    assert out[:2] == pytest.approx([0.2, 0.1]) and np.isnan(out[2])


def test_cell_index_codes_only_pairs_in_cells():
    """Code = group * n_combos + combo over the sorted groups/combos of the pairs in
    cells; a pair outside the cells is -1 even when its group and combination are known;
    with one combination the codes are the group numbers."""
    idx = cell_index(np.array(["B", "A", "B", "A"], dtype=object),
                     np.array(["Y", "X", "X", "X"], dtype=object),
                     np.array([True, True, True, False]))
    assert idx.groups == ["A", "B"] and idx.combos == ["X", "Y"]
    assert idx.cells.tolist() == [3, 0, 2, -1]
    one = cell_index(np.array(["A", "B", "C"], dtype=object),
                     np.array(["X", "X", "X"], dtype=object), np.array([True, True, False]))
    assert one.cells.tolist() == [0, 1, -1]


def test_cell_index_reads_a_01_mask_as_truth_values():
    """``in_cells`` given as 0/1 integers is a mask, not a list of positions."""
    idx = cell_index(np.array(["A", "B", "C"], dtype=object),
                     np.array(["X", "X", "X"], dtype=object), np.array([0, 1, 1]))
    assert idx.groups == ["B", "C"] and idx.cells.tolist() == [-1, 0, 1]


def test_codes_of_are_integer_positions():
    """Positions in the category list as int64; missing or unlisted values are -1."""
    codes = codes_of(np.array(["b", None, "z", "a"], dtype=object), ["a", "b"])
    assert codes.dtype == np.int64 and codes.tolist() == [1, -1, -1, 0]


def test_discrimination_reads_present_as_truth_values_and_does_not_warn():
    """A present-count of 2 marks the cell present (not ``2 & True == 0``); a group present
    nowhere has mean NaN without a numpy warning."""
    auc = np.array([[0.9, 0.6], [0.7, 0.8], [0.5, 0.5]])
    present = np.array([[2, 1], [1, 2], [0, 0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d, mean_d = discrimination(auc, present)
    assert d[0].tolist() == pytest.approx([0.0, 0.2]) and d[1].tolist() == pytest.approx(
        [0.2, 0.0])
    assert mean_d[:2].tolist() == pytest.approx([0.1, 0.1]) and np.isnan(mean_d[2])


def _pairs(rows):
    """rows: (group, combo, score, label)."""
    g, c, s, y = (np.array(v, dtype=object) for v in zip(*rows, strict=True))
    n = len(rows)
    return s.astype(float), y.astype(int), g, c, np.ones(n, bool), np.ones(n, bool)


# group A's genuine pairs score low at X and at Y: A is most discriminated at both
ROWS = [("A", "X", 0.2, 1), ("B", "X", 0.9, 1), ("A", "Y", 0.3, 1), ("B", "Y", 0.8, 1),
        ("A", "X", 0.5, 0), ("B", "X", 0.1, 0), ("B", "Y", 0.4, 0)]


def test_tables_count_pairs_combinations_and_times_most_discriminated():
    """AUC+ over all 3 negatives (0.1, 0.4, 0.5): A,X 0.2 -> 1/3, B,X 0.9 -> 1,
    A,Y 0.3 -> 1/3, B,Y 0.8 -> 1, so A is the worst group at both X and Y (2 times).
    AUC-: B,X (0.1) -> 4/4, A,X (0.5) -> 2/4 and B,Y (0.4) -> 2/4, so no (-, A, Y) cell;
    A is present at X only. Only non-empty cells are rows; a fresh index; int counts."""
    r = fairface_bias(*_pairs(ROWS))
    assert r.cells.index.tolist() == list(range(len(r.cells)))
    assert r.groups.index.tolist() == list(range(len(r.groups)))
    keys = list(zip(r.cells["sign"], r.cells["group"], r.cells["combo"], strict=True))
    assert sorted(keys) == sorted([("+", "A", "X"), ("+", "A", "Y"), ("+", "B", "X"),
                                   ("+", "B", "Y"), ("-", "A", "X"), ("-", "B", "X"),
                                   ("-", "B", "Y")])
    cells = r.cells.set_index(["sign", "group", "combo"])
    assert cells.loc[("+", "A", "X"), "auc"] == pytest.approx(1 / 3)
    assert cells.loc[("-", "A", "X"), "auc"] == pytest.approx(0.5)
    assert cells["n"].tolist() == [1] * 7
    g = r.groups.set_index(["sign", "group"])
    assert g.loc[("+", "A"), "n_most_discriminated"] == 2
    assert g.loc[("+", "B"), "n_most_discriminated"] == 0
    assert r.groups["n_most_discriminated"].dtype == np.int64
    assert g["n_combos"].tolist() == [2, 2, 1, 2]  # +A, +B, -A, -B
    assert r.bias_pos == pytest.approx(2 / 3)
    # -: X: A 0.5, B 1 -> d_A 0.5; Y: B alone -> 0; means A 0.5, B 0
    assert r.bias_neg == pytest.approx(0.5)


def test_cell_counts_are_pairs_per_cell():
    """Column ``n``: A,X holds two genuine pairs."""
    rows = [*ROWS, ("A", "X", 0.45, 1)]
    cells = fairface_bias(*_pairs(rows)).cells.set_index(["sign", "group", "combo"])
    assert cells.loc[("+", "A", "X"), "n"] == 2 and cells.loc[("+", "B", "X"), "n"] == 1


def test_pairs_outside_the_reference_count_nowhere():
    """An impostor pair outside the reference set (0.95, higher than every genuine score)
    changes neither the AUCs nor the accuracy; a 0/1 integer mask is read as a mask."""
    s, y, g, c, cells, ref = _pairs([*ROWS, ("B", "X", 0.95, 0)])
    ref = np.r_[np.ones(len(ROWS), int), 0]
    r = fairface_bias(s, y, g, c, cells, ref)
    base = fairface_bias(*_pairs(ROWS))
    pd.testing.assert_frame_equal(r.cells, base.cells)
    # accuracy: genuines 0.2, 0.9, 0.3, 0.8 against impostors 0.5, 0.1, 0.4: (1+3+1+3)/12
    assert r.accuracy == pytest.approx(8 / 12) and base.accuracy == pytest.approx(8 / 12)


def test_no_pair_in_a_cell_gives_nan_bias_not_an_error():
    """Issue 51's bug: with no pair in any cell (every pair mixed, say) the metric raised
    numpy's "zero-size array to reduction operation maximum"; now Bias+ and Bias- are NaN
    (no group has a value, as ``bias_of`` documents), accuracy still 8/12 over the
    reference pairs, and an empty ``mean_d`` gives NaN too."""
    s, y, g, c, _, ref = _pairs(ROWS)
    r = fairface_bias(s, y, g, c, np.zeros(len(s), bool), ref)
    assert np.isnan(r.bias_pos) and np.isnan(r.bias_neg)
    assert r.accuracy == pytest.approx(8 / 12) and r.n_combos_used == {"+": 0, "-": 0}
    assert len(r.cells) == 0 and len(r.groups) == 0
    assert np.isnan(bias_of(np.array([])))
    d, mean_d = discrimination(np.zeros((3, 0, 0)), np.zeros((3, 0, 0), bool))
    assert d.shape == (3, 0, 0) and mean_d.shape == (3, 0)


def test_no_reference_pair_gives_nan_accuracy_and_text_columns():
    """Without reference pairs: accuracy NaN, Bias NaN, empty tables whose group and
    combination columns are still text (object)."""
    s, y, g, c, cells, _ = _pairs(ROWS)
    r = fairface_bias(s, y, g, c, cells, np.zeros(len(s), bool))
    assert np.isnan(r.accuracy) and np.isnan(r.bias_pos) and np.isnan(r.bias_neg)
    assert len(r.cells) == 0
    assert r.cells["group"].dtype == object and r.cells["combo"].dtype == object


def test_legitimate_subsets_columns_ties_and_order():
    """Rows sorted by sign and subset; a tie for the max goes to the first group in sorted
    order (A) even when B comes first; min_group named; an attribute the combinations do
    not carry gives no row."""
    cells = pd.DataFrame({
        "sign": ["-", "+", "+", "+", "+"], "group": ["A", "B", "A", "B", "A"],
        "combo": ["A1,G0", "A1,G0", "A1,G0", "A0,G0", "A0,G0"],
        "present": True, "d": [0.3, 0.2, 0.2, 0.1, 0.0]})
    t = legitimate_subsets(cells, ["age", "glasses", "extra"])
    assert t.columns.tolist() == ["sign", "attribute", "subset", "n_combos", "max_d",
                                  "max_group", "min_d", "min_group"]
    assert list(zip(t["sign"], t["attribute"], t["subset"], strict=True)) == [
        ("+", "age", "A0"), ("+", "age", "A1"), ("-", "age", "A1"),
        ("+", "glasses", "G0"), ("-", "glasses", "G0")]
    a1 = t[(t["sign"] == "+") & (t["subset"] == "A1")].iloc[0]
    assert a1["max_group"] == "A" and a1["min_group"] == "A" and a1["max_d"] == 0.2
    a0 = t[(t["sign"] == "+") & (t["subset"] == "A0")].iloc[0]
    assert (a0["max_group"], a0["min_group"]) == ("B", "A")
    g0 = t[(t["sign"] == "+") & (t["subset"] == "G0")].iloc[0]
    # B: (0.2 + 0.1) / 2 = 0.15, A: (0.2 + 0) / 2 = 0.1, over two combinations
    assert (g0["max_group"], g0["min_group"], g0["n_combos"]) == ("B", "A", 2)
    assert g0["max_d"] == pytest.approx(0.15) and g0["min_d"] == pytest.approx(0.1)


def test_legitimate_subsets_without_present_cells_has_the_columns():
    """No cell takes part: an empty table with the eight named columns."""
    cells = pd.DataFrame({"sign": ["+"], "group": ["A"], "combo": ["A0,G0"],
                          "present": [False], "d": [np.nan]})
    t = legitimate_subsets(cells, ["age", "glasses"])
    assert len(t) == 0 and t.columns.tolist() == [
        "sign", "attribute", "subset", "n_combos", "max_d", "max_group", "min_d",
        "min_group"]
