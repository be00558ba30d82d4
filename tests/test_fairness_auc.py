"""Rank AUC: tie-correct, equal to scikit-learn, grouped over cells in one pass."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from facecast.fairness.auc import grouped_auc, rank_auc


def _data(seed=0, n=400):
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, 6, n).astype(float)  # heavy ties
    labels = rng.integers(0, 2, n)
    cells = rng.integers(-1, 5, n)
    return scores, labels, cells


def test_rank_auc_equals_sklearn_with_ties():
    scores, labels, _ = _data()
    assert rank_auc(scores, labels) == pytest.approx(roc_auc_score(labels, scores), abs=1e-12)
    # all tied -> 0.5
    assert rank_auc(np.ones(10), np.r_[np.ones(5), np.zeros(5)]) == 0.5


def test_weighted_rank_auc_equals_sklearn_sample_weight():
    scores, labels, _ = _data(1)
    w = np.random.default_rng(2).integers(0, 4, (3, scores.size)).astype(float)
    got = rank_auc(scores, labels, w)
    want = [roc_auc_score(labels, scores, sample_weight=row) for row in w]
    np.testing.assert_allclose(got, want, atol=1e-12)


@pytest.mark.parametrize("sign", ["+", "-"])
def test_grouped_auc_equals_per_cell_sklearn(sign):
    scores, labels, cells = _data(3)
    auc, count = grouped_auc(scores, labels, cells, 6, sign=sign)
    for c in range(6):
        focus = (cells == c) & (labels == (1 if sign == "+" else 0))
        other = labels == (0 if sign == "+" else 1)  # ALL pairs of the other label
        m = focus | other
        if focus.sum() == 0:
            assert np.isnan(auc[c]) and count[c] == 0
            continue
        assert count[c] == focus.sum()
        assert auc[c] == pytest.approx(roc_auc_score(labels[m], scores[m]), abs=1e-12)


def test_grouped_auc_weighted_unit_weights_match_unweighted():
    scores, labels, cells = _data(4)
    for sign in "+-":
        a, n = grouped_auc(scores, labels, cells, 6, sign=sign)
        aw, nw = grouped_auc(scores, labels, cells, 6, sign=sign,
                             weights=np.ones((2, scores.size)))
        np.testing.assert_allclose(aw[0], a, equal_nan=True)
        np.testing.assert_allclose(nw[1], n)


def test_reference_mask_limits_the_all_side():
    scores = np.array([0.9, 0.1, 0.5, 0.95])
    labels = np.array([1, 0, 0, 0])
    ref = np.array([True, True, False, True])  # 0.5 is not a reference negative
    auc, _ = grouped_auc(scores, labels, np.array([0, -1, -1, -1]), 1, reference=ref)
    assert auc[0] == pytest.approx(0.5)  # beats 0.1, loses to 0.95
