"""Tie-correct rank AUC, for one set of pairs or for many cells at once.

AUC here is the Mann-Whitney probability that a genuine (positive) score exceeds an
impostor (negative) score, ties counting one half — exactly what
``sklearn.metrics.roc_auc_score`` returns. Grouped AUC sorts the reference scores once and
locates every focus score among them with two ``searchsorted`` calls; per-cell sums are
``bincount``/sparse products. No Python loop over cells.

Weights: every function accepts per-pair weights of shape ``(B, n)`` (B weight vectors,
e.g. bootstrap replicates; integer multiplicities give the AUC of the replicated sample).
Without weights every pair counts once.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

SIGNS = ("+", "-")


def _as_weights(weights: np.ndarray | None, n: int) -> np.ndarray | None:
    if weights is None:
        return None
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim == 1:
        w = w[None, :]
    if w.shape[1] != n:
        raise ValueError(f"weights have {w.shape[1]} columns, expected {n} (one per pair)")
    return w


class GroupedAUC:
    """Per-cell AUC with everything that does not depend on weights prepared once.

    ``sign="+"``: for each cell c, the positives (``labels == 1``) with ``cells == c``
    against ALL negatives of the reference set. ``sign="-"``: ALL positives of the reference
    set against the negatives with ``cells == c``. ``cells`` holds ints in ``[0, n_cells)``
    or -1 (in no cell). ``reference`` (bool mask, default all pairs) selects the pairs that
    form the "all" side. Non-finite scores must be masked out by the caller. Calling the
    object computes the AUCs (see :func:`grouped_auc`); reuse it for many weight batches.
    """

    def __init__(self, scores: np.ndarray, labels: np.ndarray, cells: np.ndarray,
                 n_cells: int, *, sign: str = "+", reference: np.ndarray | None = None):
        if sign not in SIGNS:
            raise ValueError(f"sign must be '+' or '-', got {sign!r}")
        scores = np.asarray(scores, dtype=np.float64)
        labels = np.asarray(labels).astype(bool)
        cells = np.asarray(cells, dtype=np.int64)
        self.n = scores.shape[0]
        self.n_cells = int(n_cells)
        self.sign = sign
        ref_mask = np.ones(self.n, bool) if reference is None else np.asarray(reference, bool)
        if sign == "+":
            focus, ref = labels & (cells >= 0), ref_mask & ~labels
        else:
            focus, ref = ~labels & (cells >= 0), ref_mask & labels
        ref_idx = np.flatnonzero(ref)
        self.ref_idx = ref_idx[np.argsort(scores[ref_idx], kind="stable")]
        ref_sorted = scores[self.ref_idx]
        self.f_idx = np.flatnonzero(focus)
        self.f_cells = cells[self.f_idx]
        f_scores = scores[self.f_idx]
        self.lo = np.searchsorted(ref_sorted, f_scores, side="left")
        self.hi = np.searchsorted(ref_sorted, f_scores, side="right")
        self._onehot = None

    @property
    def onehot(self) -> sp.csr_matrix:
        if self._onehot is None:
            k = self.f_idx.shape[0]
            self._onehot = sp.csr_matrix((np.ones(k), (np.arange(k), self.f_cells)),
                                         shape=(k, self.n_cells))
        return self._onehot

    def __call__(self, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        w = _as_weights(weights, self.n)
        lo, hi = self.lo, self.hi
        if w is None:
            n_ref = self.ref_idx.shape[0]
            win = lo if self.sign == "+" else n_ref - hi
            credit = win + 0.5 * (hi - lo)
            count = np.bincount(self.f_cells, minlength=self.n_cells).astype(np.float64)
            total = np.bincount(self.f_cells, weights=credit, minlength=self.n_cells)
            with np.errstate(invalid="ignore", divide="ignore"):
                auc = total / (count * n_ref)
            auc[(count == 0) | (n_ref == 0)] = np.nan
            return auc, count.astype(np.int64)
        cum = np.zeros((w.shape[0], self.ref_idx.shape[0] + 1))
        np.cumsum(w[:, self.ref_idx], axis=1, out=cum[:, 1:])
        ref_total = cum[:, -1]
        below = cum[:, lo]
        upto = cum[:, hi]
        win = below if self.sign == "+" else ref_total[:, None] - upto
        w_f = w[:, self.f_idx]
        credit = (win + 0.5 * (upto - below)) * w_f
        total = np.asarray((self.onehot.T @ credit.T).T)
        count = np.asarray((self.onehot.T @ w_f.T).T)
        with np.errstate(invalid="ignore", divide="ignore"):
            auc = total / (count * ref_total[:, None])
        auc[(count <= 0) | (ref_total[:, None] <= 0)] = np.nan
        return auc, count


def grouped_auc(
    scores: np.ndarray,
    labels: np.ndarray,
    cells: np.ndarray,
    n_cells: int,
    *,
    sign: str = "+",
    reference: np.ndarray | None = None,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """AUC per cell in one vectorised pass (arguments as for :class:`GroupedAUC`).

    Returns ``(auc, count)``: without weights both have shape ``(n_cells,)`` (``count`` =
    pairs in the cell); with weights ``(B, n)`` both are ``(B, n_cells)`` (``count`` =
    summed weight). A cell without pairs (or an empty reference side) has AUC NaN.
    """
    return GroupedAUC(scores, labels, cells, n_cells, sign=sign, reference=reference)(weights)


def rank_auc(scores: np.ndarray, labels: np.ndarray,
             weights: np.ndarray | None = None) -> float | np.ndarray:
    """Tie-correct AUC of all positives against all negatives (== sklearn's roc_auc_score).

    With weights ``(B, n)`` returns one AUC per weight row; NaN when a side is empty.
    """
    labels = np.asarray(labels).astype(bool)
    cells = np.where(labels, 0, -1)
    auc, _ = grouped_auc(scores, labels, cells, 1, sign="+", weights=weights)
    return float(auc[0]) if weights is None else auc[:, 0]
