"""Every figure of the mitigation table for one method's scores, for any batch of
identity-clustered bootstrap replicates (given as identity counts) - each the figure of
the rule facecast already has, on the replicate's pair weights:

* ``accuracy``: the 10-fold best-threshold accuracy
  (:func:`facecast.evaluate.metrics.kfold_accuracy`, each pair in its ``eval_fold``) with
  the exact threshold search (transformed scores are not cosines, so insightface's grid on
  ``2 - 2 cos`` does not apply; raw uses it too, so every row is alike); replicates hold
  the fold thresholds and re-weight each pair's correctness, as ``compare`` does;
* ``auc``, ``bias_pos``, ``bias_neg``, ``tar@far=<f>``: as the fairness bootstrap's
  :func:`facecast.fairness.bootstrap.replicate_metrics` composes them (AUC over the
  fairness reference pairs - every evaluated pair unless ``fairness.mixed_pairs:
  exclude`` -, the FairFace 2020 Bias+/Bias- by :func:`facecast.fairness.bias.
  discrimination` and :func:`~facecast.fairness.bias.bias_of`, TAR at the threshold its
  one rule sets per replicate), with no fairness groups too;
* at ONE global threshold per method (target ``mitigation.fmr`` over its evaluated
  impostors): ``fmr_<group>``/``fnmr_<group>``, ``fmr_max_min``, ``fnmr_max_min``,
  ``fdr``, ``garbe`` (:func:`facecast.fairness.threshold.disparity_arrays`);
* ``ks`` (all evaluated pairs) and ``ks_<group>`` (pairs of one group), the KS calibration
  error of the method's probability (:func:`facecast.mitigation.calibrate.ks_error`), and
  FairCal's summaries over groups ``ks_aad`` (mean absolute deviation from the groups'
  mean) and ``ks_mad`` (maximum absolute deviation).

The score-order figures come from one blocked pass of
:class:`facecast.mitigation.ranked.Ranked` (two running sums per batch instead of a pass
per figure); the KS sums (:class:`~facecast.mitigation.calibrate.RunningKS`) ride on it
when the probability order is the score order and add exactly what
:func:`~facecast.mitigation.calibrate.ks_sorted` adds on the pair weights, so every figure
is the pair-weight computation's (tests/test_mitigation_bootstrap.py).
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from facecast.compare.paired import fold_correct
from facecast.evaluate.metrics import kfold_accuracy
from facecast.fairness.bias import bias_of, cell_index, codes_of, discrimination
from facecast.fairness.threshold import disparity_arrays
from facecast.mitigation.calibrate import RunningKS
from facecast.mitigation.ranked import PairCodes, Ranked

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


def saturation_apart(prob: np.ndarray) -> np.ndarray:
    """``prob`` with every probability of exactly 0 or 1 made distinct (negative): the runs
    of equal probabilities a block may not cut (:class:`facecast.mitigation.ranked.Ranked`'s
    ``keep``). In a run of 0s the KS sum only falls (gap 0 or -1), in a run of 1s it only
    rises: its largest absolute value there is at the run's ends, whatever the order."""
    out = np.array(prob, np.float64)
    sat = (out <= 0.0) | (out >= 1.0)
    out[sat] = -1.0 - np.arange(int(sat.sum()))
    return out


def _same_ks_order(glued: np.ndarray, order: np.ndarray, prob: np.ndarray) -> bool:
    """Whether ``glued`` is the stable probability ``order`` but inside runs of 0s or 1s
    (where the order does not change the KS error: :func:`saturation_apart`)."""
    if np.array_equal(glued, order):
        return True
    p = prob[glued]
    step = np.diff(p)
    ties = step == 0
    ordered = np.diff(glued) > 0
    return bool(len(glued) == len(order) and (step >= 0).all()
                and (ordered | ~ties | (p[1:] <= 0.0) | (p[1:] >= 1.0)).all())


class _KSOrder:
    """The KS error's pairs in probability order (stable), cut into blocks, and each
    group's pairs in each block. Where the probability never falls along the score order
    (every method's but for rare ties) the blocks are the score sweep's - cut nowhere
    inside a run of equal probabilities but runs of 0s and 1s (:func:`saturation_apart`)
    - and a block's probability order is its own reordering (``local``): the KS sums ride
    on the sweep. Else a pass of its own."""

    def __init__(self, prob: np.ndarray, label: np.ndarray, group: np.ndarray,
                 groups: Sequence[str], ranked: Ranked):
        self.order = np.argsort(prob, kind="stable")
        self.codes = ranked.codes
        n = len(prob)
        cuts = ranked.cuts
        local = [np.lexsort((ranked.order[lo:hi], prob[ranked.order[lo:hi]]))
                 for lo, hi in zip(cuts[:-1], cuts[1:], strict=True)]
        glued = np.concatenate([ranked.order[lo:hi][p] for lo, hi, p in
                                zip(cuts[:-1], cuts[1:], local, strict=True)]) \
            if local else np.zeros(0, np.int64)
        self.shared = _same_ks_order(glued, self.order, prob)
        if self.shared:     # the sweep's order, reordered in each block
            self.cuts, self.local, self.order = cuts, local, glued
        else:
            self.cuts = np.unique(np.r_[np.arange(0, n, ranked.block), n]).astype(np.int64)
            self.local = [None] * (len(self.cuts) - 1)
        self.gap = (prob - label)[self.order]
        g = np.asarray(group, dtype=object)[self.order]
        codes = codes_of(g, list(groups))
        self.members = [[np.flatnonzero(codes[lo:hi] == i) for i in range(len(groups))]
                        for lo, hi in zip(self.cuts[:-1], self.cuts[1:], strict=True)]
        self.n_groups = len(groups)

    def start(self, rows: int) -> tuple[RunningKS, list[RunningKS]]:
        """Fresh running KS sums for all pairs and for each group."""
        return RunningKS(rows), [RunningKS(rows) for _ in range(self.n_groups)]

    def add(self, sums: tuple[RunningKS, list[RunningKS]], k: int, wf: np.ndarray) -> None:
        """Block ``k``'s float weights into the running sums (in score order when shared:
        reordered to probability order here)."""
        lo, hi = int(self.cuts[k]), int(self.cuts[k + 1])
        if self.local[k] is not None:
            wf = wf[:, self.local[k]]
        gap = self.gap[lo:hi]
        sums[0].add(wf, gap)
        for run, idx in zip(sums[1], self.members[k], strict=True):
            run.add(wf[:, idx], gap[idx])

    def run(self, table: np.ndarray, sums: tuple[RunningKS, list[RunningKS]]) -> None:
        """A pass of its own over the probability order (when it is not shared)."""
        for k, (lo, hi) in enumerate(zip(self.cuts[:-1], self.cuts[1:], strict=True)):
            w = self.codes.weights(table, self.order[lo:hi])
            self.add(sums, k, w.astype(np.float64))


class MethodState:
    """What the replicates of one method share (sort orders, fold correctness, cells).

    ``ann``: the annotated evaluated pairs (``label``, ``group``, ``combo``, ``status``,
    ``in_cells``, ``in_reference``, ``eval_fold``); ``score`` and ``prob`` the method's;
    ``codes`` the pairs' identity codes (shared by every method). Replicates come as
    identity counts (:meth:`metrics`); each figure equals the one of the pair weights
    :func:`facecast.evaluate.resample.identity_weights` gives for those counts.
    """

    def __init__(self, ann: pd.DataFrame, score: np.ndarray, prob: np.ndarray, *,
                 codes: PairCodes, fars: Sequence[float], fmr: float,
                 fairness: Mapping[str, Any]):
        self.score = np.asarray(score, np.float64)
        self.label = ann["label"].to_numpy().astype(int)
        fold = ann["eval_fold"].astype(str).to_numpy()
        self.codes = codes
        self.targets = list(dict.fromkeys([float(fmr), *map(float, fars)]))
        self.fars, self.fmr = [float(f) for f in fars], float(fmr)
        self.alpha = float(fairness.get("alpha", 0.5))
        self.min_groups = int(fairness.get("min_groups", 1))
        correct = fold_correct(self.score, self.label, fold, "exact")
        keep = fold != ""
        self.accuracy = (kfold_accuracy(self.score[keep], self.label[keep], fold[keep],
                                        "exact").mean
                         if len(np.unique(fold[keep])) >= 2 else np.nan)
        prob = np.asarray(prob, np.float64)
        self._rank(ann, correct, prob, int(fairness.get("min_pairs", 1)))
        self.ks_order = _KSOrder(prob, self.label, ann["group"].to_numpy(object),
                                 self.groups, self.ranked)

    def _rank(self, ann: pd.DataFrame, correct: np.ndarray, prob: np.ndarray,
              min_pairs: int) -> None:
        """Cells of Bias+/Bias- (and the cells taking part), groups of the rates."""
        ref = ann["in_reference"].to_numpy(bool)
        group = ann["group"].to_numpy(object)
        idx = cell_index(group, ann["combo"].to_numpy(object),
                         ann["in_cells"].to_numpy(bool) & ref)
        self.shape = idx.shape
        grp_ok = pd.notna(group) & (ann["status"].to_numpy(object) != "mixed") & ref
        self.groups = sorted({str(g) for g in group[grp_ok]})
        codes = np.where(grp_ok, codes_of(group, self.groups), -1)
        self.ranked = Ranked(self.score, self.label, ref, idx.cells,
                             idx.shape[0] * idx.shape[1], codes, len(self.groups), correct,
                             self.codes, keep=saturation_apart(prob))
        focus = {"+": (self.label == 1), "-": (self.label == 0)}
        self.present = {
            sign: np.bincount(idx.cells[f & (idx.cells >= 0)],
                              minlength=self.shape[0] * self.shape[1]).reshape(self.shape)
            >= max(min_pairs, 1) for sign, f in focus.items()}

    def _ks(self, sums: tuple[RunningKS, list[RunningKS]]) -> dict[str, np.ndarray]:
        out = {"ks": sums[0].result()}
        per = [run.result() for run in sums[1]]
        for g, v in zip(self.groups, per, strict=True):
            out[f"ks_{g}"] = v
        if per:
            stack = np.column_stack(per)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # a group without pairs
                dev = np.abs(stack - np.nanmean(stack, axis=1, keepdims=True))
                out["ks_aad"], out["ks_mad"] = np.nanmean(dev, axis=1), np.nanmax(dev, axis=1)
        return out

    def _bias(self, aucs: Mapping[str, tuple[np.ndarray, np.ndarray]], b: int
              ) -> dict[str, np.ndarray]:
        """Bias+ and Bias- per replicate (NaN without cells), as the fairness bootstrap
        computes them."""
        out = {}
        for sign, key in (("+", "bias_pos"), ("-", "bias_neg")):
            if not self.shape[0] * self.shape[1]:
                out[key] = np.full(b, np.nan)
                continue
            auc, count = aucs[sign]
            auc = auc.reshape(-1, *self.shape)
            pres = self.present[sign][None] & (count.reshape(-1, *self.shape) > 0)
            out[key] = np.atleast_1d(bias_of(discrimination(auc, pres, self.min_groups)[1]))
        return out

    def metrics(self, counts: np.ndarray, point: bool = False) -> dict[str, np.ndarray]:
        """Every metric of :func:`metric_names` per row ``(B,)`` of identity ``counts``
        ``(B, k)`` (:func:`facecast.evaluate.resample.identity_counts`; all ones: the
        point estimate); ``point``: accuracy is the 10-fold mean, as evaluate reports."""
        table = self.codes.table(counts)
        rk, ks = self.ranked, self.ks_order
        sums = ks.start(table.shape[0])
        blocks = iter(range(len(rk.blocks)))
        sw = rk.sweep(table, (lambda lo, hi, wf: ks.add(sums, next(blocks), wf))
                      if ks.shared else None)
        if not ks.shared:
            ks.run(table, sums)
        b = table.shape[0]
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = sw.correct / sw.decided
        aucs = rk.auc(sw)
        thr = rk.thresholds(sw, table, self.targets)
        tar = rk.tar(sw, table, thr)
        col = {t: j for j, t in enumerate(self.targets)}
        out = {"accuracy": np.full(b, self.accuracy) if point else acc,
               "auc": aucs["all"][0], **{f"tar@far={_g(f)}": tar[:, col[f]] for f in self.fars},
               **self._bias(aucs, b), "threshold": thr[:, col[self.fmr]]}
        if self.groups:
            fmr, fnmr = rk.group_rates(sw, table, thr[:, col[self.fmr]])
            disp = disparity_arrays(fmr, fnmr, self.alpha)
            out.update({k: disp[k] for k in ("fmr_max_min", "fnmr_max_min", "fdr", "garbe")})
            for i, g in enumerate(self.groups):
                out[f"fmr_{g}"], out[f"fnmr_{g}"] = fmr[:, i], fnmr[:, i]
        out.update(self._ks(sums))
        return out
