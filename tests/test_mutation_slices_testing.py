"""Issue 51: the identity-clustered slice test (facecast.slices.testing) pinned against a
brute-force computation written here from the module's definitions: the score statistic,
its null variance, the p-value (the larger of Student's t / normal and the binomial tail),
the Korn-Graubard interval of the slice's rate and the FDR adjustment, so a mutant of
`make mutate MODULES=slices.testing` that changes a number fails here."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from facecast.slices.testing import T_DF_MAX, Design, adjust, korn_graubard


def kg(rate, n, var, df, conf=0.95):
    """Korn & Graubard's interval from scipy.stats: Clopper-Pearson at the effective size
    ``min(n, r (1 - r) / var)`` (``n`` where the rate is 0 or 1 or the variance is not
    positive), times ``(z / t_df)^2`` for a finite ``df``."""
    if n == 0 or not np.isfinite(rate):
        return np.nan, np.nan
    n_eff = min(n, rate * (1 - rate) / var) if 0 < rate < 1 and var > 0 else n
    a = (1 - conf) / 2
    if np.isfinite(df):
        n_eff *= (stats.norm.ppf(a) / stats.t.ppf(a, df)) ** 2
    x = rate * n_eff
    lo = stats.beta.ppf(a, x, n_eff - x + 1) if x > 0 else 0.0
    hi = stats.beta.ppf(1 - a, x + 1, n_eff - x) if x < n_eff else 1.0
    return lo, hi


def test_korn_graubard_is_clopper_pearson_at_the_effective_size():
    """At the independent variance and infinite df: the textbook Clopper-Pearson interval
    of 3 / 10 (0.0667, 0.6525); a larger variance shrinks the size; a finite df shrinks it
    by (z / t)^2; rates 0 and 1 take the one-sided ends; n = 0 or a NaN rate: NaN."""
    lo, hi = korn_graubard(np.array([0.3]), np.array([10.0]), np.array([0.3 * 0.7 / 10]),
                           np.array([np.inf]), 0.95)
    assert lo[0] == pytest.approx(0.0667395, abs=1e-6)
    assert hi[0] == pytest.approx(0.6524529, abs=1e-6)
    cases = [(0.3, 10, 0.3 * 0.7 / 10, np.inf), (0.3, 10, 0.05, np.inf), (0.3, 10, 0.05, 4),
             (0.3, 10, 0.001, np.inf), (0.0, 12, 0.0, np.inf), (1.0, 12, 0.0, 5),
             (0.25, 8, 0.0, 3), (0.25, 8, -0.01, np.inf), (0.5, 0, 0.01, np.inf),
             (np.nan, 6, 0.01, np.inf), (0.2, 30, 0.004, 1),
             # rates 0 and 1 with a positive variance keep the full size; one pair
             (0.0, 12, 0.01, np.inf), (1.0, 12, 0.01, np.inf), (1.0, 1, 0.0, np.inf),
             (0.0, 1, 0.0, 3)]
    r, n, v, d = (np.array(c, np.float64) for c in zip(*cases, strict=True))
    for conf in (0.95, 0.8):
        lo, hi = korn_graubard(r, n, v, d, conf)
        want = np.array([kg(*c, conf) for c in cases])
        np.testing.assert_allclose(lo, want[:, 0], rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(hi, want[:, 1], rtol=1e-9, atol=1e-12)
    assert np.isnan(lo[8]) and np.isnan(hi[9]) and lo[4] == 0.0 and hi[5] == 1.0
    assert lo[-2] == pytest.approx(0.1 ** (1 / 1), rel=1e-12)     # (a)^(1/n) at x = n = 1
    assert hi[11] < 1.0 and lo[12] > 0.0                        # full size at rates 0, 1


def test_adjust_is_benjamini_hochberg_step_up_with_ties_caps_and_family_size():
    """q_(i) = min over j >= i of p_(j) m / j, capped at 1, in the caller's order; BY
    multiplies by the harmonic sum of m; an unknown method is refused by name."""
    p = np.array([0.04, 0.001, 0.03, 0.03, 0.9, 0.02])
    m = len(p)
    order = np.argsort(p, kind="stable")
    raw = p[order] * m / np.arange(1, m + 1)
    q_sorted = np.array([raw[i:].min() for i in range(m)])
    want = np.empty(m)
    want[order] = np.minimum(q_sorted, 1)
    np.testing.assert_allclose(adjust(p), want, rtol=1e-12)
    np.testing.assert_allclose(adjust(p, "bh"), [0.048, 0.006, 0.045, 0.045, 0.9, 0.045],
                               rtol=1e-12)
    h6 = sum(1 / k for k in range(1, 7))
    np.testing.assert_allclose(adjust(p, "by"), np.minimum(want * h6, 1), rtol=1e-12)
    assert adjust(p, "by")[4] == 1.0                      # 0.9 * 2.45: capped
    # a family of 10 with four untested members; n_tests below len(p) changes nothing
    np.testing.assert_allclose(adjust(p, n_tests=10), np.minimum(want * 10 / 6, 1),
                               rtol=1e-12)
    h10 = sum(1 / k for k in range(1, 11))
    np.testing.assert_allclose(adjust(p, "by", n_tests=10),
                               np.minimum(want * 10 / 6 * h10, 1), rtol=1e-12)
    np.testing.assert_allclose(adjust(p, n_tests=3), want, rtol=1e-12)
    np.testing.assert_allclose(adjust(p, n_tests=None), want, rtol=1e-12)
    empty = adjust(np.array([]), n_tests=5)
    assert empty.shape == (0,) and empty.dtype == np.float64
    with pytest.raises(ValueError, match=r"^unknown FDR method 'holm' \(bh \| by\)$"):
        adjust(p, "holm")
    assert adjust([0.5])[0] == 0.5 and adjust([0.5], n_tests=4)[0] == 1.0


def _data(n: int = 400, n_ids: int = 45, seed: int = 4):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, n_ids, n)
    b = np.where(rng.random(n) < 0.35, a, (a + rng.integers(1, n_ids, n)) % n_ids)
    err = rng.random(n) < np.where(a % 3 == 0, 0.45, 0.15)
    return a, b, err


def _share(a, b):
    """``share[j, k]``: pairs ``j`` and ``k`` have a person in common (``j == k`` too)."""
    sa, sb = a[:, None], b[:, None]
    return (sa == a) | (sa == b) | (sb == a) | (sb == b)


def _brute(a, b, err, member, codes, conf=0.95):
    """z, p, identities and interval of one slice from their definitions, pair by pair."""
    n = len(a)
    share = _share(a, b)
    rate = np.array([err[codes == c].mean() for c in codes])
    pi = np.array([member[codes == c].mean() for c in codes])
    t = (member - pi) * (err - rate)
    g = len(set(a[member]) | set(b[member]))
    null_own = ((member - pi) ** 2 * rate * (1 - rate)).sum()
    cr1 = g / (g - 1) if g >= 2 else np.nan
    v = null_own + cr1 * max(t @ share @ t - t @ t, 0.0)
    z = t.sum() / np.sqrt(v) if g >= 2 and v > 0 else np.nan
    df = np.inf if g - 1 > T_DF_MAX else max(g - 1, 1)
    p_cluster = stats.t.sf(z, df) if np.isfinite(z) else 1.0
    n_s, e_s = int(member.sum()), int((member & err).sum())
    expected = rate[member].mean() if n_s else 0.0
    p_binom = stats.binom.sf(e_s - 1, n_s, expected) if e_s >= 1 else 1.0
    r = e_s / n_s if n_s else np.nan
    u = member * (err - (0.0 if np.isnan(r) else r))
    v_rate = cr1 * (u @ share @ u) / max(n_s, 1) ** 2
    lo, hi = kg(r, n_s, v_rate, df, conf)
    assert n == len(b)
    return z, max(p_cluster, p_binom), g, lo, hi


def test_slice_test_matches_the_pair_by_pair_definitions():
    """Several slices at once (columns), unstratified and stratified, at two confidence
    levels: z, p, the slice's identities and its rate interval as computed pair by pair;
    the slices cover the normal (more than 31 identities) and Student's t references, a
    slice of one identity (no test, the binomial p) and an empty slice."""
    a, b, err = _data()
    n = len(a)
    rng = np.random.default_rng(9)
    cols = [a % 3 == 0,                          # the worse identities: many ids, normal
            (a < 12) & (a == b),                 # genuine pairs of 12 identities: t, df 11
            (a == 3) & (b == 3),                 # one identity: no clustered test
            rng.random(n) < 0.2,                 # a random slice
            np.zeros(n, bool),                   # empty
            (a < 5) | (b < 5),                   # a few identities, impostor pairs too
            np.isin(a, [0, 3]) & np.isin(b, [0, 3])]     # two identities: CR1 = 2
    # six impostor pairs, one with an error: a small variance (below 1), one error
    imp = np.flatnonzero(a != b)
    few = np.r_[imp[~err[imp]][:5], imp[err[imp]][:1]]
    cols.append(np.isin(np.arange(n), few))
    member = np.column_stack(cols)
    design = Design(a.astype(str), b.astype(str), err)
    strata = rng.integers(0, 3, n)
    strata[few[-1]] = 3                          # a cell of one pair, with an error
    for codes, conf in ((np.zeros(n, int), 0.95), (strata, 0.9)):
        res = design.test(design.members(member), design.strata(codes), conf)
        for k, col in enumerate(cols):
            z, p, g, lo, hi = _brute(a, b, err, col, codes, conf)
            assert res.n_ids[k] == g
            np.testing.assert_allclose(res.z[k], z, rtol=1e-9)
            assert res.p[k] == pytest.approx(p, rel=1e-8, abs=1e-15)
            np.testing.assert_allclose([res.rate_lo[k], res.rate_hi[k]], [lo, hi],
                                       rtol=1e-8, atol=1e-12)
    # the references the slices exercise
    assert res.n_ids[0] > T_DF_MAX + 1 and res.n_ids[1] == 12 and res.n_ids[2] == 1
    assert res.n_ids[6] == 2 and 0 < err[cols[6]].mean() < 1
    assert err[cols[7]].sum() == 1 and np.isfinite(res.z[7])


@pytest.mark.parametrize("k", [29, 30, 31, 32, 33])
def test_student_t_up_to_30_degrees_of_freedom_then_normal(k):
    """A slice of ``k`` identities: Student's t with ``k - 1`` degrees of freedom while
    ``k - 1 <= 30`` (``T_DF_MAX``), the normal beyond: the interval and p at the edge."""
    ids = np.repeat(np.arange(40), 4)
    err = (np.arange(160) % 5 == 0) | (ids % 7 == 0)
    design = Design(ids, ids, err)
    member = ids < k
    res = design.test(design.members(member))
    z, p, g, lo, hi = _brute(ids, ids, err, member, np.zeros(160, int))
    assert res.n_ids[0] == g == k
    assert res.z[0] == pytest.approx(z, rel=1e-9) and res.p[0] == pytest.approx(p, rel=1e-8, abs=0)
    assert res.rate_lo[0] == pytest.approx(lo, rel=1e-9)
    assert res.rate_hi[0] == pytest.approx(hi, rel=1e-9)


def test_strata_in_design_order_codes_and_cells():
    """``strata(codes)`` takes the caller's order, ``ordered=True`` the design's; the cell
    codes are the rank of each pair's cell among the cells present, in design order."""
    a, b, err = _data(120, 15, seed=2)
    design = Design(a, b, err)
    codes = np.random.default_rng(3).choice([5, 9, 2], len(a))
    st = design.strata(codes)
    st2 = design.strata(codes[design.order], ordered=True)
    want = np.searchsorted([2, 5, 9], codes[design.order])
    assert st.codes.tolist() == st2.codes.tolist() == want.tolist()
    assert st.sizes.tolist() == [float((codes == c).sum()) for c in (2, 5, 9)]
    np.testing.assert_allclose(st.rates, [err[codes == c].mean() for c in (2, 5, 9)])
    member = design.members((a % 2 == 0) & (b % 3 == 0))
    r1, r2 = design.test(member, st), design.test(member, st2)
    assert r1.z[0] == r2.z[0] and r1.p[0] == r2.p[0]
    assert r1.z[0] != design.test(member, design.strata(codes, ordered=True)).z[0]


def test_default_strata_and_one_dimensional_members_are_the_overall_test():
    """No strata: the overall rate; a 1-D member is one slice; ``members`` puts the
    caller's pairs in the design's order (pairs given in a shuffled order)."""
    a, b, err = _data(240, 20, seed=7)
    perm = np.random.default_rng(1).permutation(len(a))
    a, b, err = a[perm], b[perm], err[perm]
    member = (a % 4 == 1) | (b % 4 == 1)
    design = Design(a, b, err)
    one = design.test(design.members(member))
    z, p, g, lo, hi = _brute(a, b, err, member, np.zeros(len(a), int))
    assert one.z.shape == (1,) and one.n_ids[0] == g
    assert one.z[0] == pytest.approx(z, rel=1e-9) and one.p[0] == pytest.approx(p, rel=1e-8, abs=0)
    assert one.rate_lo[0] == pytest.approx(lo, rel=1e-8)
    assert one.rate_hi[0] == pytest.approx(hi, rel=1e-8)
    assert design.rate == pytest.approx(err.mean(), rel=1e-15)
    assert design.n == len(a) and design.n_identities == len(set(a) | set(b))


def test_an_empty_design_has_no_rate():
    """No pair: no identity, no resampling unit and a NaN rate."""
    design = Design(np.array([], str), np.array([], str), np.array([], bool))
    assert design.n == 0 and design.n_identities == 0 and np.isnan(design.rate)
    assert design.unit.shape == (0,) and design.inc.shape == (0, 0)
    assert design.overall.sizes.shape == (0,) and design.overall.rates.shape == (0,)


def test_two_identities_get_the_cr1_factor_two():
    """Two identities of ten genuine pairs, one always wrong, one never: the rate's
    clustered variance is CR1 ``2 / 1`` times the dyadic sum (``0.25``), so the effective
    size is 1 pair, not 20 (the interval is as wide as one pair's)."""
    ids = np.repeat([0, 1], 10)
    err = ids == 0
    design = Design(ids, ids, err)
    res = design.test(np.ones(20, bool))
    z, p, g, lo, hi = _brute(ids, ids, err, np.ones(20, bool), np.zeros(20, int))
    assert res.n_ids[0] == g == 2
    want = kg(0.5, 20, 2 * (5 ** 2 + 5 ** 2) / 20 ** 2, 1)
    assert (lo, hi) == pytest.approx(want, rel=1e-12, abs=0)
    # one Student's t degree of freedom shrinks the size further: a tiny lower end
    assert 0 < res.rate_lo[0] < 1e-100
    assert res.rate_lo[0] == pytest.approx(want[0], rel=1e-9, abs=0)
    assert res.rate_hi[0] == pytest.approx(want[1], rel=1e-9, abs=0)
