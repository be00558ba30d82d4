"""Issue 51: the verification metrics (facecast.evaluate.metrics), every figure pinned by
hand or against a brute-force loop written here (ROC by thresholding at every score, AUC
over every genuine x impostor pair, EER by hand), every error message and default, so a
mutant of ``make mutate MODULES=evaluate.metrics`` that changes a number fails here."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from scipy.stats import norm

from facecast.evaluate.metrics import (
    INSIGHTFACE_THRESHOLDS,
    KFoldAccuracy,
    _as_arrays,
    _finite_mean,
    allowed_impostors,
    auc_score,
    default_folds,
    det_points,
    equal_error_rate,
    far_resolvable,
    kfold_accuracy,
    min_impostors,
    predicts_same,
    roc_points,
    squared_distance,
    tar_at_far,
    verification_metrics,
)


def brute_roc(s: np.ndarray, y: np.ndarray):
    """(FAR, TAR, threshold): accept ``score >= t`` at +inf and every distinct score,
    highest first."""
    ts = np.r_[np.inf, np.unique(s)[::-1]]
    far = np.array([((s >= t) & (y == 0)).sum() / (y == 0).sum() for t in ts])
    tar = np.array([((s >= t) & (y == 1)).sum() / (y == 1).sum() for t in ts])
    return far, tar, ts


def brute_auc(s: np.ndarray, y: np.ndarray) -> float:
    g, i = s[y == 1], s[y == 0]
    return float(((g[:, None] > i[None, :]) + 0.5 * (g[:, None] == i[None, :])).mean())


# ------------------------------------------------------------------- small building blocks

def test_insightface_grid_is_0_to_3_99_by_hundredths():
    assert len(INSIGHTFACE_THRESHOLDS) == 400
    assert INSIGHTFACE_THRESHOLDS[0] == 0.0
    assert INSIGHTFACE_THRESHOLDS[-1] == pytest.approx(3.99)
    assert np.diff(INSIGHTFACE_THRESHOLDS) == pytest.approx(np.full(399, 0.01))


def test_kfold_result_properties_and_empty_result():
    """mean, population std and cosine thresholds 1 - t/2; no folds: NaN, not an error."""
    r = KFoldAccuracy(["0", "1", "2"], np.array([0.5, 1.0, 0.9]), np.array([0.4, 1.0, 3.0]))
    assert r.mean == pytest.approx(0.8)
    assert r.std == pytest.approx(np.sqrt(((0.3**2) + (0.2**2) + (0.1**2)) / 3))
    assert r.cosine_thresholds.tolist() == pytest.approx([0.8, 0.5, -0.5])
    assert isinstance(r.mean, float) and isinstance(r.std, float)
    empty = KFoldAccuracy([], np.array([]), np.array([]))
    assert np.isnan(empty.mean) and np.isnan(empty.std)


def test_correct_maps_each_fold_to_its_threshold_and_refuses_unknown_folds():
    """Folds given out of order and as numbers: each pair decided at its own fold's
    threshold (d < t, strict); an unknown fold is named in the error."""
    r = KFoldAccuracy(["2", "10", "1"], np.zeros(3), np.array([0.5, 1.0, 1.5]))
    s = np.array([0.5, 0.5, 0.5, 0.75, 0.75, 0.75])   # d = 1.0 and 0.5
    y = np.array([1, 1, 1, 1, 0, 1])
    f = np.array([2, 10, 1, 2, 10, 1])
    # d=1: t 0.5 no, t 1.0 no (strict), t 1.5 yes; d=0.5: t 0.5 no, t 1.0 yes, 1.5 yes
    assert r.correct(s, y, f).tolist() == [False, False, True, False, False, True]
    with pytest.raises(ValueError):   # a threshold short: not silently cut
        KFoldAccuracy(["0", "1"], np.zeros(2), np.array([1.0])).correct(s[:2], y[:2], ["0"] * 2)
    with pytest.raises(ValueError, match=r"folds \['3', '4'\] have no threshold "
                                         r"\(known: \['2', '10', '1'\]\)"):
        r.correct(s, y, np.array(["4", "3", "1", "1", "1", "1"]))


def test_as_arrays_converts_and_refuses_bad_input_with_its_message():
    s, y = _as_arrays([1, 0], [True, False])
    assert s.dtype == np.float64 and y.dtype == np.int64 and y.tolist() == [1, 0]
    msg = "^scores and labels must be 1-D arrays of the same length$"
    with pytest.raises(ValueError, match=msg):
        _as_arrays([0.1, 0.2], [1])
    with pytest.raises(ValueError, match=msg):
        _as_arrays([[0.1, 0.2]], [[1, 0]])
    with pytest.raises(ValueError, match=r"^labels must be 0 \(impostor\) or 1 \(genuine\)$"):
        _as_arrays([0.1, 0.2], [1, -1])
    with pytest.raises(ValueError, match=r"^scores contain NaN; apply the failure rule first "
                                         r"\(facecast.evaluate.failures: -inf under "
                                         r"nonmatch, left out under drop\)$"):
        _as_arrays([np.nan, 0.2], [1, 0])
    s, _ = _as_arrays([-np.inf, np.inf], [1, 0])   # infinite scores are scores
    assert s.tolist() == [-np.inf, np.inf]


def test_finite_mean_distance_and_decision_rule():
    assert _finite_mean(np.array([1.0, -np.inf, 3.0, np.inf])) == 2.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")     # no "mean of empty slice"
        assert np.isnan(_finite_mean(np.array([-np.inf])))
    assert isinstance(_finite_mean(np.array([1.0])), float)
    assert squared_distance([1, 0.5, -1]).tolist() == [0.0, 1.0, 4.0]
    assert squared_distance(np.array([0.25], np.float32)).dtype == np.float64
    # d = 1.0 against t = 1.0 (not same: strict) and t = 1.01
    assert predicts_same([0.5, 0.5], [1.0, 1.01]).tolist() == [False, True]


def test_default_folds_are_contiguous_blocks_the_first_ones_larger():
    assert default_folds(23).tolist() == (["0"] * 3 + ["1"] * 3 + ["2"] * 3
                                          + [str(k) for k in range(3, 10) for _ in (0, 1)])
    assert default_folds(7, 3).tolist() == ["0", "0", "0", "1", "1", "2", "2"]
    assert default_folds(6, n_folds=2).tolist() == ["0"] * 3 + ["1"] * 3
    assert default_folds(20).tolist() == [str(k) for k in range(10) for _ in (0, 1)]


# ------------------------------------------------------------------------- 10-fold accuracy

def _loop(dist, same, folds, grid):
    """The insightface accuracy as loops: per fold, the first best threshold on the others."""
    names = sorted(set(folds.tolist()), key=lambda f: (len(f), f))
    accs, ts = [], []
    for f in names:
        test = folds == f
        best, best_acc = None, -1.0
        for t in grid:
            acc = np.mean((dist[~test] < t) == same[~test])
            if acc > best_acc:
                best, best_acc = t, acc
        accs.append(np.mean((dist[test] < best) == same[test]))
        ts.append(best)
    return names, np.array(accs), np.array(ts)


def test_kfold_accuracy_with_unequal_folds_and_named_folds_matches_the_loop():
    """Folds of unequal size named '2', '10', 'a': sorted by (length, name), '10' last; the
    accuracies and thresholds of the loop for the insightface grid, the exact grid (every
    distinct distance plus one above the largest) and an unsorted grid given as an array."""
    rng = np.random.default_rng(5)
    n = 90
    y = rng.integers(0, 2, n)
    s = np.round(np.where(y == 1, rng.normal(0.45, 0.2, n), rng.normal(0.2, 0.2, n)), 2)
    folds = np.array(["2"] * 40 + ["10"] * 20 + ["a"] * 30)
    d = 2 - 2 * s
    grids = {"insightface": INSIGHTFACE_THRESHOLDS,
             "exact": np.r_[np.unique(d), np.unique(d)[-1] + 1.0]}
    for name, grid in grids.items():
        got = kfold_accuracy(s, y, folds, name)
        names, accs, ts = _loop(d, y == 1, folds, grid)
        assert got.folds == names == ["2", "a", "10"]
        np.testing.assert_array_equal(got.accuracies, accs)
        np.testing.assert_array_equal(got.thresholds, ts)
    custom = np.array([1.5, 0.2, 1.0, 0.8, 1.2])
    got = kfold_accuracy(s, y, folds, custom)
    _, accs, ts = _loop(d, y == 1, folds, np.sort(custom))
    np.testing.assert_array_equal(got.accuracies, accs)
    np.testing.assert_array_equal(got.thresholds, ts)
    assert kfold_accuracy(s, y, folds).accuracies.tolist() == kfold_accuracy(
        s, y, folds, "insightface").accuracies.tolist()


def test_kfold_exact_grid_by_hand_and_its_one_threshold_above_every_distance():
    """Exact grid: every distinct distance and one above the largest (u[-1] + 1); pairs
    without a feature (-inf) are left out of the grid and never predicted same."""
    s = np.array([0.5, 0.25, 0.5, 0.0])     # d = 1, 1.5 | 1, 2; grid 1, 1.5, 2, 3
    y = np.array([1, 1, 1, 1])
    # test '0' trained on d 1, 2: only t=3 takes both; test '1' on d 1, 1.5: t=2 first
    got = kfold_accuracy(s, y, np.array(["0", "0", "1", "1"]), "exact")
    assert got.thresholds.tolist() == [3.0, 2.0] and got.accuracies.tolist() == [1.0, 0.5]
    s = np.array([0.5, -np.inf, 0.0, -np.inf])   # d = 1, inf | 2, inf; grid 1, 2, 3
    y = np.array([1, 0, 1, 0])
    got = kfold_accuracy(s, y, np.array(["0", "0", "1", "1"]), "exact")
    assert got.thresholds.tolist() == [3.0, 2.0] and got.accuracies.tolist() == [1.0, 0.5]
    none = kfold_accuracy(np.array([-np.inf] * 4), np.array([1, 0, 1, 0]),
                          np.array(["0", "0", "1", "1"]), "exact")
    assert none.thresholds.tolist() == [0.0, 0.0] and none.accuracies.tolist() == [0.5, 0.5]


def test_kfold_ties_go_to_the_first_threshold_and_bad_calls_are_refused():
    """A threshold that ties the best training accuracy later in the grid is not chosen;
    fewer than two folds and an unknown grid name are errors."""
    s = np.array([0.75, 0.1, 0.75, 0.1])       # d = 0.5, 1.8: every t in (0.5, 1.8] ties
    y = np.array([1, 0, 1, 0])
    got = kfold_accuracy(s, y, np.array(["0", "0", "1", "1"]),
                         np.array([1.5, 0.6, 1.0, 0.1]))
    assert got.thresholds.tolist() == [0.6, 0.6]
    assert got.accuracies.tolist() == [1.0, 1.0]
    assert kfold_accuracy(s, y, np.array(["0", "0", "1", "1"])).thresholds.tolist() == \
        pytest.approx([0.51, 0.51])
    with pytest.raises(ValueError, match="^k-fold accuracy needs at least two folds$"):
        kfold_accuracy(s, y, np.array(["0"] * 4))
    with pytest.raises(ValueError, match=r"^unknown threshold grid 'fine' "
                                         r"\(insightface \| exact\)$"):
        kfold_accuracy(s, y, np.array(["0", "0", "1", "1"]), "fine")


def test_kfold_training_accuracy_pools_the_other_folds_by_pairs():
    """The threshold is chosen on the other folds pooled pair by pair (not the mean of
    their accuracies): fold '2' holds 1 pair that wants t=0.5, fold '1' 4 pairs that
    want t=1.5; tested on fold '0', the pooled choice is 1.5."""
    s = np.array([0.5, 0.5, 0.5, 0.5, 0.5, 0.5,     # d = 1
                  0.5, 0.5, 0.5, 0.5,
                  0.5])
    y = np.array([1, 0, 1, 1, 0, 1,
                  1, 1, 1, 1,
                  0])
    f = np.array(["0"] * 6 + ["1"] * 4 + ["2"])
    got = kfold_accuracy(s, y, f, np.array([0.5, 1.5]))
    # test '0': train '1'+'2' -> t 0.5: 1/5 right, t 1.5: 4/5 -> 1.5; fold '0' at 1.5: 4/6
    # test '1': train '0'+'2' -> t 0.5: 3/7, t 1.5: 4/7 -> 1.5 -> 4/4
    # test '2': train '0'+'1' -> t 0.5: 2/10, t 1.5: 8/10 -> 1.5 -> 0/1
    assert got.thresholds.tolist() == [1.5, 1.5, 1.5]
    assert got.accuracies.tolist() == pytest.approx([4 / 6, 1.0, 0.0])
    assert got.mean == pytest.approx((4 / 6 + 1) / 3)


# -------------------------------------------------------------------------- ROC, AUC, EER

def test_roc_points_and_auc_match_the_loops_with_ties_and_failed_pairs():
    """With ties and pairs without a feature (-inf, tied among themselves)."""
    rng = np.random.default_rng(2)
    y = np.r_[1, 0, rng.integers(0, 2, 60)]
    s = np.round(rng.normal(0.3 * y, 0.3), 1)
    s[[3, 8, 11]] = -np.inf
    far, tar, thr = roc_points(s, y)
    bf, bt, bthr = brute_roc(s, y)
    np.testing.assert_allclose(far, bf, rtol=0, atol=1e-15)
    np.testing.assert_allclose(tar, bt, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(thr, bthr)
    assert auc_score(s, y) == pytest.approx(brute_auc(s, y), abs=1e-12)
    assert isinstance(auc_score(s, y), float)
    with pytest.raises(ValueError, match="^ROC needs genuine and impostor pairs$"):
        roc_points([0.1, 0.2], [0, 0])
    with pytest.raises(ValueError, match="^ROC needs genuine and impostor pairs$"):
        roc_points([0.1, 0.2], [1, 1])
    with pytest.raises(ValueError, match="^AUC needs genuine and impostor pairs$"):
        auc_score([0.1, 0.2], [0, 0])


def test_roc_and_auc_with_one_genuine_or_one_impostor_pair():
    """One pair of a class is enough for a curve and an AUC."""
    far, tar, thr = roc_points([0.9, 0.1], [1, 0])
    assert far.tolist() == [0.0, 0.0, 1.0] and tar.tolist() == [0.0, 1.0, 1.0]
    assert thr.tolist() == [np.inf, 0.9, 0.1]
    far, tar, _ = roc_points([0.2, 0.6, 0.4], [1, 0, 1])
    assert far.tolist() == [0.0, 1.0, 1.0, 1.0] and tar.tolist() == [0.0, 0.0, 0.5, 1.0]
    assert auc_score([0.5, 0.6, 0.1], [1, 0, 0]) == 0.5
    assert auc_score([0.5, 0.6, 0.1], [0, 1, 1]) == 0.5


def test_auc_by_hand():
    # genuine 0.8, 0.4; impostor 0.4, 0.1: pairs (0.8>0.4, 0.8>0.1, 0.4=0.4, 0.4>0.1)
    assert auc_score([0.8, 0.4, 0.4, 0.1], [1, 1, 0, 0]) == pytest.approx(3.5 / 4)
    # three genuine, one impostor in the middle
    assert auc_score([0.9, 0.5, 0.1, 0.3], [1, 1, 1, 0]) == pytest.approx(2 / 3)


def test_eer_interpolates_between_the_points_where_frr_and_far_cross():
    """By hand: FRR - FAR goes 1, 0.5, -0.5 -> crossing halfway between points 1 and 2."""
    far = np.array([0.0, 0.0, 0.5, 1.0])
    tar = np.array([0.0, 0.5, 1.0, 1.0])
    thr = np.array([np.inf, 0.8, 0.4, 0.1])
    eer, t = equal_error_rate(far, tar, thr)
    assert eer == pytest.approx(0.25) and t == pytest.approx(0.6)
    # a weight of 1/3: diff 0.6 -> -0.3 between FAR 0.1 and 0.4, thresholds 0.7 -> 0.4
    far = np.array([0.0, 0.1, 0.4])
    tar = np.array([0.0, 0.3, 0.3])
    thr = np.array([np.inf, 0.7, 0.4])
    eer, t = equal_error_rate(far, tar, thr)   # diffs 1, 0.6, 0.3: never <= 0 -> argmax 0
    assert (eer, t) == (0.0, np.inf)
    tar = np.array([0.0, 0.3, 0.9])             # diffs 1, 0.6, -0.3
    eer, t = equal_error_rate(far, tar, thr)
    assert eer == pytest.approx(0.1 + (0.6 / 0.9) * 0.3)
    assert t == pytest.approx(0.7 + (0.6 / 0.9) * (0.4 - 0.7))
    assert isinstance(eer, float) and isinstance(t, float)


def test_eer_at_a_point_and_next_to_the_infinite_thresholds():
    """diff exactly 0 at a point: that point's FAR and threshold; the first point's
    threshold +inf is replaced by the next one's; a crossing onto a last threshold of
    -inf (nonmatch) at weight 1 is -inf."""
    far = np.array([0.0, 0.5, 1.0])
    tar = np.array([0.0, 0.5, 1.0])
    thr = np.array([np.inf, 0.3, 0.1])
    assert equal_error_rate(far, tar, thr) == (pytest.approx(0.5), pytest.approx(0.3))
    # crossing between the +inf point and the first: diff 1 -> -0.5, weight 2/3
    far, tar = np.array([0.0, 0.5]), np.array([0.0, 1.0])
    eer, t = equal_error_rate(far, tar, np.array([np.inf, 0.6]))
    assert eer == pytest.approx(1 / 3) and t == pytest.approx(0.6)
    # diff 0.5 -> 0.0 at a -inf last threshold: weight 1, t = -inf
    far, tar = np.array([0.0, 0.25, 0.5]), np.array([0.0, 0.25, 0.5])
    eer, t = equal_error_rate(far, tar, np.array([np.inf, 0.2, -np.inf]))
    assert eer == pytest.approx(0.5) and t == -np.inf
    # diffs 1, 0, 0: the first point at 0 (weight 1 from the +inf point)
    far, tar = np.array([0.0, 0.25, 0.5]), np.array([0.0, 0.75, 0.5])
    eer, t = equal_error_rate(far, tar, np.array([np.inf, 0.5, -np.inf]))
    assert eer == 0.25 and t == 0.5


# ------------------------------------------------------------------ impostor allowance

def test_allowed_impostors_counts_and_weights():
    """floor(target * n) with a 1e-9 tolerance, clipped to [0, n]; weighted: the largest k
    with cum[k-1] <= target * total (+1e-9)."""
    assert allowed_impostors(10, [0.1, 0.15, 0.3, 0.0, 2.0, -0.5]).tolist() == [1, 1, 3, 0,
                                                                               10, 0]
    assert allowed_impostors(3, 1 / 3).tolist() == [1]       # 1/3 * 3 = 0.999..: allows 1
    assert allowed_impostors(np.int64(7), 0.5).dtype == np.int64
    cum = np.cumsum([2.0, 1.0, 0.0, 3.0, 4.0])               # 2 3 3 6 10
    assert allowed_impostors(cum, [0.2, 0.3, 0.25, 0.6, 1.0, 0.0]).tolist() == [
        1, 3, 1, 4, 5, 0]
    assert allowed_impostors(np.cumsum([0.1] * 10), 0.3).tolist() == [3]  # float sums
    assert allowed_impostors(np.array([]), [0.5]).tolist() == [0]
    # cum[k - 1] equal to target * total + 1e-9 is still allowed (<=, not <)
    assert allowed_impostors(np.array([0.25, 0.5 + 1e-9, 2.0]), 0.25).tolist() == [2]
    assert allowed_impostors(cum, 0.3).dtype == np.int64


def test_min_impostors_and_resolvability():
    assert [min_impostors(f) for f in (1e-3, 1e-4, 0.3, 0.25, 1 / 3, 1.0)] == [
        1000, 10000, 4, 4, 3, 1]
    assert far_resolvable(1000, 1e-3) is True and far_resolvable(999, 1e-3) is False
    assert far_resolvable(3, 1 / 3) is True and far_resolvable(2, 1 / 3) is False
    assert far_resolvable(0, np.nan) is True
    # the tolerance's edge: n * far exactly 1 - 1e-9 resolves (>=), as min_impostors says
    assert min_impostors(1 - 1e-9) == 1 and far_resolvable(1, 1 - 1e-9) is True
    got = far_resolvable(np.array([10, 9, 0, 100]), np.array([0.1, 0.1, np.nan, 0.001]))
    assert got.tolist() == [True, False, True, False]
    assert far_resolvable(np.array([5, 4]), 0.2).tolist() == [True, False]


def test_tar_at_far_by_hand_every_field():
    """Genuine 0.9 0.8 0.5 0.3; impostor 0.85 0.6 0.4 0.2 0.1: at FAR 0.4 (2 of 5) the
    lowest threshold, 0.5, accepts 3 genuine and 2 impostors."""
    s = np.array([0.9, 0.8, 0.5, 0.3, 0.85, 0.6, 0.4, 0.2, 0.1])
    y = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0])
    far, tar, thr = roc_points(s, y)
    r = tar_at_far(far, tar, thr, 0.4, 5)
    assert r == {"tar": 0.75, "far_reached": 0.4, "threshold": 0.5, "n_false_accepts": 2,
                 "n_impostors": 5, "resolvable": True}
    r = tar_at_far(far, tar, thr, 0.5, 5)      # floor(2.5) = 2: the same
    assert r["threshold"] == 0.5 and r["n_false_accepts"] == 2
    r = tar_at_far(far, tar, thr, 0.19, 5)     # 0 allowed: above 0.85
    assert r == {"tar": 0.25, "far_reached": 0.0, "threshold": 0.9, "n_false_accepts": 0,
                 "n_impostors": 5, "resolvable": False}
    r = tar_at_far(far, tar, thr, 0.6, 5)      # 3 allowed: down to 0.3, TAR 4/4
    assert (r["tar"], r["threshold"], r["n_false_accepts"]) == (1.0, 0.3, 3)
    assert all(isinstance(r[k], float) for k in ("tar", "far_reached", "threshold"))
    assert isinstance(r["n_false_accepts"], int) and isinstance(r["resolvable"], bool)


def test_det_points_are_probits_clipped():
    far = np.array([0.0, 0.1, 0.5, 1.0])
    tar = np.array([0.0, 0.5, 0.9, 1.0])
    x, y = det_points(far, tar)
    np.testing.assert_allclose(x, norm.ppf([1e-6, 0.1, 0.5, 1 - 1e-6]), rtol=1e-12)
    np.testing.assert_allclose(y, norm.ppf([1 - 1e-6, 0.5, 0.1, 1e-6]), rtol=1e-12)
    x, y = det_points(far, tar, clip=0.2)
    np.testing.assert_allclose(x, norm.ppf([0.2, 0.2, 0.5, 0.8]), rtol=1e-12)


# ---------------------------------------------------------------------- the table row

def test_verification_metrics_row_by_hand():
    """Every key of one row, on the pairs of the tar_at_far example in two folds."""
    s = np.array([0.9, 0.8, 0.5, 0.3, 0.85, 0.6, 0.4, 0.2, 0.1, -np.inf])
    y = np.array([1, 1, 1, 1, 0, 0, 0, 0, 0, 1])
    f = np.array(["0", "1"] * 5)
    row = verification_metrics(s, y, f, fars=(0.4, 0.05))
    acc = kfold_accuracy(s, y, f)
    far, tar, thr = roc_points(s, y)
    eer, eer_t = equal_error_rate(far, tar, thr)
    assert list(row) == [
        "n_pairs", "n_genuine", "n_impostor", "n_folds", "accuracy", "accuracy_std",
        "threshold_cosine_mean", "auc", "eer", "eer_threshold", "genuine_mean",
        "impostor_mean",
        "tar@far=4e-1", "far_reached@far=4e-1", "threshold@far=4e-1", "false_accepts@far=4e-1",
        "resolvable@far=4e-1",
        "tar@far=5e-2", "far_reached@far=5e-2", "threshold@far=5e-2", "false_accepts@far=5e-2",
        "resolvable@far=5e-2"]
    assert (row["n_pairs"], row["n_genuine"], row["n_impostor"], row["n_folds"]) == (10, 5, 5,
                                                                                      2)
    assert row["accuracy"] == acc.mean and row["accuracy_std"] == acc.std
    assert row["threshold_cosine_mean"] == pytest.approx(np.mean(1 - acc.thresholds / 2))
    assert row["auc"] == pytest.approx(brute_auc(s, y))
    assert (row["eer"], row["eer_threshold"]) == (eer, eer_t)
    assert row["genuine_mean"] == pytest.approx((0.9 + 0.8 + 0.5 + 0.3) / 4)
    assert row["impostor_mean"] == pytest.approx((0.85 + 0.6 + 0.4 + 0.2 + 0.1) / 5)
    # 5 genuine now: at FAR 0.4 the threshold 0.5 accepts 0.9, 0.8, 0.5 -> 3/5
    assert row["tar@far=4e-1"] == pytest.approx(0.6)
    assert row["far_reached@far=4e-1"] == 0.4 and row["threshold@far=4e-1"] == 0.5
    assert row["false_accepts@far=4e-1"] == 2 and row["resolvable@far=4e-1"] is True
    assert row["tar@far=5e-2"] == pytest.approx(0.2) and row["threshold@far=5e-2"] == 0.9
    assert row["false_accepts@far=5e-2"] == 0 and row["resolvable@far=5e-2"] is False


def test_verification_metrics_defaults_grid_and_one_fold():
    """Default targets 1e-3 and 1e-4 (keys '1e-3', '1e-4'); the grid reaches the accuracy;
    one fold: accuracy, std and threshold NaN, n_folds 1."""
    rng = np.random.default_rng(1)
    y = rng.integers(0, 2, 50)
    s = np.where(y == 1, 0.6005, 0.6) + rng.normal(0, 0.0004, 50)
    f = (np.arange(50) % 5).astype(str)
    row = verification_metrics(s, y, f)
    assert [k for k in row if k.startswith("tar@")] == ["tar@far=1e-3", "tar@far=1e-4"]
    assert row["accuracy"] == kfold_accuracy(s, y, f, "insightface").mean
    exact = verification_metrics(s, y, f, thresholds="exact")
    assert exact["accuracy"] == kfold_accuracy(s, y, f, "exact").mean
    assert exact["accuracy"] != row["accuracy"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")     # no "mean of empty slice" for one fold
        one = verification_metrics(s, y, np.full(50, "x"), fars=(1e-10,))
    assert one["n_folds"] == 1 and "tar@far=1e-10" in one
    assert np.isnan(one["accuracy"]) and np.isnan(one["accuracy_std"])
    assert np.isnan(one["threshold_cosine_mean"])
    assert one["auc"] == pytest.approx(brute_auc(s, y))
