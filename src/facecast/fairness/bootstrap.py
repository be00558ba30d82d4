"""Identity-clustered bootstrap of TAR@FMR, accuracy, Bias+/-, FDR and GARBE.

Pairs are not independent: every pair of one identity shares its errors. So we resample
identities, not pairs: a replicate draws the identities with replacement (counts
``c_i``, multinomial, seeded), and a pair enters it with multiplicity ``c_a * c_b`` for an
impostor pair of identities a != b and ``c_a`` for a genuine pair (pairs between two copies
of one drawn identity are not invented). Every metric is then computed on the weighted
pairs, all replicates of a chunk at once (weights of shape ``(B, n)``; sorting happens
once, replicates only change the weights). Intervals: basic for Bias, FDR and GARBE,
BCa for the rest (:mod:`facecast.fairness.intervals`); one method for all as an option.

Thresholds: with thresholds from the run's own impostors (target FMRs), each replicate
recomputes them from its own impostors; fixed thresholds stay fixed.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import scipy.sparse as sp
from tqdm import tqdm

from facecast.evaluate.resample import identity_weights
from facecast.fairness.auc import GroupedAUC
from facecast.fairness.bias import bias_of, cell_index, codes_of, discrimination
from facecast.fairness.intervals import interval_rows, jackknife_pair_weights
from facecast.fairness.threshold import disparity_arrays


class Prepared:
    """Everything about an annotated pair table that bootstrap replicates share: sort
    orders, cell and group codes, sparse indicator matrices. Replicates change weights only.

    ``ann`` is the annotated pair table (:func:`facecast.fairness.groups.annotate_pairs`)
    restricted to valid rows (finite score, label 0/1).
    """

    def __init__(self, ann: pd.DataFrame, *, min_pairs: int = 1):
        self.scores = ann["score"].to_numpy(dtype=np.float64)
        self.labels = ann["label"].to_numpy().astype(bool)
        self.ref = ann["in_reference"].to_numpy(bool)
        n = self.scores.shape[0]
        self.n = n
        self.accuracy = GroupedAUC(self.scores, self.labels, np.where(self.labels, 0, -1), 1,
                                   reference=self.ref)
        idx = cell_index(ann["group"].to_numpy(object), ann["combo"].to_numpy(object),
                         ann["in_cells"].to_numpy(bool) & self.ref)
        self.shape = idx.shape
        n_cells = idx.shape[0] * idx.shape[1]
        self.cells = {sign: GroupedAUC(self.scores, self.labels, idx.cells, n_cells, sign=sign,
                                       reference=self.ref) for sign in ("+", "-")}
        # cells taking part are fixed by the point estimate (unit weights)
        self.present = {sign: g()[1].reshape(idx.shape) >= max(min_pairs, 1)
                        for sign, g in self.cells.items()}
        group = ann["group"].to_numpy(object)
        grp_ok = pd.notna(group) & (ann["status"].to_numpy(object) != "mixed") & self.ref
        self.group_names = sorted({str(g) for g in group[grp_ok]})
        codes = np.where(grp_ok, codes_of(group, self.group_names), -1)
        in_g = codes >= 0
        self.group_onehot = sp.csr_matrix(
            (np.ones(int(in_g.sum())), (np.flatnonzero(in_g), codes[in_g])),
            shape=(n, max(len(self.group_names), 1)))
        imp = self.ref & ~self.labels
        self.imp_idx = np.flatnonzero(imp)
        self.imp_unique, inv = np.unique(self.scores[imp], return_inverse=True)
        self.imp_onehot = sp.csr_matrix(
            (np.ones(inv.shape[0]), (np.arange(inv.shape[0]), inv)),
            shape=(inv.shape[0], max(self.imp_unique.shape[0], 1)))


def replicate_thresholds(prep: Prepared, w: np.ndarray, targets: Sequence[float]) -> np.ndarray:
    """Per replicate weight row of ``w`` (over ``prep``'s pairs), the lowest threshold whose
    weighted FMR is at most each target (accept iff score >= t): ``(B, T)``, NaN for a row
    without impostor weight; :func:`weighted_thresholds` on prepared pairs."""
    out = np.full((w.shape[0], len(targets)), np.nan)
    if prep.imp_unique.shape[0] == 0:
        return out
    wu = np.asarray((prep.imp_onehot.T @ w[:, prep.imp_idx].T).T)
    total = wu.sum(axis=1, keepdims=True)
    above = total - np.cumsum(wu, axis=1)
    for i, target in enumerate(targets):
        ok = above <= float(target) * total + 1e-9 * np.maximum(total, 1)
        j = np.argmax(ok, axis=1)
        # accept iff score >= t: t just above the highest impostor score to reject
        out[:, i] = np.where(total[:, 0] > 0, np.nextafter(prep.imp_unique[j], np.inf), np.nan)
    return out


def weighted_thresholds(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray,
                        targets: Sequence[float]) -> np.ndarray:
    """Per weight row, the lowest t with weighted FMR(t) <= target (accept iff score >= t).

    Returns ``(B, T)``; NaN for a row without impostor weight. With unit weights equals
    :func:`facecast.fairness.threshold.thresholds_at_fmr`.
    """
    ann = pd.DataFrame({"score": scores, "label": np.asarray(labels).astype(bool),
                        "in_reference": True, "in_cells": False, "group": None,
                        "combo": None, "status": "ok"})
    return replicate_thresholds(Prepared(ann), np.atleast_2d(weights), targets)


def weighted_rates(prep: Prepared, w: np.ndarray,
                   thresholds: np.ndarray) -> tuple[np.ndarray, ...]:
    """TAR, and per-group FMR and FNMR at per-row thresholds ``(B, T)``.

    Returns ``(tar (B, T), fmr (B, T, G), fnmr (B, T, G))``; accept = score >= threshold.
    """
    b, t = thresholds.shape
    w = w * prep.ref[None, :]
    gen_w = w * prep.labels
    imp_w = w * ~prep.labels
    oh = prep.group_onehot
    n_groups = len(prep.group_names)
    n_gen_g = np.asarray((oh.T @ gen_w.T).T)
    n_imp_g = np.asarray((oh.T @ imp_w.T).T)
    tar = np.full((b, t), np.nan)
    fmr = np.full((b, t, oh.shape[1]), np.nan)
    fnmr = np.full_like(fmr, np.nan)
    gen_total = gen_w.sum(axis=1)
    for i in range(t):
        accept = prep.scores[None, :] >= thresholds[:, i:i + 1]
        with np.errstate(invalid="ignore", divide="ignore"):
            tar[:, i] = (gen_w * accept).sum(axis=1) / gen_total
            fm = np.asarray((oh.T @ (imp_w * accept).T).T)
            fnm = n_gen_g - np.asarray((oh.T @ (gen_w * accept).T).T)
            fmr[:, i] = np.where(n_imp_g > 0, fm / n_imp_g, np.nan)
            fnmr[:, i] = np.where(n_gen_g > 0, fnm / n_gen_g, np.nan)
        tar[np.isnan(thresholds[:, i]), i] = np.nan
    return tar, fmr[..., :n_groups], fnmr[..., :n_groups]


def _fmt(x: float) -> str:
    return f"{x:g}"


def replicate_metrics(prep: Prepared, weights: np.ndarray, *, targets: Sequence[float],
                      fixed_thresholds: Sequence[float] | None, alpha: float,
                      min_groups: int) -> pd.DataFrame:
    """All bootstrapped metrics for a batch of weight rows, as a wide table (one row each)."""
    w = np.atleast_2d(weights)
    out: dict[str, np.ndarray] = {}
    out["accuracy"] = prep.accuracy(w)[0][:, 0]
    for sign, key in (("+", "bias_pos"), ("-", "bias_neg")):
        auc, count = prep.cells[sign](w)
        auc = auc.reshape(-1, *prep.shape)
        pres = prep.present[sign][None] & (count.reshape(-1, *prep.shape) > 0)
        _, mean_d = discrimination(auc, pres, min_groups)
        out[key] = np.atleast_1d(bias_of(mean_d))
    if fixed_thresholds:
        thr = np.tile(np.asarray(fixed_thresholds, dtype=np.float64), (w.shape[0], 1))
        tags = [f"t={_fmt(t)}" for t in fixed_thresholds]
    else:
        thr = replicate_thresholds(prep, w * prep.ref[None, :], targets)
        tags = [f"fmr={_fmt(t)}" for t in targets]
    tar, fmr, fnmr = weighted_rates(prep, w, thr)
    for i, tag in enumerate(tags):
        out[f"threshold@{tag}"] = thr[:, i]
        out[f"tar@{tag}"] = tar[:, i]
        disp = disparity_arrays(fmr[:, i], fnmr[:, i], alpha)
        out[f"fdr@{tag}"] = disp["fdr"]
        out[f"garbe@{tag}"] = disp["garbe"]
    return pd.DataFrame(out)


def bootstrap(ann: pd.DataFrame, *, n_boot: int, seed: int, targets: Sequence[float],
              fixed_thresholds: Sequence[float] | None = None, alpha: float = 0.5,
              min_pairs: int = 1, min_groups: int = 2, confidence: float = 0.95,
              chunk: int = 8, interval: str = "auto", jackknife_blocks: int = 100
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Identity-clustered bootstrap; returns ``(replicates, summary)``.

    ``replicates``: one row per replicate (``replicate`` + one column per metric).
    ``summary``: ``metric``, ``estimate`` (all pairs, unit weights), ``boot_mean``, ``se``,
    ``lo``, ``hi`` (the ``interval`` at ``confidence``: ``auto`` = basic for Bias, FDR and
    GARBE, BCa - its acceleration from a delete-one-block jackknife over
    ``jackknife_blocks`` identity blocks - for the rest; or one of them, or percentile, for
    all: :mod:`facecast.fairness.intervals`), ``n_boot``, ``interval``, ``covers``,
    ``note`` (e.g. the interval misses its estimate), ``n_identities``.
    """
    valid = ann["in_reference"].to_numpy(bool) | ann["in_cells"].to_numpy(bool)
    ann = ann.loc[valid].reset_index(drop=True)
    prep = Prepared(ann, min_pairs=min_pairs)
    kw = dict(targets=targets, fixed_thresholds=fixed_thresholds, alpha=alpha,
              min_groups=min_groups)
    point = replicate_metrics(prep, np.ones((1, len(ann))), **kw)
    rng = np.random.default_rng(seed)
    reps = [replicate_metrics(prep, w, **kw)
            for w in tqdm(identity_weights(ann["identity_a"].to_numpy(),
                                           ann["identity_b"].to_numpy(), n_boot, rng, chunk),
                          total=-(-n_boot // chunk), desc="bootstrap chunks", mininterval=5)]
    replicates = pd.concat(reps, ignore_index=True) if reps else point.iloc[:0]
    replicates.insert(0, "replicate", np.arange(len(replicates)))
    n_ids = int(pd.concat([ann["identity_a"], ann["identity_b"]]).nunique())
    jack = None
    if interval in ("auto", "bca") and len(replicates):
        jack = pd.concat([replicate_metrics(prep, w, **kw) for w in jackknife_pair_weights(
            ann["identity_a"].to_numpy(), ann["identity_b"].to_numpy(), jackknife_blocks,
            chunk)], ignore_index=True)
    summary = interval_rows(point.iloc[0].to_dict(), replicates, method=interval,
                            confidence=confidence, jackknife=jack,
                            n_blocks=0 if jack is None else len(jack))
    summary["n_identities"] = n_ids
    return replicates, summary
