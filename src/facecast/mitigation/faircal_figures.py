"""FairCal's own figures (Salvador et al., ICLR 2022; ``tiagosalvador/faircal``), in its
convention, beside the table's: computed on each fold's evaluated pairs, then averaged
over the folds with their standard deviation (FairCal: "the average and standard
deviation across the 5 folds", ``np.std``: the population SD), and once on every
evaluated pair pooled.

On one fold's pairs (the *global* set: every pair, mixed pairs and pairs without a
feature included; a *subgroup*: pairs whose two images are both in it):

* the ROC as scikit-learn's ``roc_curve(..., drop_intermediate=False)`` draws it - one
  point per distinct score, from (0, 0) - on the method's score (FairCal's and the
  oracle's: their probability, as FairCal's ``'calibration'`` key);
* ``auroc``: the trapezoidal area under it (``sklearn.metrics.auc``);
* ``tpr@fpr=<f>``: TPR linearly interpolated on the global ROC at FPR ``f``
  (``np.interp(f, fpr, tpr)``), for FairCal's 0.1 % and 1 % (:data:`FAIRCAL_FPRS`);
* ``fpr_<g>@fpr=<f>``: the subgroup's FPR at the global threshold for FPR ``f``: the
  threshold interpolated on the global ROC (``np.interp(f, fpr, thr)``), the subgroup's
  FPR interpolated at it on the subgroup's ROC (``np.interp(t, thr[::-1], fpr[::-1])``);
  ``fpr@fpr=<f>_aad``, ``_mad``, ``_std``: over the subgroups, the mean and maximum
  absolute deviation from their mean and their population SD (FairCal's notebook);
* ``ks``, ``ece`` (global) and ``ks_<g>``, ``ece_<g>`` of the method's probability:
  FairCal's ``get_ks`` (:func:`facecast.mitigation.calibrate.ks_error`) and ``get_ece``
  (:func:`ece_error`: ``nbins`` equal-mass bins of the sorted probabilities);
  ``ks_mean``, ``ks_aad``, ``ks_mad``, ``ks_std`` (and ``ece_...``) over the subgroups.

Where FairCal's code differs (documented in docs/stages/mitigation.md): it caps every
ROC threshold at 1 (``np.fmin(thr, 1)``); here only the first point's (no pair accepted)
sits at 1 when every score is below 1, else one above the top score - scores beyond 1
(FSN, group shifts) keep distinct thresholds. Ties are sorted stably (FairCal's
``argsort`` is numpy's quicksort). A fold or subgroup that cannot carry a figure (no
genuine or no impostor pair; an empty ECE bin) gives NaN and a ``note``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from facecast.mitigation.calibrate import ks_error

__all__ = ["ECE_BINS", "FAIRCAL_FPRS", "deviations", "ece_error", "faircal_figures",
           "faircal_table", "roc_curve_points", "subgroup_fpr_at"]

#: the global FPRs of FairCal's tables (0.1 % and 1 %)
FAIRCAL_FPRS = (1e-3, 1e-2)
#: ECE bins: FairCal's main.py uses 25 on BFW (10 on RFW)
ECE_BINS = 25


def _g(x: float) -> str:
    return f"{float(x):g}"


def roc_curve_points(score: np.ndarray, label: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(fpr, tpr, thresholds)``: one point per distinct score, highest first, after
    (0, 0) at a threshold above every score (module docstring); empty arrays without
    genuine or impostor pairs."""
    s = np.asarray(score, np.float64)
    y = np.asarray(label).astype(bool)
    if not y.any() or y.all():
        return np.zeros(0), np.zeros(0), np.zeros(0)
    order = np.argsort(-s, kind="stable")
    s, y = s[order], y[order]
    last = np.r_[np.flatnonzero(s[1:] != s[:-1]), len(s) - 1]   # -inf runs too
    tps = np.cumsum(y)[last]
    fps = last + 1 - tps
    top = 1.0 if s[0] < 1.0 else s[0] + 1.0
    return (np.r_[0, fps] / fps[-1], np.r_[0, tps] / tps[-1], np.r_[top, s[last]])


def subgroup_fpr_at(global_roc: tuple[np.ndarray, ...], sub_roc: tuple[np.ndarray, ...],
                    fprs: Sequence[float]) -> np.ndarray:
    """The subgroup's FPR at the global threshold of each global FPR (module
    docstring); NaN where either ROC is empty."""
    fpr_g, _, thr_g = global_roc
    fpr_s, _, thr_s = sub_roc
    if not len(fpr_g) or not len(fpr_s):
        return np.full(len(fprs), np.nan)
    thr = np.interp(np.asarray(fprs, np.float64), fpr_g, thr_g)
    return np.interp(thr, thr_s[::-1], fpr_s[::-1])


def ece_error(prob: np.ndarray, label: np.ndarray, nbins: int) -> float:
    """FairCal's ``get_ece``: the probabilities sorted, position ``j`` in bin ``i`` where
    ``a_i <= j < a_(i+1)`` for ``a = int(linspace(0, n - 1, nbins + 1)) + 1`` (``a_0``
    read as 0); the bins' share-weighted ``|mean probability - share of genuine|``. NaN
    when a bin is empty (fewer pairs than bins)."""
    p = np.asarray(prob, np.float64)
    y = np.asarray(label, np.float64)
    n = len(p)
    if n == 0:
        return np.nan
    order = np.argsort(p, kind="stable")
    edges = np.linspace(0, n - 1, nbins + 1).astype(int) + 1
    edges[0] = 0
    edges[-1] = max(edges[-1], n)
    counts = np.diff(edges)
    if (counts <= 0).any():
        return np.nan
    conf = np.add.reduceat(p[order], edges[:-1])
    hits = np.add.reduceat(y[order], edges[:-1])
    return float(np.dot(counts / n, np.abs(conf / counts - hits / counts)))


def deviations(values: np.ndarray, prefix: str, mean: bool = False) -> dict[str, float]:
    """FairCal's summaries of the subgroups' ``values`` (NaN ones left out):
    ``<prefix>_aad`` (mean absolute deviation from their mean), ``_mad`` (maximum),
    ``_std`` (population SD); ``_mean`` too with ``mean``."""
    v = np.asarray(values, np.float64)
    v = v[np.isfinite(v)]
    if len(v):
        dev = np.abs(v - v.mean())
        out = {"mean": float(v.mean()), "aad": float(dev.mean()), "mad": float(dev.max()),
               "std": float(np.std(v))}
    else:
        out = dict.fromkeys(("mean", "aad", "mad", "std"), np.nan)
    return {f"{prefix}_{k}": x for k, x in out.items() if mean or k != "mean"}


def faircal_figures(score: np.ndarray, prob: np.ndarray, label: np.ndarray,
                    group: np.ndarray, groups: Sequence[str], *,
                    fprs: Sequence[float] = FAIRCAL_FPRS, nbins: int = ECE_BINS
                    ) -> dict[str, float]:
    """Every figure of the module docstring on one set of pairs (``group``: the pair's
    subgroup, or anything not in ``groups`` for a mixed pair)."""
    y = np.asarray(label).astype(int)
    roc = roc_curve_points(score, y)
    out: dict[str, float] = {"n_pairs": float(len(y)), "n_genuine": float(y.sum())}
    out["auroc"] = float(np.trapezoid(roc[1], roc[0])) if len(roc[0]) else np.nan
    for f in fprs:
        out[f"tpr@fpr={_g(f)}"] = float(np.interp(f, roc[0], roc[1])) if len(roc[0]) \
            else np.nan
    out["ks"] = float(ks_error(prob, y)[0]) if len(y) else np.nan
    out["ece"] = ece_error(prob, y, nbins)
    sub_fpr, ks, ece = [], [], []
    for g in groups:
        sel = np.asarray(group, dtype=object) == g
        sub = roc_curve_points(score[sel], y[sel])
        sub_fpr.append(subgroup_fpr_at(roc, sub, fprs))
        ks.append(float(ks_error(prob[sel], y[sel])[0]) if sel.any() else np.nan)
        ece.append(ece_error(prob[sel], y[sel], nbins))
        for f, v in zip(fprs, sub_fpr[-1], strict=True):
            out[f"fpr_{g}@fpr={_g(f)}"] = float(v)
        out[f"ks_{g}"], out[f"ece_{g}"] = ks[-1], ece[-1]
    if groups:
        at = np.array(sub_fpr).reshape(len(groups), len(fprs))
        for j, f in enumerate(fprs):
            out.update(deviations(at[:, j], f"fpr@fpr={_g(f)}"))
        out.update(deviations(np.array(ks), "ks", mean=True))
        out.update(deviations(np.array(ece), "ece", mean=True))
    return out


def _note(fig: dict[str, float]) -> str:
    if not np.isfinite(fig.get("auroc", np.nan)):
        return "n/a (no genuine or no impostor pair)"
    gaps = [k for k, v in fig.items() if not np.isfinite(v)]
    return f"n/a: {', '.join(gaps[:6])}{' ...' if len(gaps) > 6 else ''}" if gaps else ""


def faircal_table(ann: pd.DataFrame, scores: dict[str, np.ndarray],
                  probs: dict[str, np.ndarray], *, fits: np.ndarray,
                  fprs: Sequence[float] = FAIRCAL_FPRS, nbins: int = ECE_BINS,
                  order: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per method and ``fold``: each fit's evaluated pairs (``fits``: each pair's
    fit), ``mean`` and ``std`` over the fits with every figure (population SD, FairCal's
    convention), and ``pooled`` (every evaluated pair). Subgroups: the pairs of one
    fairness group (mixed pairs only in the global figures); ``note`` says what is
    NaN."""
    group = ann["group"].to_numpy(object)
    mixed = (ann["status"].to_numpy(object) == "mixed") | pd.isna(group)
    group = np.where(mixed, None, group)
    groups = sorted({str(g) for g in group[~mixed]})
    label = ann["label"].to_numpy().astype(int)
    names = sorted(pd.unique(np.asarray(fits, dtype=object)).tolist(),
                   key=lambda f: (str(f).count("+"), str(f)))
    rows = []
    for m in (order or list(scores)):
        s, p = np.asarray(scores[m], np.float64), np.asarray(probs[m], np.float64)
        per = []
        for f in names:
            sel = np.asarray(fits, dtype=object) == f
            fig = faircal_figures(s[sel], p[sel], label[sel], group[sel], groups,
                                  fprs=fprs, nbins=nbins)
            per.append(fig)
            rows.append({"method": m, "fold": str(f), **fig, "note": _note(fig)})
        full = [fig for fig in per if np.isfinite(fig["auroc"])]
        frame = pd.DataFrame(full) if full else pd.DataFrame(columns=list(per[0]))
        n = f"over {len(full)} of {len(per)} folds"
        sd = frame.std(ddof=0) if len(full) >= 2 else frame.mean() * np.nan
        rows.append({"method": m, "fold": "mean", **frame.mean().to_dict(), "note": n})
        rows.append({"method": m, "fold": "std", **sd.to_dict(),
                     "note": n if len(full) >= 2 else f"n/a ({len(full)} fold)"})
        fig = faircal_figures(s, p, label, group, groups, fprs=fprs, nbins=nbins)
        rows.append({"method": m, "fold": "pooled", **fig, "note": _note(fig)})
    return pd.DataFrame(rows)
