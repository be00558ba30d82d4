"""Every figure of the mitigation table for one method's scores, for any batch of
identity-clustered bootstrap weights - each computed by the rule facecast already has:

* ``accuracy``: the 10-fold best-threshold accuracy
  (:func:`facecast.evaluate.metrics.kfold_accuracy`, each pair in its ``eval_fold``) with
  the exact threshold search (transformed scores are not cosines, so insightface's grid on
  ``2 - 2 cos`` does not apply; raw uses it too, so every row is alike); replicates hold
  the fold thresholds and re-weight each pair's correctness, as ``compare`` does;
* ``auc``, ``bias_pos``, ``bias_neg``, ``tar@far=<f>``: composed as the fairness
  bootstrap's :func:`facecast.fairness.bootstrap.replicate_metrics` composes them, from
  its :class:`~facecast.fairness.bootstrap.Prepared` pairs (AUC over the fairness
  reference pairs - every evaluated pair unless ``fairness.mixed_pairs: exclude`` -, the
  FairFace 2020 Bias+/Bias- by :func:`facecast.fairness.bias.discrimination` and
  :func:`~facecast.fairness.bias.bias_of`, TAR at the threshold its one rule sets per
  replicate), with no fairness groups too;
* at ONE global threshold per method (target ``mitigation.fmr`` over its evaluated
  impostors): ``fmr_<group>``/``fnmr_<group>``, ``fmr_max_min``, ``fnmr_max_min``,
  ``fdr``, ``garbe`` (:func:`facecast.fairness.bootstrap.weighted_rates`,
  :func:`facecast.fairness.threshold.disparity_arrays`);
* ``ks`` (all evaluated pairs) and ``ks_<group>`` (pairs of one group), the KS calibration
  error of the method's probability (:func:`facecast.mitigation.calibrate.ks_error`), and
  FairCal's summaries over groups ``ks_aad`` (mean absolute deviation from the groups'
  mean) and ``ks_mad`` (maximum absolute deviation).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.compare.paired import fold_correct
from facecast.evaluate.metrics import kfold_accuracy
from facecast.fairness.bias import bias_of, discrimination
from facecast.fairness.bootstrap import Prepared, replicate_thresholds, weighted_rates
from facecast.fairness.threshold import disparity_arrays
from facecast.mitigation.calibrate import ks_sorted

__all__ = ["LOWER_IS_BETTER", "MethodState", "metric_names"]

#: metrics where lower is better (the others: higher; per-group rates: neither)
LOWER_IS_BETTER = ("bias_pos", "bias_neg", "fmr_max_min", "fnmr_max_min", "garbe", "ks",
                   "ks_aad", "ks_mad")


def _g(x: float) -> str:
    return f"{float(x):g}"


def metric_names(fars: Sequence[float], groups: Sequence[str]) -> list[str]:
    """The table's metrics, in column order (group metrics only with groups)."""
    names = ["accuracy", "auc", *[f"tar@far={_g(f)}" for f in fars], "bias_pos",
             "bias_neg", "threshold"]
    if groups:
        names += ["fmr_max_min", "fnmr_max_min", "fdr", "garbe"]
        names += [f"fmr_{g}" for g in groups] + [f"fnmr_{g}" for g in groups]
    names.append("ks")
    if groups:
        names += [f"ks_{g}" for g in groups] + ["ks_aad", "ks_mad"]
    return names


class MethodState:
    """What the replicates of one method share (sort orders, fold correctness, cells).

    ``ann``: the annotated evaluated pairs (``label``, ``group``, ``combo``, ``status``,
    ``in_cells``, ``in_reference``, ``eval_fold``); ``score`` and ``prob`` the method's.
    """

    def __init__(self, ann: pd.DataFrame, score: np.ndarray, prob: np.ndarray, *,
                 fars: Sequence[float], fmr: float, fairness: Mapping[str, Any]):
        self.score = np.asarray(score, np.float64)
        self.label = ann["label"].to_numpy().astype(int)
        fold = ann["eval_fold"].astype(str).to_numpy()
        self.prep = Prepared(ann.assign(score=self.score),
                             min_pairs=int(fairness.get("min_pairs", 1)))
        self.groups = list(self.prep.group_names)
        self.targets = list(dict.fromkeys([float(fmr), *map(float, fars)]))
        self.fars, self.fmr = [float(f) for f in fars], float(fmr)
        self.alpha = float(fairness.get("alpha", 0.5))
        self.min_groups = int(fairness.get("min_groups", 1))
        self.correct = fold_correct(self.score, self.label, fold, "exact")
        keep = fold != ""
        self.accuracy = (kfold_accuracy(self.score[keep], self.label[keep], fold[keep],
                                        "exact").mean
                         if len(np.unique(fold[keep])) >= 2 else np.nan)
        self.order = np.argsort(np.asarray(prob, np.float64), kind="stable")
        self.gap = (np.asarray(prob, np.float64) - self.label)[self.order]
        group = ann["group"].to_numpy(object)[self.order]
        self.group_idx = [np.flatnonzero(group == g) for g in self.groups]

    def _ks(self, w: np.ndarray) -> dict[str, np.ndarray]:
        ws = w[:, self.order]
        out = {"ks": ks_sorted(ws, self.gap)}
        per = [ks_sorted(ws[:, i], self.gap[i]) for i in self.group_idx]
        for g, v in zip(self.groups, per, strict=True):
            out[f"ks_{g}"] = v
        if per:
            stack = np.column_stack(per)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a group without pairs
                dev = np.abs(stack - np.nanmean(stack, axis=1, keepdims=True))
                out["ks_aad"], out["ks_mad"] = np.nanmean(dev, axis=1), np.nanmax(dev, axis=1)
        return out

    def _bias(self, w: np.ndarray) -> dict[str, np.ndarray]:
        """Bias+ and Bias- per weight row (NaN without cells), as the fairness
        bootstrap computes them."""
        out = {}
        for sign, key in (("+", "bias_pos"), ("-", "bias_neg")):
            if not self.prep.shape[0] * self.prep.shape[1]:
                out[key] = np.full(len(w), np.nan)
                continue
            auc, count = self.prep.cells[sign](w)
            auc = auc.reshape(-1, *self.prep.shape)
            pres = self.prep.present[sign][None] & (count.reshape(-1, *self.prep.shape) > 0)
            out[key] = np.atleast_1d(bias_of(discrimination(auc, pres, self.min_groups)[1]))
        return out

    def metrics(self, w: np.ndarray, point: bool = False) -> dict[str, np.ndarray]:
        """Every metric of :func:`metric_names` per weight row ``(B,)``; ``point``: the
        point estimates (unit weights; accuracy the 10-fold mean, as evaluate reports)."""
        w = np.atleast_2d(w)
        ok = np.isfinite(self.correct)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = (w[:, ok] * self.correct[ok]).sum(1) / w[:, ok].sum(1)
        thr = replicate_thresholds(self.prep, w * self.prep.ref[None, :], self.targets)
        tar, fmr, fnmr = weighted_rates(self.prep, w, thr)
        col = {t: j for j, t in enumerate(self.targets)}
        out = {"accuracy": np.full(len(w), self.accuracy) if point else acc,
               "auc": self.prep.accuracy(w)[0][:, 0],
               **{f"tar@far={_g(f)}": tar[:, col[f]] for f in self.fars},
               **self._bias(w), "threshold": thr[:, col[self.fmr]]}
        if self.groups:
            j = col[self.fmr]
            disp = disparity_arrays(fmr[:, j], fnmr[:, j], self.alpha)
            out.update({k: disp[k] for k in ("fmr_max_min", "fnmr_max_min", "fdr", "garbe")})
            for i, g in enumerate(self.groups):
                out[f"fmr_{g}"], out[f"fnmr_{g}"] = fmr[:, j, i], fnmr[:, j, i]
        out.update(self._ks(w))
        return out
