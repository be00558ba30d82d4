"""TAR at FAR of template pairs, read off the ROC as insightface's IJB evaluation does.

This module reproduces the behaviour of the TAR table of insightface's
``recognition/_evaluation_/ijb/ijb_11.py`` (the loop after its ``x_labels``): the ROC is
scikit-learn's ``roc_curve`` of the labels and scores (with its default of dropping
collinear interior points); both arrays are reversed ("select largest tpr at same fpr");
for each FAR of 1e-6 ... 1e-1 the TAR reported is that of the ROC point whose FAR is
nearest to the target (it may lie above it) and - because of the reversal - of equally
near points the last one in ROC order: the top of a vertical ROC step, or the higher FAR
of two points equally far from the target on either side. So a model that separates
genuine and impostor pairs perfectly reads TAR 1.0 at every FAR.
:func:`insightface_roc` rebuilds that curve from
:func:`facecast.evaluate.metrics.roc_points` (every distinct score) and :func:`tar_table`
reads it out the same way (:func:`nearest_index`), adding what the reference leaves
unsaid: the FAR actually reached, the threshold, the pair counts and ``resolvable`` -
false when there are fewer than ``1 / FAR`` impostor pairs
(:func:`facecast.evaluate.metrics.far_resolvable`), so that no fraction of one impostor
is passed off as a measured rate. A pair naming a template without a feature counts by
the one failure rule (:func:`facecast.evaluate.failures.decision_scores`: under
``nonmatch`` at score ``-inf``, rejected at every threshold). ``tests/test_templates.py`` compares both with what
``ijb_11.py`` itself returned on hostile ROCs (``tests/data/reference/insightface/``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from facecast.evaluate.failures import FAILED_RULES
from facecast.evaluate.metrics import far_resolvable, roc_points
from facecast.evaluate.metrics import tar_at_far as tar_at_or_below

#: how a TAR is read off the ROC: insightface's nearest point, or facecast's evaluate rule
READOUTS = ("insightface", "at_or_below")

#: the FARs of insightface's IJB table
INSIGHTFACE_FARS = (1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1)

#: how a pair naming a template without features counts (``templates.failed``, an alias
#: of ``evaluate.failed``: the one rule of :mod:`facecast.evaluate.failures`)
FAILED_POLICIES = FAILED_RULES


def failure_to_template(status: pd.Series) -> dict[str, float | int]:
    """``n_templates``, ``n_failed_templates`` (no image with a feature) and ``ftt_rate``
    of a templates table's ``status`` column."""
    n = int(len(status))
    bad = int((status.astype(str) != "ok").sum())
    return {"n_templates": n, "n_failed_templates": bad,
            "ftt_rate": bad / n if n else float("nan")}


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


def nearest_index(fpr: np.ndarray, far: float) -> int:
    """The index insightface's read-out takes on a non-decreasing ``fpr``, in O(log n):
    the point nearest ``far`` (``|fpr - far|`` in float64, as the reference computes it),
    of equally near points the last one (the reference flips the ROC, then takes the
    first: the top of a vertical step, the higher of two FARs equally near)."""
    i = int(np.searchsorted(fpr, far, side="left"))
    cands = []
    if i > 0:
        cands.append(i - 1)  # the last point below far
    if i < len(fpr):
        cands.append(int(np.searchsorted(fpr, fpr[i], side="right")) - 1)  # last at fpr[i]
    return min(cands, key=lambda j: (abs(fpr[j] - far), -j))


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
        ok = bool(n_gen and n_imp and far_resolvable(n_imp, far))
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
