"""TAR at FAR of template pairs read off the ROC the way insightface's ``ijb_11.py`` does.

The reference computes ``fpr, tpr, _ = sklearn.metrics.roc_curve(label, score)`` (with
sklearn's default ``drop_intermediate=True``) and, for each FAR ``x`` of
``1e-6 ... 1e-1``, reports ``tpr[argmin(|fpr - x|)]``: the ROC point whose FAR is nearest
to ``x`` (it may lie above ``x``). :func:`insightface_roc` rebuilds exactly that curve
from :func:`facecast.evaluate.metrics.roc_points` (every distinct score) and
:func:`tar_table` reads it out the same way, adding what the reference leaves unsaid:
the FAR actually reached, the threshold, the pair counts and ``resolvable`` - false when
there are fewer than ``1 / FAR`` impostor pairs, so that no fraction of one impostor is
passed off as a measured rate.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from facecast.evaluate.metrics import roc_points
from facecast.evaluate.metrics import tar_at_far as tar_at_or_below

#: how a TAR is read off the ROC: insightface's nearest point, or facecast's evaluate rule
READOUTS = ("insightface", "at_or_below")

#: the FARs of insightface's IJB table
INSIGHTFACE_FARS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)


def insightface_roc(scores: np.ndarray, labels: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(FAR, TAR, threshold) equal to ``sklearn.metrics.roc_curve(labels, scores)`` with
    its default ``drop_intermediate=True`` (collinear interior points dropped)."""
    far, tar, thr = roc_points(scores, labels)
    y = np.asarray(labels)
    n_pos = int((y == 1).sum())
    n_neg = len(y) - n_pos
    fps = np.rint(far[1:] * n_neg).astype(np.int64)
    tps = np.rint(tar[1:] * n_pos).astype(np.int64)
    if len(fps) > 2:
        keep = np.flatnonzero(np.r_[True, np.logical_or(np.diff(fps, 2), np.diff(tps, 2)),
                                    True])
        fps, tps, t = fps[keep], tps[keep], thr[1:][keep]
    else:
        t = thr[1:]
    return (np.r_[0.0, fps / n_neg], np.r_[0.0, tps / n_pos], np.r_[np.inf, t])


def resolvable(n_impostor: int, far: float) -> bool:
    """Whether ``n_impostor`` pairs can measure a FAR of ``far`` (at least 1/FAR of them)."""
    return n_impostor >= math.ceil(1.0 / far - 1e-9)


def nearest_index(fpr: np.ndarray, far: float) -> int:
    """``int(np.argmin(np.abs(fpr - far)))`` for a non-decreasing ``fpr``, in O(log n):
    the nearest point, the first of equal ones."""
    i = int(np.searchsorted(fpr, far, side="left"))
    cands = []
    if i > 0:
        cands.append(int(np.searchsorted(fpr, fpr[i - 1], side="left")))
    if i < len(fpr):
        cands.append(i)
    return min(cands, key=lambda j: (abs(fpr[j] - far), j))


def tar_table(scores: np.ndarray, labels: np.ndarray,
              fars: Sequence[float] = INSIGHTFACE_FARS,
              roc: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
              readout: str = "insightface") -> pd.DataFrame:
    """One row per target FAR: ``far``, ``tar``, ``far_reached``, ``threshold``,
    ``n_genuine``, ``n_impostor``, ``resolvable`` and ``text`` (the TAR, or
    ``n/a (k impostors)`` when not resolvable). ``readout``: ``insightface`` (the ROC
    point nearest the FAR; on a small protocol it may sit far from it, even at FAR 0 -
    ``far_reached`` says where) or ``at_or_below`` (the best TAR whose FAR does not exceed
    the target, :func:`facecast.evaluate.metrics.tar_at_far`, on every distinct score's
    point). ``roc``: :func:`insightface_roc` of the same scores, when the caller has it
    already (one sort of 15M scores is enough; ``at_or_below`` sorts once more)."""
    if readout not in READOUTS:
        raise ValueError(f"readout must be one of {READOUTS}, got {readout!r}")
    y = np.asarray(labels).astype(np.int8)
    n_gen = int((y == 1).sum())
    n_imp = int(len(y) - n_gen)
    rows = []
    if n_gen and n_imp and readout == "at_or_below":  # every distinct score's point
        roc = roc_points(np.asarray(scores, np.float64), y)
    elif n_gen and n_imp and roc is None:
        roc = insightface_roc(np.asarray(scores, np.float64), y)
    for far in fars:
        ok = bool(n_gen and n_imp and resolvable(n_imp, far))
        if n_gen and n_imp:
            fpr, tpr, thr = roc
            if readout == "insightface":
                i = nearest_index(fpr, far)
                tar, reached, t = float(tpr[i]), float(fpr[i]), float(thr[i])
            else:
                r = tar_at_or_below(fpr, tpr, thr, far, n_imp)
                tar, reached, t = r["tar"], r["far_reached"], r["threshold"]
        else:
            tar = reached = t = float("nan")
        rows.append({"far": float(far), "tar": tar, "far_reached": reached, "threshold": t,
                     "n_genuine": n_gen, "n_impostor": n_imp, "resolvable": ok,
                     "text": f"{tar:.4f}" if ok else f"n/a ({n_imp} impostors)"})
    return pd.DataFrame(rows)


def thin_roc(roc: tuple[np.ndarray, np.ndarray, np.ndarray], n_points: int = 400
             ) -> tuple[np.ndarray, np.ndarray]:
    """(FAR, TAR) of an :func:`insightface_roc` curve thinned to about ``n_points``
    log-spaced FARs (a 15M-pair curve has millions of points; a plot needs a few hundred);
    the TAR reached at FAR 0 starts the curve at the log axis' left edge."""
    fpr, tpr, _ = roc
    pos = fpr > 0
    if pos.sum() <= n_points:
        x, y = fpr[pos], tpr[pos]
    else:
        grid = np.geomspace(fpr[pos].min(), 1.0, n_points)
        idx = np.unique(np.clip(np.searchsorted(fpr, grid, side="right") - 1, 0,
                                len(fpr) - 1))
        idx = idx[fpr[idx] > 0]
        x, y = fpr[idx], tpr[idx]
    if (~pos).any() and len(x):  # the TAR reached at FAR 0, drawn from the left edge
        x = np.r_[min(1e-6, x[0] / 10), x]
        y = np.r_[tpr[~pos].max(), y]
    return x, y
