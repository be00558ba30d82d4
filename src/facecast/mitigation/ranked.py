"""The score-order figures of one method for a batch of bootstrap replicates, computed from
the replicates' identity counts (issue 41: the table's bootstrap at 1M pairs).

A replicate draws the evaluated identities with replacement
(:func:`facecast.evaluate.resample.identity_counts`); a pair of one identity weighs its
identity's count, a pair of two identities the product of their counts - the weights of
:func:`facecast.evaluate.resample.identity_weights`. Here the weights are built from the
counts directly in the order a figure needs (:class:`PairCodes`), once per method and
batch, and every figure of the sort order comes out of ONE pass over that order in blocks
of :data:`BLOCK` pairs (:meth:`Ranked.sweep`: two running sums carried from block to block,
each block's arrays small enough to stay in the CPU's cache; no tie block is cut):

* ``auc`` (all genuine pairs against the reference impostors) and the per-cell AUCs of
  Bias+ and Bias- (a cell's genuine pairs against the reference impostors; the reference
  genuine pairs against a cell's impostors), ties counting one half - the figures of
  :class:`facecast.fairness.auc.GroupedAUC`;
* the thresholds at target FMRs over the reference impostors (the lowest with weighted
  FMR at most the target, accept iff ``s >= t``) -
  :func:`facecast.fairness.bootstrap.replicate_thresholds`;
* TAR at those thresholds and per-group FMR and FNMR (reference pairs of one group) -
  :func:`facecast.fairness.bootstrap.weighted_rates`; what lies below a threshold is the
  sums of the blocks below it and the block that holds it, summed again for that row.

Identical numbers: the counts are the same draws (the same generator calls), weights are
whole numbers (int64 here: whole-number running sums run several times faster than float
ones), and every sum behind these figures is a sum of whole or half numbers, exact below
2**53 - so each figure equals the pair-weight computation's exactly, in any summation
order (tests/test_mitigation_bootstrap.py compares them bit for bit).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from facecast.evaluate.resample import identity_codes

__all__ = ["BLOCK", "PairCodes", "Ranked", "Sweep", "onehot"]

#: pairs per block of a sweep: a batch's arrays of a block stay in the CPU's cache (4,096
#: x 16 replicates measured fastest at 1M pairs: 30 ns per pair and replicate, 2 to 3
#: times the larger blocks' cost)
BLOCK = 4096


class PairCodes:
    """The evaluated pairs' identity codes; pair weights of a batch of identity counts."""

    def __init__(self, identity_a: np.ndarray, identity_b: np.ndarray):
        ca, cb, k = identity_codes(identity_a, identity_b)
        self.k = int(k)
        self.a = np.asarray(ca, np.int64)
        # a pair of one identity weighs its count once: its second code is a column of 1s
        self.b = np.where(ca == cb, self.k, cb).astype(np.int64)

    def table(self, counts: np.ndarray) -> np.ndarray:
        """``(B, k + 1)`` whole-number counts and a column of ones (:meth:`weights` reads
        it), as int64: running sums of whole numbers run ~3x faster in integers than in
        floats, and exactly."""
        c = np.atleast_2d(np.asarray(counts))
        return np.hstack([np.rint(c).astype(np.int64), np.ones((c.shape[0], 1), np.int64)])

    def weights(self, table: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """``(B, len(idx))`` int64 weights of the pairs ``idx``, in that order."""
        return table[:, self.a[idx]] * table[:, self.b[idx]]


def onehot(rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """An int64 0/1 sparse matrix with ones at ``(rows, cols)``."""
    return sp.csr_matrix((np.ones(len(rows), np.int64), (rows, cols)), shape=shape)


def _sums(op: sp.csr_matrix, x: np.ndarray) -> np.ndarray:
    """``x @ op.T`` (``op``: ``(cols, L)``, ``x``: ``(B, L)``), ``(B, cols)``."""
    return np.asarray(op @ np.ascontiguousarray(x.T)).T


def _run_starts(values: np.ndarray) -> np.ndarray:
    """Whether each position starts a run of equal values (bool)."""
    v = np.asarray(values)
    return np.r_[True, v[1:] != v[:-1]] if len(v) else np.zeros(0, bool)


def _ties(sorted_scores: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per position of ascending scores, the start and end (exclusive) of its tie block."""
    n = len(sorted_scores)
    new = _run_starts(sorted_scores)
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:], n]
    block = np.cumsum(new) - 1
    return starts[block], ends[block]


def _distinct_sorted(x: np.ndarray) -> np.ndarray:
    """The distinct values of a non-decreasing array (``np.unique`` without its sort)."""
    return x[_run_starts(x)]


def _cuts(allowed: np.ndarray, n: int, size: int) -> np.ndarray:
    """Block boundaries ``0 = c_0 < ... < c_m = n`` about ``size`` apart, each moved back to
    the last ``allowed`` position (sorted, 0 among them) at or before it."""
    want = np.arange(size, n, size)
    inner = allowed[np.searchsorted(allowed, want, side="right") - 1] if len(want) else want
    return np.unique(np.r_[0, inner, n]).astype(np.int64)


def _local_ties(ties: np.ndarray, bs: np.ndarray, be: np.ndarray, lo: int, hi: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The tied positions of ``ties`` in ``[lo, hi)``, their tie block's start and last
    position, all local to ``lo``."""
    t = ties[(ties >= lo) & (ties < hi)]
    return t - lo, bs[t] - lo, be[t] - 1 - lo


@dataclass
class _Block:
    """What a sweep needs of one block ``[lo, hi)``: its sparse operators and its ties
    (local positions; tie-block starts and last positions). A block inside a tie block
    longer than :data:`BLOCK` (``tied``: that tie block's first block) holds no whole tie:
    all its pairs share one credit, known at the tie block's end (``tie_end``)."""

    lo: int
    hi: int
    plus: sp.csr_matrix
    minus: sp.csr_matrix
    rates: sp.csr_matrix
    tie_p: tuple[np.ndarray, np.ndarray, np.ndarray]
    tie_m: tuple[np.ndarray, np.ndarray, np.ndarray]
    tied: int = -1
    tie_end: int = -1


@dataclass
class Sweep:
    """The sums of one pass over a batch of replicates (``B`` rows), all int64 but the
    accuracy's: totals of the reference impostors' and genuine weights, their running sums
    at each block start (``ends[:, k]``: before block k; the last column the total), twice
    the AUC numerators (+ cells with column 0 the overall AUC; - cells as
    ``sum w * 2 CG``) and their weights, each group's weights per block (``group_w``:
    ``(B, blocks, 2 G)``, impostors then genuine pairs)."""

    imp_ends: np.ndarray
    gen_ends: np.ndarray
    plus2: np.ndarray
    plus_w: np.ndarray
    minus_cg2: np.ndarray
    minus_w: np.ndarray
    group_w: np.ndarray
    correct: np.ndarray
    decided: np.ndarray


class Ranked:
    """One method's pairs in score order and what every batch of replicates shares.

    ``label`` 0/1, ``ref`` the reference pairs (``in_reference``), ``cells`` each pair's
    Bias cell (-1: none; a cell holds reference pairs only), ``groups`` each pair's
    protected-group code for the rates (-1: none, mixed or not reference), ``correct``
    each pair's 10-fold correctness (NaN: not decided); ``keep``: values whose runs of
    equal values (in score order) no block may cut (the KS error's probability ties).
    """

    def __init__(self, score: np.ndarray, label: np.ndarray, ref: np.ndarray,
                 cells: np.ndarray, n_cells: int, groups: np.ndarray, n_groups: int,
                 correct: np.ndarray, codes: PairCodes, block: int | None = None,
                 keep: np.ndarray | None = None):
        s = np.asarray(score, np.float64)
        y = np.asarray(label).astype(bool)
        ref = np.asarray(ref, bool)
        self.order = np.argsort(s, kind="stable")
        self.sorted = s[self.order]
        self.codes = codes
        self.a, self.b = codes.a[self.order], codes.b[self.order]
        n = self.n = len(s)
        y_o, ref_o = y[self.order], ref[self.order]
        cells_o, groups_o = np.asarray(cells)[self.order], np.asarray(groups)[self.order]
        self.imp_ref = (~y_o & ref_o).astype(np.int64)
        self.gen_ref = (y_o & ref_o).astype(np.int64)
        ok = np.isfinite(np.asarray(correct, np.float64)[self.order])
        self.correct = np.where(ok, np.asarray(correct, np.float64)[self.order], 0.0)
        self.decided = ok.astype(np.float64)
        self.n_cells, self.n_groups = int(n_cells), int(n_groups)
        bs, be = _ties(self.sorted)
        self.block = int(block or BLOCK)
        self._cut(bs, be, keep)
        gen = np.flatnonzero(y_o)
        plus = np.flatnonzero(y_o & (cells_o >= 0))
        minus = np.flatnonzero(~y_o & (cells_o >= 0))
        g = np.flatnonzero(groups_o >= 0)
        # column 0 every genuine pair (the overall AUC), then the Bias+ cells
        ops = (onehot(np.r_[np.zeros(len(gen), np.int64), 1 + cells_o[plus]],
                      np.r_[gen, plus], (1 + self.n_cells, n)).tocsc(),
               onehot(cells_o[minus], minus, (max(self.n_cells, 1), n)).tocsc(),
               onehot(groups_o[g] + np.where(y_o[g], self.n_groups, 0), g,
                      (2 * max(self.n_groups, 1), n)).tocsc())
        ties = (gen[be[gen] - bs[gen] > 1],     # every focus of Bias+ is a genuine pair
                minus[be[minus] - bs[minus] > 1])
        self.blocks = self._make_blocks(bs, be, ops, ties)
        # thresholds: the end of each distinct reference impostor score's tie block
        self.imp_end = _distinct_sorted(be[np.flatnonzero(self.imp_ref > 0)])
        self.imp_val = self.sorted[self.imp_end - 1] if len(self.imp_end) else np.zeros(0)

    def _cut(self, bs: np.ndarray, be: np.ndarray, keep: np.ndarray | None) -> None:
        """Block boundaries: about :data:`BLOCK` apart, never inside a tie block nor a run
        of equal ``keep`` values, but every BLOCK pairs inside a longer tie block."""
        n = self.n
        allowed = bs == np.arange(n)
        if keep is not None:
            allowed &= _run_starts(np.asarray(keep)[self.order])
        cuts = _cuts(np.flatnonzero(allowed), n, self.block)
        big = np.flatnonzero((be - bs > self.block) & (bs == np.arange(n)))
        inside = [np.arange(s, be[s], self.block) for s in big]
        self.cuts = np.unique(np.r_[cuts, be[big], *inside]).astype(np.int64)

    def _make_blocks(self, bs: np.ndarray, be: np.ndarray,
                     ops: tuple[sp.csc_matrix, ...], ties: tuple[np.ndarray, np.ndarray]
                     ) -> list[_Block]:
        """Each block's operator slices and ties (:class:`_Block`)."""
        blocks: list[_Block] = []
        for lo, hi in zip(self.cuts[:-1], self.cuts[1:], strict=True):
            lo, hi = int(lo), int(hi)
            tied = bool(be[lo] - bs[lo] > self.block)
            local = [_local_ties(x[:0] if tied else x, bs, be, lo, hi) for x in ties]
            head = (len(blocks) if lo == bs[lo] else blocks[-1].tied) if tied else -1
            blocks.append(_Block(lo, hi, *[op[:, lo:hi].tocsr() for op in ops], *local,
                                 tied=head, tie_end=int(be[lo]) if tied else -1))
        return blocks

    def weights(self, table: np.ndarray, lo: int = 0, hi: int | None = None) -> np.ndarray:
        """``(B, hi - lo)`` int64 pair weights of score-order positions ``[lo, hi)``."""
        sl = slice(lo, self.n if hi is None else hi)
        return table[:, self.a[sl]] * table[:, self.b[sl]]

    def sweep(self, table: np.ndarray,
              visit: Callable[[int, int, np.ndarray], None] | None = None) -> Sweep:
        """One pass over the score order for the rows of ``table``
        (:meth:`PairCodes.table`); ``visit(lo, hi, weights)`` sees each block's float
        weights (the KS error's running sums)."""
        nb, nr = len(self.blocks), table.shape[0]
        ends_i, ends_g = np.zeros((nr, nb + 1), np.int64), np.zeros((nr, nb + 1), np.int64)
        plus2 = np.zeros((nr, 1 + self.n_cells), np.int64)
        plus_w = np.zeros_like(plus2)
        minus_cg2 = np.zeros((nr, max(self.n_cells, 1)), np.int64)
        minus_w = np.zeros_like(minus_cg2)
        group_w = np.zeros((nr, nb, 2 * max(self.n_groups, 1)), np.int64)
        correct, decided = np.zeros(nr), np.zeros(nr)
        tied_p, tied_m = np.zeros_like(plus_w), np.zeros_like(minus_w)
        for k, blk in enumerate(self.blocks):
            w = self.weights(table, blk.lo, blk.hi)
            if blk.tied < 0:
                self._add_block(k, blk, w, ends_i, ends_g, plus2, minus_cg2)
            else:
                # inside a long tie block: every pair's credit is that of the whole block
                ends_i[:, k + 1] = ends_i[:, k] + (w * self.imp_ref[blk.lo:blk.hi]).sum(1)
                ends_g[:, k + 1] = ends_g[:, k] + (w * self.gen_ref[blk.lo:blk.hi]).sum(1)
                tied_p += _sums(blk.plus, w)
                tied_m += _sums(blk.minus, w)
                if blk.hi == blk.tie_end:
                    h = blk.tied
                    plus2 += tied_p * (ends_i[:, h] + ends_i[:, k + 1])[:, None]
                    minus_cg2 += tied_m * (ends_g[:, h] + ends_g[:, k + 1])[:, None]
                    tied_p[:], tied_m[:] = 0, 0
            plus_w += _sums(blk.plus, w)
            minus_w += _sums(blk.minus, w)
            group_w[:, k] = _sums(blk.rates, w)
            wf = w.astype(np.float64)
            correct += wf @ self.correct[blk.lo:blk.hi]
            decided += wf @ self.decided[blk.lo:blk.hi]
            if visit is not None:
                visit(blk.lo, blk.hi, wf)
        return Sweep(ends_i, ends_g, plus2, plus_w, minus_cg2, minus_w, group_w, correct,
                     decided)

    def _add_block(self, k: int, blk: _Block, w: np.ndarray, ends_i: np.ndarray,
                   ends_g: np.ndarray, plus2: np.ndarray, minus_cg2: np.ndarray) -> None:
        """Block ``k`` (whole tie blocks only) into the running sums and AUC numerators."""
        xi = w * self.imp_ref[blk.lo:blk.hi]
        ci = np.cumsum(xi, axis=1)
        ci += ends_i[:, k:k + 1]
        cg = np.cumsum(w * self.gen_ref[blk.lo:blk.hi], axis=1)
        cg += ends_g[:, k:k + 1]
        ends_i[:, k + 1], ends_g[:, k + 1] = ci[:, -1], cg[:, -1]
        # twice a genuine pair's credit: the impostor weight strictly before it, twice;
        # tied: before its tie block + before the block's end (= below + half of it)
        ci_before = ci - xi
        prod = w * (2 * ci_before)
        t, s0, e0 = blk.tie_p
        prod[:, t] = w[:, t] * (ci_before[:, s0] + ci[:, e0])
        plus2 += _sums(blk.plus, prod)
        # an impostor's: twice the genuine weight after it is 2 G - (this) - see auc()
        prod = w * (2 * cg)
        t, s0, e0 = blk.tie_m
        prod[:, t] = w[:, t] * ((cg[:, s0] - (w[:, s0] * self.gen_ref[blk.lo + s0]))
                                + cg[:, e0])
        minus_cg2 += _sums(blk.minus, prod)

    def auc(self, sw: Sweep) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``{"all": (auc (B,), weight), "+": (auc (B, cells), weight), "-": ...}``:
        the overall AUC and each Bias cell's, NaN without weight on either side. Every
        sum is a whole number below 2**53: exact in float64."""
        i_tot = sw.imp_ends[:, -1:].astype(np.float64)
        g_tot = sw.gen_ends[:, -1:]
        num = sw.plus2 / 2.0
        cnt = sw.plus_w.astype(np.float64)
        c = self.n_cells
        num_m = (2 * g_tot * sw.minus_w - sw.minus_cg2)[:, :c] / 2.0
        cnt_m = sw.minus_w[:, :c].astype(np.float64)
        out = {}
        for key, n_, c_, other in (("all", num[:, :1], cnt[:, :1], i_tot),
                                   ("+", num[:, 1:], cnt[:, 1:], i_tot),
                                   ("-", num_m, cnt_m, g_tot.astype(np.float64))):
            with np.errstate(invalid="ignore", divide="ignore"):
                auc = n_ / (c_ * other)
            auc[(c_ <= 0) | (other <= 0)] = np.nan
            out[key] = (auc, c_)
        out["all"] = (out["all"][0][:, 0], out["all"][1][:, 0])
        return out

    def _block_of(self, pos: int) -> int:
        """The block holding score-order position ``pos`` (the last one for ``n``)."""
        return min(int(np.searchsorted(self.cuts, pos, side="right")) - 1,
                   len(self.blocks) - 1)

    def _running(self, table: np.ndarray, r: int, k: int, mask: np.ndarray,
                 start: int) -> np.ndarray:
        """Row ``r``'s running sum (inclusive) of ``mask``-ed weights over block ``k``,
        from ``start`` (the sum before the block)."""
        blk = self.blocks[k]
        w = self.weights(table[r:r + 1], blk.lo, blk.hi)[0]
        return start + np.cumsum(w * mask[blk.lo:blk.hi])

    def thresholds(self, sw: Sweep, table: np.ndarray, targets: Sequence[float]
                   ) -> np.ndarray:
        """``(B, T)``: per replicate the lowest threshold whose weighted FMR over the
        reference impostors is at most each target (accept iff ``s >= t``: just above the
        highest impostor score rejected); NaN without impostor weight. The block where the
        impostor weight above falls to the target is summed again for that row."""
        out = np.full((table.shape[0], len(targets)), np.nan)
        if not len(self.imp_end):
            return out
        for r in range(table.shape[0]):
            ends = sw.imp_ends[r]
            total = ends[-1]
            if not total > 0:
                continue
            for i, target in enumerate(targets):
                bound = float(target) * total + 1e-9 * max(total, 1)
                out[r, i] = np.nextafter(self.imp_val[self._first_ok(
                    table, r, ends, total, bound)], np.inf)
        return out

    def _first_ok(self, table: np.ndarray, r: int, ends: np.ndarray, total: int,
                  bound: float) -> int:
        """The first distinct impostor score j with ``total - CI(end_j) <= bound``."""
        if total <= bound:
            return 0
        k = int(np.argmax(total - ends[1:] <= bound))   # the block where it happens
        blk = self.blocks[k]
        if blk.tied >= 0:                          # inside a long tie block: its one score
            return int(np.searchsorted(self.imp_end, blk.tie_end))
        ci = self._running(table, r, k, self.imp_ref, ends[k])
        first = int(np.searchsorted(self.imp_end, blk.lo + 1))
        last = int(np.searchsorted(self.imp_end, blk.hi, side="right"))
        ok = total - ci[self.imp_end[first:last] - 1 - blk.lo] <= bound
        return first + int(np.argmax(ok))

    def tar(self, sw: Sweep, table: np.ndarray, thr: np.ndarray) -> np.ndarray:
        """``(B, T)`` TAR over the reference genuine pairs at ``thr`` (NaN where NaN)."""
        out = np.full(thr.shape, np.nan)
        g_tot = sw.gen_ends[:, -1]
        for r in range(thr.shape[0]):
            for i in range(thr.shape[1]):
                if np.isnan(thr[r, i]) or not g_tot[r] > 0:
                    continue
                pos = int(np.searchsorted(self.sorted, thr[r, i], side="left"))
                k = self._block_of(pos)
                before = sw.gen_ends[r, k]
                if pos > self.blocks[k].lo:
                    before = self._running(table, r, k, self.gen_ref,
                                           before)[pos - 1 - self.blocks[k].lo]
                out[r, i] = (g_tot[r] - before) / g_tot[r]
        return out

    def group_rates(self, sw: Sweep, table: np.ndarray, thr: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
        """``(fmr, fnmr)``, each ``(B, G)``: per group the share of its reference
        impostors' weight at or above the row's threshold ``thr`` ``(B,)`` and of its
        genuine weight below it (NaN without weight; accept nothing where NaN): the
        groups' sums of the blocks below the threshold, and of the block that holds it
        up to it, summed again for that row."""
        g = self.n_groups
        before = np.cumsum(sw.group_w, axis=1)           # (B, blocks, 2G): up to block k
        total = before[:, -1].astype(np.float64)
        below = np.zeros_like(total)
        for r, t in enumerate(thr):
            pos = int(np.searchsorted(self.sorted, t, side="left"))   # NaN: n
            k = self._block_of(pos)
            blk = self.blocks[k]
            part = (before[r, k - 1] if k else 0) + blk.rates[:, :pos - blk.lo] @ \
                self.weights(table[r:r + 1], blk.lo, pos)[0]
            below[r] = part
        n_imp, n_gen = total[:, :g], total[:, g:2 * g]
        with np.errstate(invalid="ignore", divide="ignore"):
            fmr = np.where(n_imp > 0, (n_imp - below[:, :g]) / n_imp, np.nan)
            fnmr = np.where(n_gen > 0, below[:, g:2 * g] / n_gen, np.nan)
        return fmr, fnmr
