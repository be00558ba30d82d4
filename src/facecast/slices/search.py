"""SliceLine-style enumeration of conjunctions of image predicates over scored pairs.

A pair lies in a slice when both of its images satisfy every predicate of the slice (as
CAST sub-benchmarks select images). The error of a slice is the error rate of its
*relevant* pairs: genuine pairs for FNMR, impostor pairs for FMR, at one global threshold.

Level 1 counts every predicate; level 2 forms every pair of surviving predicates of
different columns in two matrix products over the relevant pairs (sizes and errors);
level 3 joins level-2 survivors that share a predicate (SliceLine's join) and evaluates
only candidates whose score upper bound is positive. Score and bound are SliceLine's
(Sagadeeva & Boehm, SIGMOD 2021) with 0/1 errors:

    score(S) = alpha * (err(S) / (|S| * mean_err) - 1) - (1 - alpha) * (n / |S| - 1)

where ``n`` is the number of relevant pairs. A slice survives (may have children) when
``|S| >= min_support``, ``err(S) > 0`` and its score bound is positive.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

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


def pair_masks(image_masks: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """``(n_pairs, P)``: both images of the pair satisfy the predicate (index -1 = an
    image outside the attribute table: never)."""
    pad = np.vstack([image_masks, np.zeros((1, image_masks.shape[1]), bool)])
    return pad[ia] & pad[ib]


def _gram(image_masks: np.ndarray, ia: np.ndarray, ib: np.ndarray) -> np.ndarray:
    """``Q^T Q`` of the pair masks, chunked over pairs (float64 counts)."""
    p = image_masks.shape[1]
    out = np.zeros((p, p))
    for s in range(0, len(ia), CHUNK):
        q = pair_masks(image_masks, ia[s:s + CHUNK], ib[s:s + CHUNK]).astype(np.float32)
        out += (q.T @ q).astype(np.float64)
    return out


def enumerate_slices(image_masks: np.ndarray, columns: Sequence[int], ia: np.ndarray,
                     ib: np.ndarray, error: np.ndarray, *, max_depth: int, min_support: int,
                     alpha: float) -> Lattice:
    """Evaluate the lattice of slices up to ``max_depth`` over the relevant pairs
    ``(ia, ib)`` with 0/1 ``error``; see the module docstring for the pruning."""
    col = np.asarray(columns, np.int64)
    err = np.asarray(error, bool)
    n = len(err)
    mean_err = float(err.mean()) if n else 0.0
    p_all = image_masks.shape[1]
    counts = {"predicates": p_all}
    size1 = np.zeros(p_all)
    err1 = np.zeros(p_all)
    for s in range(0, n, CHUNK):
        q = pair_masks(image_masks, ia[s:s + CHUNK], ib[s:s + CHUNK])
        size1 += q.sum(0)
        err1 += q[err[s:s + CHUNK]].sum(0)
    defs = [np.stack([np.arange(p_all), *[np.full(p_all, -1)] * (max_depth - 1)], 1)]
    sizes, errs, depth = [size1], [err1], [np.ones(p_all, np.int64)]
    if mean_err <= 0 or max_depth < 2:
        counts.update(evaluated=p_all, pruned=0)
        return Lattice(np.vstack(defs), np.concatenate(sizes), np.concatenate(errs),
                       np.concatenate(depth), counts)
    sc1 = score(err1, size1, n, mean_err, alpha)
    ub1 = score_upper_bound(size1, err1, n, mean_err, alpha, min_support)
    keep = np.flatnonzero((size1 >= min_support) & (err1 > 0) & (ub1 > 0))
    del sc1
    m1 = image_masks[:, keep]
    g_size = _gram(m1, ia, ib)
    g_err = _gram(m1, ia[err], ib[err])
    i, j = np.triu_indices(len(keep), 1)
    differ = col[keep][i] != col[keep][j]
    i, j = i[differ], j[differ]
    ub2 = score_upper_bound(np.minimum(size1[keep][i], size1[keep][j]),
                            np.minimum(err1[keep][i], err1[keep][j]), n, mean_err, alpha,
                            min_support)
    candidates2 = len(i)
    live = ub2 > 0
    i, j = i[live], j[live]
    per_col = np.bincount(col)
    pruned = int((p_all ** 2 - (per_col ** 2).sum()) // 2) - len(i)  # cross-column pairs
    d2 = np.full((len(i), max_depth), -1)
    d2[:, 0], d2[:, 1] = keep[i], keep[j]
    s2, e2 = g_size[i, j], g_err[i, j]
    defs.append(d2)
    sizes.append(s2)
    errs.append(e2)
    depth.append(np.full(len(i), 2))
    counts["candidates_depth2"] = candidates2
    if max_depth >= 3:
        d3, s3, e3, pr3 = _level3(image_masks, col, ia, ib, err, d2[:, :2], s2, e2,
                                  n=n, mean_err=mean_err, alpha=alpha,
                                  min_support=min_support)
        pruned += pr3
        defs.append(d3)
        sizes.append(s3)
        errs.append(e3)
        depth.append(np.full(len(d3), 3))
    out = Lattice(np.vstack(defs), np.concatenate(sizes), np.concatenate(errs),
                  np.concatenate(depth), counts)
    counts.update(evaluated=len(out.size), pruned=int(pruned))
    return out


def _level3(image_masks: np.ndarray, col: np.ndarray, ia: np.ndarray, ib: np.ndarray,
            err: np.ndarray, d2: np.ndarray, s2: np.ndarray, e2: np.ndarray, *, n: int,
            mean_err: float, alpha: float, min_support: int
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
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
    cand = sorted(cands)
    defs, sizes, errs = [], [], []
    pruned = 0
    for c in cand:
        trip = [parents[(c[0], c[1])], parents[(c[0], c[2])], parents[(c[1], c[2])]]
        s_ub = min(t[0] for t in trip)
        e_ub = min(t[1] for t in trip)
        if score_upper_bound(np.array([s_ub]), np.array([e_ub]), n, mean_err, alpha,
                             min_support)[0] <= 0:
            pruned += 1
            continue
        img = image_masks[:, list(c)].all(1)
        pad = np.append(img, False)
        m = pad[ia] & pad[ib]
        defs.append([*c])
        sizes.append(float(m.sum()))
        errs.append(float(m[err].sum()))
    d3 = np.array(defs, np.int64).reshape(-1, 3)
    return d3, np.array(sizes), np.array(errs), pruned


def slice_image_mask(image_masks: np.ndarray, definition: Sequence[int]) -> np.ndarray:
    """The images satisfying every predicate of one slice (-1 entries ignored)."""
    preds = [int(p) for p in definition if p >= 0]
    return image_masks[:, preds].all(1)
