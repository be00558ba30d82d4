"""Scores of template pairs, streamed: the dot product of L2-normalised template features.

Pairs are sorted by their first template and taken in blocks of ``block`` first
templates. A block whose pairs cover its templates densely (IJB-C: each template meets
hundreds of others) is scored as one matrix product ``F[a] @ F[b].T`` over the block's
distinct templates, from which the pairs are read; a sparse block gathers its pairs' rows
and takes row-wise dot products. Either way memory is one block (at most ``block`` x
distinct second templates, or ``max_rows`` gathered rows), never a pairs x D array.
"""

from __future__ import annotations

import sys

import numpy as np
from tqdm import tqdm

#: a block is scored as one matrix product when it has at least one pair per this many
#: products computed: BLAS does a dot product ~50x faster than a gathered row pair costs
#: in memory traffic, so IJB-C's 3 % dense blocks (one pair per ~34 products) take it
DENSE_RATIO = 64


def score_pairs(features: np.ndarray, index_a: np.ndarray, index_b: np.ndarray, *,
                block: int = 1024, max_rows: int = 65536, dtype: type = np.float64,
                progress: bool = False) -> np.ndarray:
    """``sum(features[a] * features[b])`` for every pair (rows ``index_a``, ``index_b``).

    Returns float64 scores in the input order. ``dtype`` is the arithmetic precision
    (float64 as the reference; float32 is about twice as fast). Deterministic: the same
    input gives the same scores.
    """
    f = np.ascontiguousarray(features, dtype=dtype)
    ia = np.asarray(index_a, np.int64)
    ib = np.asarray(index_b, np.int64)
    out = np.empty(len(ia), np.float64)
    if len(ia) == 0:
        return out
    order = np.argsort(ia, kind="stable")
    a_sorted = ia[order]
    firsts = np.unique(a_sorted)
    edges = np.searchsorted(a_sorted, firsts[::block])
    edges = np.r_[edges, len(a_sorted)]
    bar = tqdm(total=len(ia), desc="score pairs", unit="pair", file=sys.stderr,
               mininterval=10, disable=not progress)
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        rows = order[lo:hi]
        a, b = ia[rows], ib[rows]
        ua, pa = np.unique(a, return_inverse=True)
        ub, pb = np.unique(b, return_inverse=True)
        if len(ua) * len(ub) <= DENSE_RATIO * len(rows):  # dense: one product over the block
            g = f[ua] @ f[ub].T
            out[rows] = g[pa, pb]
        else:
            for s in range(0, len(rows), max_rows):
                sl = slice(s, s + max_rows)
                out[rows[sl]] = np.einsum("ij,ij->i", f[a[sl]], f[b[sl]])
        bar.update(len(rows))
    bar.close()
    return out
