"""Per-group thresholds as a score shift, and score fusion of several models.

* ``group_thresholds``: the fairness stage's per-group thresholds
  (:func:`facecast.fairness.group_thresholds.threshold_at_fmr`, Robinson et al. CVPRW
  2020), learned on the calibration pairs: ``t_g`` from the impostor pairs whose two images
  share group g, ``t_G`` from all calibration impostors. As decisions: a pair of group g is
  accepted iff ``s >= t_g``. Written as a score, ``s - (t_g - t_G)`` for pairs of one group
  and ``s`` for mixed pairs or pairs without a group (FairCal's ``gst``), which takes the
  same decisions at ``t_G``. A group with fewer than 1/FMR calibration impostors keeps the
  global threshold (counted and logged).
* ``fusion``: the mean over models of z-normalised scores, ``(s_m - mean_m) / sd_m`` with
  the mean and population SD of model m's scores on the calibration pairs.
* ``fusion_lr``: a logistic regression on the calibration pairs with the models' scores
  as features (unpenalised as betacal's, ``C = 1e11``); the score is its probability.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import expit

from facecast.evaluate.metrics import far_resolvable
from facecast.fairness.group_thresholds import threshold_at_fmr
from facecast.mitigation.calibrate import logistic_fit

__all__ = ["Fusion", "GroupShift", "fusion_fit", "group_shift_fit", "group_shift_scores"]


@dataclass
class GroupShift:
    """Per-group thresholds learned on calibration pairs, and their offsets."""

    groups: list[str]
    global_threshold: float
    thresholds: np.ndarray
    offsets: np.ndarray
    n_impostors: np.ndarray
    resolvable: np.ndarray

    @property
    def bounds(self) -> tuple[float, float]:
        """FairCal's ``gst`` range of shifted cosines: ``[-1 - max d, 1 - min d]`` over the
        groups' offsets d (``approaches.py``: no 0 added; a mixed pair's unshifted score
        outside the range is clipped by the beta map like any other); a cosine's [-1, 1]
        without groups."""
        if not len(self.offsets):
            return -1.0, 1.0
        return -1.0 - float(self.offsets.max()), 1.0 - float(self.offsets.min())


def group_shift_fit(score: np.ndarray, label: np.ndarray, ga: np.ndarray, gb: np.ndarray,
                    groups: Sequence[str], fmr: float) -> GroupShift:
    """Per-group thresholds at ``fmr`` from calibration pairs (group codes ``ga``/``gb``
    index ``groups``; -1 = no group)."""
    s = np.asarray(score, np.float64)
    imp = np.asarray(label) == 0
    t_g = threshold_at_fmr(s[imp], fmr)
    same = (ga == gb) & (ga >= 0)
    thr = np.full(len(groups), np.nan)
    n_imp = np.zeros(len(groups), np.int64)
    for g in range(len(groups)):
        m = imp & same & (ga == g)
        n_imp[g] = int(m.sum())
        thr[g] = threshold_at_fmr(s[m], fmr) if m.any() else np.nan
    ok = np.asarray(far_resolvable(n_imp, fmr), bool) & np.isfinite(thr)
    return GroupShift(list(groups), t_g, thr, np.where(ok, thr - t_g, 0.0), n_imp, ok)


def group_shift_scores(gs: GroupShift, score: np.ndarray, ga: np.ndarray, gb: np.ndarray
                       ) -> np.ndarray:
    """``s - (t_g - t_G)`` for pairs of one group g, ``s`` otherwise."""
    same = (ga == gb) & (ga >= 0)
    off = np.zeros(len(ga))
    off[same] = gs.offsets[ga[same]]
    return np.asarray(score, np.float64) - off


@dataclass
class Fusion:
    """Fusion of models' scores learned on calibration pairs: per-model means and SDs
    (``fusion``) and logistic weights and intercept (``fusion_lr``)."""

    models: list[str]
    mean: np.ndarray
    sd: np.ndarray
    weights: np.ndarray
    intercept: float

    def mean_z(self, scores: np.ndarray) -> np.ndarray:
        """``fusion``: the mean of the z-normalised scores (``scores``: ``(n, models)``)."""
        return ((np.asarray(scores, np.float64) - self.mean) / self.sd).mean(axis=1)

    def probability(self, scores: np.ndarray) -> np.ndarray:
        """``fusion_lr``: the logistic regression's probability."""
        return expit(np.asarray(scores, np.float64) @ self.weights + self.intercept)


def fusion_fit(models: Sequence[str], scores: np.ndarray, label: np.ndarray) -> Fusion:
    """Both fusions from calibration pairs' ``(n, models)`` scores and 0/1 labels."""
    x = np.asarray(scores, np.float64)
    sd = np.maximum(x.std(axis=0), 1e-12)
    w, b = logistic_fit(x, np.asarray(label).astype(int))
    return Fusion(list(models), x.mean(axis=0), sd, w, b)
