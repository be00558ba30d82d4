"""Verification metrics against hand computations and scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score, roc_curve

from facecast.evaluate.metrics import (
    INSIGHTFACE_THRESHOLDS,
    auc_score,
    default_folds,
    equal_error_rate,
    kfold_accuracy,
    roc_points,
    tar_at_far,
    verification_metrics,
)


def _insightface_loop(dist, issame, folds, thresholds):
    """insightface's calculate_roc accuracy, written as plain loops (the reference)."""
    accs = []
    for f in sorted(set(folds), key=int):
        test = folds == f
        train = ~test
        best, best_acc = None, -1.0
        for t in thresholds:
            pred = dist[train] < t
            acc = np.mean(pred == issame[train])
            if acc > best_acc:
                best, best_acc = t, acc
        accs.append(np.mean((dist[test] < best) == issame[test]))
    return np.array(accs)


def test_kfold_accuracy_equals_the_insightface_loop():
    rng = np.random.default_rng(0)
    n = 400
    labels = np.tile([1, 0], n // 2)
    scores = np.where(labels == 1, rng.normal(0.5, 0.2, n), rng.normal(0.1, 0.15, n))
    folds = default_folds(n, 10)
    got = kfold_accuracy(scores, labels, folds)
    ref = _insightface_loop(2 - 2 * scores, labels.astype(bool), folds, INSIGHTFACE_THRESHOLDS)
    np.testing.assert_allclose(got.accuracies, ref)
    assert got.mean == pytest.approx(ref.mean())
    assert got.std == pytest.approx(ref.std())
    exact = kfold_accuracy(scores, labels, folds, "exact")
    assert exact.mean >= got.mean - 0.02  # a finer grid never does much worse


def test_kfold_accuracy_by_hand():
    # two folds; fold 0 separable at cos 0.5, fold 1 has one genuine below every impostor
    scores = np.array([0.9, 0.8, 0.1, 0.2, 0.7, 0.05, 0.3, 0.1])
    labels = np.array([1, 1, 0, 0, 1, 1, 0, 0])
    folds = np.array(["0"] * 4 + ["1"] * 4)
    res = kfold_accuracy(scores, labels, folds, thresholds=np.array([0.5, 1.0, 1.5, 2.0]))
    # d = 2 - 2 cos: fold 0 [0.2, 0.4, 1.8, 1.6], fold 1 [0.6, 1.9, 1.4, 1.8]
    # test fold 0, trained on fold 1: t=0.5 -> 2/4, t=1.0 -> 3/4, t=1.5 -> 2/4, t=2.0 -> 2/4;
    #   best t=1.0 -> fold 0 all right (4/4)
    # test fold 1, trained on fold 0: t=0.5 and t=1.0 and t=1.5 give 4/4; the first (0.5)
    #   wins -> fold 1: no pair predicted same -> 2/4
    np.testing.assert_allclose(res.accuracies, [1.0, 0.5])
    np.testing.assert_allclose(res.thresholds, [1.0, 0.5])
    np.testing.assert_allclose(res.cosine_thresholds, [0.5, 0.75])
    assert res.mean == pytest.approx(0.75)
    assert res.std == pytest.approx(0.25)


def test_roc_and_auc_equal_sklearn_with_ties():
    rng = np.random.default_rng(1)
    labels = rng.integers(0, 2, 500)
    scores = np.round(rng.normal(labels * 0.8, 1.0), 1)  # many ties
    far, tar, thr = roc_points(scores, labels)
    sk_far, sk_tar, sk_thr = roc_curve(labels, scores, drop_intermediate=False)
    np.testing.assert_allclose(far, sk_far)
    np.testing.assert_allclose(tar, sk_tar)
    np.testing.assert_allclose(thr[1:], sk_thr[1:])
    assert auc_score(scores, labels) == pytest.approx(roc_auc_score(labels, scores))


def test_eer_and_tar_at_far_by_hand():
    # genuine: 0.9 0.8 0.7 0.4 ; impostor: 0.6 0.3 0.2 0.1
    scores = np.array([0.9, 0.8, 0.7, 0.4, 0.6, 0.3, 0.2, 0.1])
    labels = np.array([1, 1, 1, 1, 0, 0, 0, 0])
    far, tar, thr = roc_points(scores, labels)
    eer, t = equal_error_rate(far, tar, thr)
    # at t=0.7: FAR 0, FRR .25 ; at t=0.6: FAR .25, FRR .25 -> crossing exactly at 0.25
    assert eer == pytest.approx(0.25)
    assert t == pytest.approx(0.6)
    r = tar_at_far(far, tar, thr, 0.25, n_impostors=4)
    assert r["tar"] == 1.0 and r["far_reached"] == 0.25 and r["threshold"] == 0.4
    assert r["n_false_accepts"] == 1 and r["resolvable"]
    r = tar_at_far(far, tar, thr, 1e-3, n_impostors=4)
    assert r["tar"] == 0.75 and r["far_reached"] == 0.0 and not r["resolvable"]


def test_tar_at_far_matches_sklearn_curve_on_large_sample():
    rng = np.random.default_rng(2)
    n_imp = 20_000
    scores = np.r_[rng.normal(0.6, 0.1, 2000), rng.normal(0.0, 0.1, n_imp)]
    labels = np.r_[np.ones(2000, int), np.zeros(n_imp, int)]
    m = verification_metrics(scores, labels, default_folds(len(scores)), fars=(1e-3,))
    sk_far, sk_tar, _ = roc_curve(labels, scores)
    assert m["tar@far=1e-3"] == pytest.approx(sk_tar[sk_far <= 1e-3].max())
    assert m["far_reached@far=1e-3"] <= 1e-3
    assert m["false_accepts@far=1e-3"] == round(m["far_reached@far=1e-3"] * n_imp)
    assert m["auc"] == pytest.approx(roc_auc_score(labels, scores))


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="NaN"):
        roc_points([0.1, np.nan], [1, 0])
    with pytest.raises(ValueError, match="genuine and impostor"):
        auc_score([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="0 \\(impostor\\) or 1"):
        auc_score([0.1, 0.2], [2, 0])
