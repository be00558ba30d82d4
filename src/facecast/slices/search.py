"""SliceLine-style enumeration of conjunctions of image predicates over scored pairs.

A pair lies in a slice by :func:`facecast.slices.predicates.in_slice` (``slices.pair``:
``both`` images satisfy every predicate, or ``either`` does). The error of a slice is the
error rate of its *relevant* pairs: genuine pairs for FNMR, impostor pairs for FMR, at
one global threshold.

Level 1 counts every predicate; level 2 forms every pair of surviving predicates of
different columns in matrix products over the relevant pairs (sizes and errors);
level 3 joins level-2 survivors that share a predicate (SliceLine's join) and evaluates
only candidates whose score upper bound is positive. Score and bound are SliceLine's
(Sagadeeva & Boehm, SIGMOD 2021) with 0/1 errors:

    score(S) = alpha * (err(S) / (|S| * mean_err) - 1) - (1 - alpha) * (n / |S| - 1)

where ``n`` is the number of relevant pairs. A slice survives (may have children) when
``|S| >= min_support``, ``err(S) > 0`` and its score bound is positive. A child never
has more pairs (or errors) than a parent under either pair rule, so the bound holds.

The lattice also counts what it did not evaluate: ``pruned`` (every conjunction of up to
``max_depth`` predicates of different columns that was not evaluated) and
``pruned_supported`` (those whose predicates all have ``min_support`` pairs, so their own
support is unknown: the false-discovery family counts them, untested, with p = 1; at
depth 3 this is an upper bound).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from facecast.slices.predicates import in_slice, pair_members, pair_sides, slice_image_mask

CHUNK = 1 << 16


@dataclass
class Lattice:
    """Every evaluated slice: ``defs[k]`` lists its predicate indices (-1 pads shorter
    slices); ``size``/``errors`` count relevant pairs and their errors."""

    defs: np.ndarray
    size: np.ndarray
    errors: np.ndarray
    depth: np.ndarray
    counts: dict[str, int] = field(default_factory=dict)


def score(errors: np.ndarray, size: np.ndarray, n: int, mean_err: float,
          alpha: float) -> np.ndarray:
    """SliceLine's score (``-inf`` for empty slices)."""
    e = np.asarray(errors, np.float64)
    s = np.asarray(size, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = alpha * (e / (s * mean_err) - 1.0) - (1.0 - alpha) * (n / s - 1.0)
    return np.where(s > 0, sc, -np.inf)


def score_upper_bound(size_ub: np.ndarray, err_ub: np.ndarray, n: int, mean_err: float,
                      alpha: float, min_support: int) -> np.ndarray:
    """SliceLine's upper bound on the score of any slice with at most ``size_ub`` pairs and
    ``err_ub`` errors (0/1 errors: at most one error per pair), at least ``min_support``."""
    s_ub = np.asarray(size_ub, np.float64)
    e_ub = np.asarray(err_ub, np.float64)
    best = np.full(s_ub.shape, -np.inf)
    for cand in (np.full(s_ub.shape, float(min_support)), s_ub, np.minimum(e_ub, s_ub)):
        s = np.clip(cand, float(min_support), None)
        ok = s <= s_ub
        best = np.where(ok, np.maximum(best, score(np.minimum(e_ub, s), s, n, mean_err,
                                                   alpha)), best)
    return best


def _e2(counts: np.ndarray) -> int:
    """Pairs of predicates of different columns (``counts``: predicates per column)."""
    c = counts.astype(np.int64)
    return int((c.sum() ** 2 - (c ** 2).sum()) // 2)


def _e3(counts: np.ndarray) -> int:
    """Triples of predicates of three different columns."""
    c = counts.astype(np.int64)
    p1, p2, p3 = c.sum(), (c ** 2).sum(), (c ** 3).sum()
    return int((p1 ** 3 - 3 * p1 * p2 + 2 * p3) // 6)


def level_one(image_masks: np.ndarray, ia: np.ndarray, ib: np.ndarray, err: np.ndarray,
              pair: str) -> tuple[np.ndarray, np.ndarray]:
    """Relevant pairs and errors of every predicate, chunked over pairs."""
    size = np.zeros(image_masks.shape[1])
    errs = np.zeros(image_masks.shape[1])
    for s in range(0, len(ia), CHUNK):
        q = pair_members(image_masks, ia[s:s + CHUNK], ib[s:s + CHUNK], pair)
        size += q.sum(0)
        errs += q[err[s:s + CHUNK]].sum(0)
    return size, errs


def gram(image_masks: np.ndarray, ia: np.ndarray, ib: np.ndarray, pair: str) -> np.ndarray:
    """Pairs in each two-predicate conjunction (``[i, j]``: predicates i and j), chunked
    over pairs: ``Q^T Q`` of the pair masks for ``both``; for ``either`` the union of the
    two sides, ``A^T A + B^T B - (A & B)^T (A & B)``."""
    p = image_masks.shape[1]
    out = np.zeros((p, p))
    for s in range(0, len(ia), CHUNK):
        a, b = pair_sides(image_masks, ia[s:s + CHUNK], ib[s:s + CHUNK])
        q = in_slice(a, b, "both").astype(np.float32)
        if pair == "both":
            out += (q.T @ q).astype(np.float64)
            continue
        fa, fb = a.astype(np.float32), b.astype(np.float32)
        out += (fa.T @ fa + fb.T @ fb - q.T @ q).astype(np.float64)
    return out


def enumerate_slices(image_masks: np.ndarray, columns: Sequence[int], ia: np.ndarray,
                     ib: np.ndarray, error: np.ndarray, *, max_depth: int, min_support: int,
                     alpha: float, pair: str = "both") -> Lattice:
    """Evaluate the lattice of slices up to ``max_depth`` over the relevant pairs
    ``(ia, ib)`` with 0/1 ``error``; see the module docstring for the pruning and the
    counts (``evaluated``, ``pruned``, ``pruned_supported``)."""
    col = np.asarray(columns, np.int64)
    err = np.asarray(error, bool)
    n = len(err)
    mean_err = float(err.mean()) if n else 0.0
    p_all = image_masks.shape[1]
    size1, err1 = level_one(image_masks, ia, ib, err, pair)
    per_col = np.bincount(col, minlength=int(col.max()) + 1 if len(col) else 0)
    sup_col = np.bincount(col[size1 >= min_support], minlength=len(per_col))
    total = sum(f(per_col) for f, d in ((_e2, 2), (_e3, 3)) if d <= max_depth)
    supported = sum(f(sup_col) for f, d in ((_e2, 2), (_e3, 3)) if d <= max_depth)
    defs = [np.stack([np.arange(p_all), *[np.full(p_all, -1)] * (max_depth - 1)], 1)]
    sizes, errs, depth = [size1], [err1], [np.ones(p_all, np.int64)]
    if mean_err > 0 and max_depth >= 2:
        ub1 = score_upper_bound(size1, err1, n, mean_err, alpha, min_support)
        keep = np.flatnonzero((size1 >= min_support) & (err1 > 0) & (ub1 > 0))
        g_size = gram(image_masks[:, keep], ia, ib, pair)
        g_err = gram(image_masks[:, keep], ia[err], ib[err], pair)
        i, j = np.triu_indices(len(keep), 1)
        differ = col[keep][i] != col[keep][j]
        i, j = i[differ], j[differ]
        d2 = np.full((len(i), max_depth), -1)
        d2[:, 0], d2[:, 1] = keep[i], keep[j]
        defs.append(d2)
        sizes.append(g_size[i, j])
        errs.append(g_err[i, j])
        depth.append(np.full(len(i), 2))
        if max_depth >= 3:
            d3, s3, e3 = _level3(image_masks, col, ia, ib, err, d2[:, :2], sizes[-1],
                                 errs[-1], n=n, mean_err=mean_err, alpha=alpha,
                                 min_support=min_support, pair=pair)
            defs.append(d3)
            sizes.append(s3)
            errs.append(e3)
            depth.append(np.full(len(d3), 3))
    out = Lattice(np.vstack(defs), np.concatenate(sizes), np.concatenate(errs),
                  np.concatenate(depth))
    deeper = len(out.size) - p_all
    out.counts.update(predicates=p_all, evaluated=len(out.size), pruned=total - deeper,
                      pruned_supported=supported - deeper)
    return out


def _level3(image_masks: np.ndarray, col: np.ndarray, ia: np.ndarray, ib: np.ndarray,
            err: np.ndarray, d2: np.ndarray, s2: np.ndarray, e2: np.ndarray, *, n: int,
            mean_err: float, alpha: float, min_support: int, pair: str
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Depth-3 slices joined from level-2 survivors whose three depth-2 parents all
    survived; evaluated explicitly, only where the bound over the parents is positive."""
    ub = score_upper_bound(s2, e2, n, mean_err, alpha, min_support)
    ok = (s2 >= min_support) & (e2 > 0) & (ub > 0)
    parents = {tuple(sorted(d)): (s, e) for d, s, e in zip(d2[ok].tolist(), s2[ok], e2[ok],
                                                          strict=True)}
    by_pred: dict[int, list[int]] = {}
    for a, b in parents:
        by_pred.setdefault(a, []).append(b)
        by_pred.setdefault(b, []).append(a)
    cands: set[tuple[int, int, int]] = set()
    for a, partners in by_pred.items():
        for x in partners:
            for z in partners:
                if x < z and col[x] != col[z] and (x, z) in parents:
                    cands.add(tuple(sorted((a, x, z))))
    defs, sizes, errs = [], [], []
    for c in sorted(cands):
        trip = [parents[(c[0], c[1])], parents[(c[0], c[2])], parents[(c[1], c[2])]]
        if score_upper_bound(np.array([min(t[0] for t in trip)]),
                             np.array([min(t[1] for t in trip)]), n, mean_err, alpha,
                             min_support)[0] <= 0:
            continue
        m = pair_members(slice_image_mask(image_masks, c), ia, ib, pair)
        defs.append([*c])
        sizes.append(float(m.sum()))
        errs.append(float(m[err].sum()))
    d3 = np.array(defs, np.int64).reshape(-1, 3)
    return d3, np.array(sizes), np.array(errs)
