"""Issue 51: `make mutate MODULES=mitigation.calibrate` - the penalised log-loss and its
optimum (the gradient vanishes; scikit-learn's solution at a finite C), the beta map's
normalisation, clipping and parameters, and the KS calibration error by hand, in one
pass and in blocks."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
from scipy.special import expit
from sklearn.linear_model import LogisticRegression

from facecast.mitigation.calibrate import (
    C_BETACAL,
    BetaMap,
    RunningKS,
    _loss,
    beta_fit,
    ks_error,
    ks_sorted,
    logistic_fit,
    normalise,
)

EPS = np.finfo(np.float64).eps


def test_loss_by_hand():
    """z = (0.25, 0.75): log(1 + e^z) - y z summed, plus lam theta^2 / 2 (0.1 * 0.25 / 2)."""
    x1 = np.array([[1.0, 1.0], [2.0, 1.0]])
    want = (math.log1p(math.exp(0.25)) + math.log1p(math.exp(0.75)) - 0.75
            + 0.5 * 0.1 * 0.25)
    assert _loss(x1, np.array([0.0, 1.0]), np.array([0.5, -0.25]),
                 np.array([0.1, 0.0])) == pytest.approx(want, abs=1e-15)


def _data(n=400, seed=1):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 2)) + np.array([0.3, -0.2])
    y = (x @ [1.5, -0.8] + 0.4 + rng.logistic(size=n) > 0).astype(float)
    return x, y


@pytest.mark.parametrize("c", [0.05, 1.0, C_BETACAL])
def test_logistic_fit_reaches_the_penalised_optimum(c):
    """The gradient of sum(log-loss) + ||w||^2 / (2c) (intercept unpenalised) vanishes at
    the returned solution, and it is scikit-learn's LogisticRegression(C=c)."""
    x, y = _data()
    w, b = logistic_fit(x, y, c=c)
    x1 = np.column_stack([x, np.ones(len(x))])
    theta = np.r_[w, b]
    grad = x1.T @ (expit(x1 @ theta) - y) + np.r_[w / c, 0.0]
    assert np.abs(grad).max() < 1e-7
    ref = LogisticRegression(C=c, tol=1e-12, max_iter=10_000).fit(x, y)
    assert w == pytest.approx(ref.coef_[0], abs=1e-5)
    assert b == pytest.approx(ref.intercept_[0], abs=1e-5)
    assert isinstance(b, float) and w.shape == (2,)


def test_logistic_fit_strong_penalty_pulls_only_the_weights():
    """At c = 1e-6 the weights are ~0 and the intercept is the labels' log-odds."""
    x, y = _data()
    w, b = logistic_fit(x, y, c=1e-6)
    assert np.abs(w).max() < 1e-3
    assert b == pytest.approx(math.log(y.mean() / (1 - y.mean())), abs=1e-3)


def test_logistic_fit_one_feature_as_a_vector_and_one_class():
    """A 1-D x is one feature; labels of one class are refused."""
    x, y = _data()
    w1, b1 = logistic_fit(x[:, 0], y)
    w2, b2 = logistic_fit(x[:, :1], y)
    assert w1.shape == (1,) and w1[0] == w2[0] and b1 == b2
    with pytest.raises(ValueError, match="^logistic regression needs labels of both classes$"):
        logistic_fit(x, np.ones(len(x)))


def test_logistic_fit_max_iter_and_tol_stop_early():
    """One Newton step from the log-odds start is not the optimum; a loose tolerance stops
    before it too; the defaults reach it."""
    x, y = _data()
    full_w, _ = logistic_fit(x, y)
    one_w, one_b = logistic_fit(x, y, max_iter=1)
    assert np.abs(one_w - full_w).max() > 1e-3
    # the one step by hand: from weights 0 and the labels' log-odds as intercept, a full
    # Newton step (it lowers the loss, so no halving)
    x1 = np.column_stack([x, np.ones(len(x))])
    theta = np.r_[0.0, 0.0, math.log(y.mean() / (1 - y.mean()))]
    p = expit(x1 @ theta)
    hess = x1.T @ (x1 * (p * (1 - p))[:, None]) + np.diag(np.r_[1 / C_BETACAL, 1 / C_BETACAL,
                                                                 0.0])
    step = theta - np.linalg.solve(hess, x1.T @ (p - y) + np.r_[theta[:2] / C_BETACAL, 0.0])
    assert np.r_[one_w, one_b] == pytest.approx(step, rel=1e-9)
    # tol 0.5: the first step lowers the loss by less than half of it (relative rule), stop
    loose_w, loose_b = logistic_fit(x, y, tol=0.5)
    assert np.abs(loose_w - full_w).max() > 1e-6
    assert np.r_[loose_w, loose_b].tolist() == np.r_[one_w, one_b].tolist()
    # tol 0: steps until no halving lowers the loss, then the last solution (the optimum)
    zero_w, zero_b = logistic_fit(x, y, tol=0.0)
    assert zero_w == pytest.approx(full_w, rel=1e-8) and isinstance(zero_b, float)


def test_normalise_and_beta_map_by_hand():
    """(s - lo) / (hi - lo); the map a ln s - b ln(1 - s) + c of the normalised score,
    clipped to [eps, 1 - eps]; the defaults are a cosine's [-1, 1]."""
    assert normalise(np.array([-1.0, 0.0, 1.0]), -1.0, 1.0).tolist() == [0.0, 0.5, 1.0]
    assert normalise([3.0], 2.0, 4.0).tolist() == [0.5]
    m = BetaMap(2.0, 0.5, -1.0, 0.0, 2.0)
    assert m.logit(np.array([1.0]))[0] == pytest.approx(1.5 * math.log(0.5) - 1.0)
    ends = m.logit(np.array([0.0, 2.0, -5.0, 7.0]))
    lo_end = 2.0 * math.log(EPS) - 0.5 * math.log1p(-EPS) - 1.0
    hi_end = 2.0 * math.log(1 - EPS) - 0.5 * math.log(EPS) - 1.0
    assert ends.tolist() == pytest.approx([lo_end, hi_end, lo_end, hi_end], rel=1e-12)
    assert m(np.array([1.0]))[0] == pytest.approx(expit(1.5 * math.log(0.5) - 1.0))
    assert m.as_list() == [2.0, 0.5, -1.0, 0.0, 2.0]
    d = BetaMap(1.0, 1.0, 0.0)
    assert (d.lo, d.hi) == (-1.0, 1.0)
    assert d.logit(np.array([0.5]))[0] == pytest.approx(math.log(0.75 / 0.25))


def test_beta_fit_bounds_and_clipped_ends():
    """Scores on [0, 2] fitted with lo=0, hi=2 give the map of the same scores shifted to
    [-1, 1]; scores at the bounds are clipped, not infinite."""
    rng = np.random.default_rng(7)
    s = np.r_[rng.uniform(-0.9, 0.9, 600), -1.0, 1.0]
    u = (s + 1) / 2
    y = (rng.random(len(s)) < expit(2.0 * np.log(np.clip(u, 0.01, 0.99)) + 0.3)).astype(int)
    m = beta_fit(s, y)
    shifted = beta_fit(s + 1.0, y, lo=0.0, hi=2.0)
    assert (m.lo, m.hi, shifted.lo, shifted.hi) == (-1.0, 1.0, 0.0, 2.0)
    assert [shifted.a, shifted.b, shifted.c] == pytest.approx([m.a, m.b, m.c], rel=1e-9)
    assert np.isfinite([m.a, m.b, m.c]).all() and m.a > 0
    feats = np.column_stack([np.log(np.clip(u, EPS, 1 - EPS)),
                             -np.log1p(-np.clip(u, EPS, 1 - EPS))])
    w, _ = logistic_fit(feats, y)
    assert w[0] > 0 > w[1]  # these data drop b: the map is ln s's own fit, the ends clipped
    (a,), c = logistic_fit(feats[:, :1], y)
    assert [m.a, m.b, m.c] == pytest.approx([a, 0.0, c], rel=1e-9)


def test_ks_sorted_by_hand_and_without_weight():
    """Row 0: running sums 0.5, 0.25, 0.5, 0 of unit weights -> 0.5 / 4; row 1: no weight
    -> NaN; row 2 (weights 2, 0, 1, 1): 1, 1, 1.25, 0.75 -> 1.25 / 4; with the first gap
    -0.75: -1.5, -1.5, -1.25, -1.75 -> 1.75 / 4."""
    gap = np.array([0.5, -0.25, 0.25, -0.5])
    w = np.array([[1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0], [2.0, 0.0, 1.0, 1.0]])
    gap2 = np.array([-0.75, 0.25, 0.25, -0.5])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ks_sorted(w, gap)
        got2 = ks_sorted(w[2:], gap2)
        empty = ks_sorted(np.ones((2, 0)), np.array([]))
    assert got[0] == 0.125 and np.isnan(got[1]) and got[2] == pytest.approx(1.25 / 4)
    # a row of total weight 0.5 is a figure: running sums 0.0625, 0.03125, 0.0625, 0
    assert ks_sorted(np.full((1, 4), 0.125), gap).tolist() == pytest.approx([0.0625 / 0.5])
    assert got2.tolist() == pytest.approx([1.75 / 4])
    assert np.isnan(empty).all() and empty.shape == (2,)


def test_running_ks_in_blocks_is_ks_sorted():
    """The same numbers in blocks of 2, 0 and 3 pairs; a row without weight is NaN; no
    block at all gives NaN without a warning."""
    rng = np.random.default_rng(3)
    gap = rng.normal(size=5)
    w = np.vstack([np.ones(5), np.zeros(5), rng.integers(0, 3, 5).astype(float)])
    r = RunningKS(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for lo, hi in ((0, 2), (2, 2), (2, 5)):
            r.add(w[:, lo:hi], gap[lo:hi])
        got = r.result()
        none = RunningKS(2).result()
    want = ks_sorted(w, gap)
    assert np.isnan(got[1]) and np.isnan(want[1])
    assert got[[0, 2]].tolist() == pytest.approx(want[[0, 2]].tolist(), rel=1e-14)
    # row 0 by hand: the largest |running sum| over all five pairs, over 5
    assert got[0] == pytest.approx(np.abs(np.cumsum(gap)).max() / 5)
    assert r.total.tolist() == [5.0, 0.0, w[2].sum()]
    assert np.isnan(none).all() and none.shape == (2,)


def test_ks_error_sorts_by_probability_and_takes_one_weight_row():
    """Probabilities 0.9, 0.1, 0.6 with labels 1, 0, 0 sort to gaps 0.1, 0.6, -0.1:
    running sums 0.1, 0.7, 0.6 -> 0.7 / 3; a 1-D weight vector is one row (weights follow
    the pairs into that order: 2, 1, 0 -> sums 0.2, 0.8 over 3)."""
    p = np.array([0.9, 0.1, 0.6])
    y = np.array([1, 0, 0])
    assert ks_error(p, y).tolist() == pytest.approx([0.7 / 3])
    got = ks_error(p, y, np.array([0.0, 2.0, 1.0]))
    assert got.shape == (1,) and got[0] == pytest.approx(0.8 / 3)


def test_running_ks_carries_the_last_sum_into_the_next_block():
    """Blocks of 3 and 2 pairs, gaps 0.1, 0.1, 0.1 | 0.5, -0.9: running sums 0.1, 0.2,
    0.3 | 0.8, -0.1; the largest (0.8) is the second block's first, which carries the
    first block's last sum (0.3). A row of total weight 0.5 (five pairs of 0.1) is a
    figure, not NaN: 0.08 / 0.5."""
    gap = np.array([0.1, 0.1, 0.1, 0.5, -0.9])
    w = np.vstack([np.ones(5), np.full(5, 0.1)])
    r = RunningKS(2)
    r.add(w[:, :3], gap[:3])
    r.add(w[:, 3:], gap[3:])
    assert r.result().tolist() == pytest.approx([0.8 / 5, 0.08 / 0.5], rel=1e-12)
    assert r.last.tolist() == pytest.approx([-0.1, -0.01], abs=1e-12)


def test_ks_error_keeps_tied_probabilities_in_pair_order():
    """Many tied probabilities (0, 0.5, 1): the pairs sorted by (probability, position),
    as a stable sort orders them (here by Python's sort, not numpy's): another order of
    the ties changes the running sums (0.1475 instead of 0.135 for these pairs)."""
    rng = np.random.default_rng(0)
    p = rng.integers(0, 3, 200) / 2
    y = rng.integers(0, 2, 200)
    order = np.array(sorted(range(200), key=lambda i: (p[i], i)))
    want = np.abs(np.cumsum(p[order] - y[order])).max() / 200
    assert want == pytest.approx(0.135)
    assert ks_error(p, y).tolist() == pytest.approx([want], rel=1e-12)


def test_beta_fit_keeps_a_coefficient_between_0_and_1_and_its_bounds():
    """Both coefficients positive, a below 1 (data from a = 0.5, b = 1.5): the map is the
    full two-feature fit, on the given bounds [0, 2]."""
    rng = np.random.default_rng(11)
    s = rng.uniform(0.05, 1.95, 3000)
    u = s / 2
    y = (rng.random(3000) < expit(0.5 * np.log(u) - 1.5 * np.log1p(-u) + 0.2)).astype(int)
    m = beta_fit(s, y, lo=0.0, hi=2.0)
    w, b = logistic_fit(np.column_stack([np.log(u), -np.log1p(-u)]), y)
    assert 0 < w[0] < 1 and w[1] > 0
    assert [m.a, m.b, m.c] == pytest.approx([w[0], w[1], b], rel=1e-9)
    assert (m.lo, m.hi) == (0.0, 2.0)
