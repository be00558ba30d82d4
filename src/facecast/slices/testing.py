"""Identity-clustered tests and intervals of slice error rates, and false-discovery control.

Pairs of the same people are not independent: two pairs are dependent when they share an
identity (a genuine pair has one identity, an impostor pair two). The variances below
follow the cluster-robust variance for such *dyadic* data (Fafchamps & Gubert 2007;
Cameron & Miller 2014; Aronow, Samii & Assenova 2015): for a sum ``T = sum_j t_j`` over
the relevant pairs,

    V = sum_i (sum_{j touches i} t_j)^2  -  sum_u (sum_{j in u} t_j)^2

over identities ``i`` and impostor identity pairs ``u`` (pairs of the same two people are
counted twice by the first sum, once by the second): every pair of pairs that shares a
person enters, once. It is computed from per-identity and per-identity-pair sums (sparse
operators over the pairs), so a slice costs its pairs plus the identities and identity
pairs, never replicates; the small-sample factor ``g / (g - 1)`` (``g``: identities in the
slice, CR1) is applied.

**Test of a slice** (:meth:`Design.test`): the effect is ``err(S) - err(rest)``; its score
statistic under "no difference" is ``T = sum_j (m_j - pi)(e_j - p)`` (``m_j``: in the
slice, ``pi`` its share of the pairs, ``e_j`` the 0/1 error, ``p`` the overall rate), which
equals ``err(S) - |S| p``. Its variance under that null: each pair's own term at its null
expectation ``p (1 - p) (m_j - pi)^2`` (the observed ``(e_j - p)^2`` of a slice's own
errors grows with a real effect - for rare errors, FMR, the variance would follow the
observed count instead of the expected one and the test would lose most of its power),
plus the cross terms of distinct pairs that share a person, from the data (CR1, never
taken below 0: anti-clustering is not claimed). One-sided (the slice is worse):
``p = F(-T / sqrt(V))``, ``F`` Student's t with ``g - 1`` degrees of freedom (normal
beyond 30). **Stratified** (``strata``): ``p`` becomes each pair's stratum rate and ``pi``
the slice's share of each stratum - the test of a slice's effect *beyond* a set of other
slices (the strata are the cells of their memberships), used to group slices into
findings.

A variance estimated per slice is itself noisy, and a search over thousands of slices finds
the ones where it came out too small; the normal reference is also poor for rare errors
(FMR). So the reported p is the larger of the clustered p and the exact binomial tail
``P(Bin(|S|, p) >= err(S))`` (the p-value if every pair were independent; stratified: at
the slice's mean stratum rate). That binomial p is not a lower bound of an honest p in
general - errors that cluster *less* than independent ones (negative within-identity
correlation) have a smaller honest p - it is a guard: a valid p made larger stays valid
(conservative), at a cost in power only where errors anti-cluster, which face recognition
errors, shared by the images of hard identities, rarely do.

**Interval of a slice's error rate** (:meth:`Design.test`): Korn & Graubard's (1998)
Clopper-Pearson interval at the effective sample size ``n* = r (1 - r) / V(r)`` (the
dyadic cluster-robust variance of the ratio ``r = err(S) / |S|``, ``n*`` at most ``|S|``),
degrees-of-freedom adjusted: in [0, 1], asymmetric where errors are rare.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import sparse
from scipy.special import bdtrc, betaincinv, ndtri, stdtr, stdtrit

#: more identities than this: the normal reference instead of Student's t
T_DF_MAX = 30


@dataclass
class TestResult:
    """Per slice (arrays, one entry per column of the membership): the test (``z``,
    ``p``), identities ``n_ids`` and the rate interval."""

    z: np.ndarray
    p: np.ndarray
    n_ids: np.ndarray
    rate_lo: np.ndarray
    rate_hi: np.ndarray


@dataclass
class Strata:
    """Cells of the relevant pairs (``codes``; design order) with their sizes and error
    rates and each pair's ``dev = e - rate``; as sparse operators over pairs: cell
    membership (``cells``, ``(C, n)``), ``dev^2`` per cell (``cells_dev2``) and ``dev`` per
    identity / impostor identity pair (``inc_dev``, ``uinc_dev``); per cell the sum of
    ``dev^2`` and per identity / identity pair the sums of ``dev`` in each cell (``g``:
    ``(I, C)``, ``d``: ``(U, C)``)."""

    codes: np.ndarray
    rates: np.ndarray
    sizes: np.ndarray
    dev: np.ndarray
    dev2: np.ndarray
    cells: sparse.csr_matrix
    cells_dev2: sparse.csr_matrix
    inc_dev: sparse.csr_matrix
    uinc_dev: sparse.csr_matrix
    g: np.ndarray
    d: np.ndarray


def _vm(v: np.ndarray, m: np.ndarray) -> np.ndarray:
    """``v @ m`` without BLAS (tiny products: BLAS threads cost more than they save on a
    shared machine)."""
    return np.einsum("i,ij->j", v, m)


def _mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` without BLAS (see :func:`_vm`)."""
    return np.einsum("ic,ck->ik", a, b)


def _scaled(op: sparse.csr_matrix, w: np.ndarray) -> sparse.csr_matrix:
    """``op @ diag(w)``: the operator summing ``w``-weighted pairs."""
    return (op @ sparse.diags(np.asarray(w, np.float64))).tocsr()


class Design:
    """The relevant pairs of one error type as the tests see them, in the order of their
    resampling unit (an identity for genuine pairs, the unordered identity pair for
    impostor pairs): ``order`` maps the caller's pairs to it. ``inc`` sums pairs per
    identity (an impostor pair counts for both of its identities), ``uinc`` per impostor
    identity pair; ``*_err`` sum their errors."""

    def __init__(self, identity_a: np.ndarray, identity_b: np.ndarray, error: np.ndarray):
        ida = np.asarray(identity_a).astype(str)
        idb = np.asarray(identity_b).astype(str)
        codes, _ = pd.factorize(np.concatenate([ida, idb]))
        n = len(ida)
        a, b = np.minimum(codes[:n], codes[n:]), np.maximum(codes[:n], codes[n:])
        self.n, self.n_identities = n, int(codes.max()) + 1 if n else 0
        key = a.astype(np.int64) * max(self.n_identities, 1) + b
        self.order = np.argsort(key, kind="stable")
        self.ida, self.idb, key = a[self.order], b[self.order], key[self.order]
        self.err = np.asarray(error, bool)[self.order]
        self.err_f = self.err.astype(np.float64)
        self.unit = np.cumsum(np.r_[False, key[1:] != key[:-1]]) if n else np.zeros(0, int)
        self.dyad = self.ida != self.idb
        rows = np.arange(n)
        self.inc = sparse.csr_matrix(
            (np.ones(n + int(self.dyad.sum())),
             (np.r_[self.ida, self.idb[self.dyad]], np.r_[rows, rows[self.dyad]])),
            shape=(self.n_identities, n))
        dy_units, dy_code = np.unique(self.unit[self.dyad], return_inverse=True)
        self.uinc = sparse.csr_matrix((np.ones(len(dy_code)), (dy_code, rows[self.dyad])),
                                      shape=(len(dy_units), n))
        self.inc_err, self.uinc_err = _scaled(self.inc, self.err_f), _scaled(self.uinc,
                                                                            self.err_f)
        self.rate = float(self.err.mean()) if n else float("nan")
        self.overall = self.strata(np.zeros(n, np.int64), ordered=True)

    def strata(self, codes: np.ndarray, ordered: bool = False) -> Strata:
        """The cells ``codes`` (one per relevant pair, in the caller's order; ``ordered``:
        in the design's) prepared for stratified tests."""
        c = np.asarray(codes) if ordered else np.asarray(codes)[self.order]
        _, inv = np.unique(c, return_inverse=True)
        k = int(inv.max()) + 1 if self.n else 0
        cells = sparse.csr_matrix((np.ones(self.n), (inv, np.arange(self.n))),
                                  shape=(k, self.n))
        sizes = np.bincount(inv, minlength=k).astype(np.float64)
        rates = np.bincount(inv, self.err_f, k) / np.maximum(sizes, 1)
        dev = self.err_f - rates[inv]
        inc_dev, uinc_dev = _scaled(self.inc, dev), _scaled(self.uinc, dev)
        return Strata(inv, rates, sizes, dev, np.bincount(inv, dev ** 2, k), cells,
                      _scaled(cells, dev ** 2), inc_dev, uinc_dev,
                      (inc_dev @ cells.T).toarray(), (uinc_dev @ cells.T).toarray())

    def members(self, mask: np.ndarray) -> np.ndarray:
        """The caller's pairs in ``mask`` (``(n,)`` or ``(n, K)``) in design order."""
        return np.asarray(mask, bool)[self.order]

    def test(self, member: np.ndarray, strata: Strata | None = None,
             confidence: float = 0.95) -> TestResult:
        """Test each slice (column of ``member``, design order; 1-D: one slice) against
        the rest (within ``strata`` cells) and bound its error rate; see the module
        docstring."""
        st = strata or self.overall
        m = np.asarray(member, np.float64).reshape(self.n, -1)
        n_s, e_s = m.sum(0), _vm(self.err_f, m)
        count_i = self.inc @ m
        g = (count_i > 0).sum(0)
        in_cell = st.cells @ m                                              # (C, K)
        pi = in_cell / np.maximum(st.sizes, 1)[:, None]
        shared = self._variance(st.inc_dev @ m - _mm(st.g, pi),
                                st.uinc_dev @ m - _mm(st.d, pi))
        own = ((st.cells_dev2 @ m) * (1 - 2 * pi)).sum(0) + (pi ** 2 * st.dev2[:, None]
                                                             ).sum(0)
        v_cell = (st.rates * (1 - st.rates))[:, None]
        null_own = (v_cell * (in_cell * (1 - pi) ** 2
                              + (st.sizes[:, None] - in_cell) * pi ** 2)).sum(0)
        with np.errstate(invalid="ignore"):
            cr1 = np.where(g >= 2, g / np.maximum(g - 1, 1), np.nan)
        sd = np.sqrt(null_own + cr1 * np.maximum(shared - own, 0.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where((sd > 0) & (g >= 2), _vm(st.dev, m) / sd, np.nan)
            rate = e_s / n_s
            expected = _vm(st.rates, in_cell) / n_s
        df = np.where(g - 1 > T_DF_MAX, np.inf, np.maximum(g - 1, 1).astype(np.float64))
        p_cluster = np.where(np.isfinite(z), stdtr(df, -np.nan_to_num(z)), 1.0)
        k_s, n_i = np.rint(e_s).astype(np.int64), np.rint(n_s).astype(np.int64)
        p_binom = np.where(k_s >= 1, bdtrc(np.maximum(k_s - 1, 0), n_i,
                                           np.nan_to_num(expected)), 1.0)
        r0 = np.nan_to_num(rate)
        v_rate = self._variance(self.inc_err @ m - count_i * r0,
                                self.uinc_err @ m - (self.uinc @ m) * r0, g) / np.maximum(
            n_s, 1) ** 2
        lo, hi = korn_graubard(rate, n_s, v_rate, df, confidence)
        return TestResult(z, np.maximum(p_cluster, p_binom), g, lo, hi)

    @staticmethod
    def _variance(s_id: np.ndarray, s_u: np.ndarray, g: np.ndarray | None = None
                  ) -> np.ndarray:
        """Dyadic cluster-robust variance of each column from its per-identity sums
        ``s_id`` ``(I, K)`` and per impostor identity pair sums ``s_u`` ``(U, K)``: every
        pair of pairs sharing a person, once; times CR1 ``g / (g - 1)`` when ``g`` (the
        slices' identities) is given."""
        raw = (s_id ** 2).sum(0) - (s_u ** 2).sum(0)
        if g is None:
            return raw
        with np.errstate(divide="ignore", invalid="ignore"):
            return raw * np.where(g >= 2, g / np.maximum(g - 1, 1), np.nan)


def korn_graubard(rate: np.ndarray, n: np.ndarray, var: np.ndarray, df: np.ndarray,
                  confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """Clopper-Pearson interval of ``rate`` at the effective sample size
    ``rate (1 - rate) / var`` (at most ``n``), degrees-of-freedom adjusted (Korn &
    Graubard 1998); NaN where ``n`` is 0."""
    rate, n, var = (np.asarray(v, np.float64) for v in (rate, n, var))
    inner = (rate > 0) & (rate < 1) & (var > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        n_eff = np.where(inner, np.minimum(n, rate * (1 - rate) / np.where(inner, var, 1)),
                         n)
        a = (1 - confidence) / 2
        n_eff = np.where(np.isfinite(df), n_eff * (ndtri(a) / stdtrit(
            np.where(np.isfinite(df), df, 1.0), a)) ** 2, n_eff)
        x = rate * n_eff
        lo = np.where(x > 0, betaincinv(x, n_eff - x + 1, a), 0.0)
        hi = np.where(x < n_eff, betaincinv(x + 1, n_eff - x, 1 - a), 1.0)
    ok = (n > 0) & np.isfinite(rate)
    return np.where(ok, lo, np.nan), np.where(ok, hi, np.nan)


def adjust(p: np.ndarray, method: str = "bh", n_tests: int | None = None) -> np.ndarray:
    """Benjamini-Hochberg (``bh``) or Benjamini-Yekutieli (``by``: valid under any
    dependence, BH times ``sum_{i<=m} 1/i``) adjusted p-values (q-values), capped at 1.

    ``n_tests`` (``m``, at least ``len(p)``): the size of the family when hypotheses
    beyond ``p`` belong to it untested (their p is 1: they only raise ``m``)."""
    p = np.asarray(p, np.float64)
    m = max(len(p), int(n_tests or 0))
    if len(p) == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    ranked = p[order] * m / np.arange(1, len(p) + 1)
    if method == "by":
        ranked *= np.sum(1.0 / np.arange(1, m + 1))
    elif method != "bh":
        raise ValueError(f"unknown FDR method {method!r} (bh | by)")
    q = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty(len(p))
    out[order] = np.minimum(q, 1.0)
    return out
