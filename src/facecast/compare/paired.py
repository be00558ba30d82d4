"""Paired comparison of two models scored on the same pairs.

Per benchmark and model pair: the difference (A - B) in 10-fold accuracy, AUC, TAR at
each FAR and FNMR at a shared FMR (each model at its own threshold for that FMR), with
an identity-clustered *paired* bootstrap interval (one replicate weights the pairs of
both models alike: :func:`facecast.evaluate.resample.identity_weights`) and a two-sided
p-value ``2 Phi(-|A - B| / sd)`` with the bootstrap standard deviation of the difference
(continuous, so a Holm correction across benchmarks is not limited by the number of
replicates); and the exact McNemar test on the accept decisions at the shared FMR
(pairs one model decides right and the other wrong; binomial(b + c, 1/2)).

The bootstrap replicates hold the 10-fold thresholds fixed (the accuracy of each fold's
test pairs at its training-fold threshold, re-weighted), re-rank for AUC and re-set the
FMR thresholds per replicate.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.special import bdtr, ndtr

from facecast.evaluate.metrics import kfold_accuracy
from facecast.evaluate.resample import identity_weights

#: the compared metrics; ``fnmr@fmr=..`` and ``tar@far=..`` per target
BASE_METRICS = ("accuracy", "auc")


@dataclass
class Paired:
    """Two models' scores on the same pairs."""

    label: np.ndarray
    score_a: np.ndarray
    score_b: np.ndarray
    fold: np.ndarray
    identity_a: np.ndarray
    identity_b: np.ndarray


def align(a: pd.DataFrame, b: pd.DataFrame) -> Paired:
    """The pairs both models scored (finite scores, label 0/1), matched on
    ``(image_a, image_b, label)``; ``fold`` from model A's file (``0`` .. when absent)."""
    key = ["image_a", "image_b", "label"]
    cols = [*key, "identity_a", "identity_b", "score"] + (["fold"] if "fold" in a else [])
    left = a[[c for c in cols if c in a.columns]].copy()
    right = b[key + ["score"]].rename(columns={"score": "score_b"})
    for f in (left, right):
        f["image_a"] = f["image_a"].astype(str)
        f["image_b"] = f["image_b"].astype(str)
        f["label"] = pd.to_numeric(f["label"], errors="coerce")
    m = left.merge(right.drop_duplicates(key), on=key, how="inner")
    m = m[np.isfinite(m["score"].astype(float)) & np.isfinite(m["score_b"].astype(float))
          & m["label"].isin([0, 1])].reset_index(drop=True)
    if "fold" in m:
        fold = m["fold"].astype(str).to_numpy()
    else:
        fold = (np.arange(len(m)) % 10).astype(str)
    ida = m["identity_a"].astype(str).to_numpy() if "identity_a" in m else m["image_a"].to_numpy()
    idb = m["identity_b"].astype(str).to_numpy() if "identity_b" in m else m["image_b"].to_numpy()
    return Paired(m["label"].to_numpy().astype(int), m["score"].to_numpy(np.float64),
                  m["score_b"].to_numpy(np.float64), fold, ida, idb)


def _fold_correct(score: np.ndarray, label: np.ndarray, fold: np.ndarray) -> np.ndarray:
    """Per pair: correct at its fold's threshold (chosen on the other folds), ``val``
    pairs and single-fold protocols excluded (NaN)."""
    out = np.full(len(score), np.nan)
    keep = fold != "val"
    if len(np.unique(fold[keep])) < 2 or len(np.unique(label[keep])) < 2:
        return out
    acc = kfold_accuracy(score[keep], label[keep], fold[keep])
    cos = dict(zip(acc.folds, acc.cosine_thresholds, strict=True))
    idx = np.flatnonzero(keep)
    t = np.array([cos[f] for f in fold[keep]])
    # kfold_accuracy predicts "same" when 2 - 2s < t_dist, i.e. s > 1 - t_dist / 2
    out[idx] = ((score[keep] > t) == (label[keep] == 1)).astype(float)
    return out


def _weighted_auc(score: np.ndarray, label: np.ndarray, w: np.ndarray) -> np.ndarray:
    """AUC per weight row (ties count one half)."""
    order = np.argsort(score, kind="stable")
    s, y, w = score[order], label[order] == 1, w[:, order]
    _, start = np.unique(s, return_index=True)
    wi = np.where(~y[None, :], w, 0.0)
    wg = np.where(y[None, :], w, 0.0)
    gi = np.add.reduceat(wi, start, axis=1)
    gg = np.add.reduceat(wg, start, axis=1)
    below = np.cumsum(gi, axis=1) - gi
    num = (gg * (below + 0.5 * gi)).sum(1)
    den = gg.sum(1) * gi.sum(1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return num / den


def _weighted_rates(score: np.ndarray, label: np.ndarray, w: np.ndarray,
                    targets: Sequence[float]) -> np.ndarray:
    """``(B, T)`` TAR at the lowest threshold whose weighted FMR <= each target."""
    gen, imp = label == 1, label == 0
    si = score[imp]
    order = np.argsort(-si, kind="stable")
    si = si[order]
    out = np.full((w.shape[0], len(targets)), np.nan)
    for r in range(w.shape[0]):
        wi = w[r, imp][order]
        tot = wi.sum()
        if tot <= 0:
            continue
        cum = np.cumsum(wi) / tot      # FMR if accepting impostors down to here
        wg = w[r, gen]
        for j, t in enumerate(targets):
            k = int(np.searchsorted(cum, t + 1e-12, side="right"))  # impostors allowed
            thr = np.nextafter(si[k], np.inf) if k < len(si) else -np.inf
            out[r, j] = (wg * (score[gen] >= thr)).sum() / max(wg.sum(), 1e-300)
    return out


def _metrics(p: Paired, score: np.ndarray, correct: np.ndarray, w: np.ndarray,
             fars: Sequence[float], fmr: float) -> np.ndarray:
    """``(B, 2 + len(fars) + 1)``: accuracy, AUC, TAR@each FAR, FNMR@fmr per row."""
    ok = np.isfinite(correct)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = (w[:, ok] * correct[ok]).sum(1) / w[:, ok].sum(1)
    auc = _weighted_auc(score, p.label, w)
    tars = _weighted_rates(score, p.label, w, [*fars, fmr])
    return np.column_stack([acc, auc, tars[:, :-1], 1.0 - tars[:, -1]])


def metric_names(fars: Sequence[float], fmr: float) -> list[str]:
    """Column names of :func:`compare_pair`'s metrics."""
    return [*BASE_METRICS, *[f"tar@far={f:g}" for f in fars], f"fnmr@fmr={fmr:g}"]


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p: ``min(1, 2 P(Bin(b + c, 1/2) <= min(b, c)))``."""
    n = b + c
    return 1.0 if n == 0 else float(min(1.0, 2.0 * bdtr(min(b, c), n, 0.5)))


def compare_pair(p: Paired, *, fars: Sequence[float], fmr: float, n_boot: int, seed: int,
                 confidence: float = 0.95) -> tuple[pd.DataFrame, dict[str, float]]:
    """Per metric: A, B, A - B, paired bootstrap interval and p; plus McNemar counts."""
    names = metric_names(fars, fmr)
    ca = _fold_correct(p.score_a, p.label, p.fold)
    cb = _fold_correct(p.score_b, p.label, p.fold)
    ones = np.ones((1, len(p.label)))
    ma = _metrics(p, p.score_a, ca, ones, fars, fmr)[0]
    mb = _metrics(p, p.score_b, cb, ones, fars, fmr)[0]
    # the accuracy row: the 10-fold mean (as evaluate reports), not the pooled share
    keep = p.fold != "val"
    if len(np.unique(p.fold[keep])) >= 2 and len(np.unique(p.label[keep])) == 2:
        ma[0] = kfold_accuracy(p.score_a[keep], p.label[keep], p.fold[keep]).mean
        mb[0] = kfold_accuracy(p.score_b[keep], p.label[keep], p.fold[keep]).mean
    diffs = []
    rng = np.random.default_rng(seed)
    for w in identity_weights(p.identity_a, p.identity_b, n_boot, rng, chunk=16):
        diffs.append(_metrics(p, p.score_a, ca, w, fars, fmr)
                     - _metrics(p, p.score_b, cb, w, fars, fmr))
    d = np.vstack(diffs) if diffs else np.full((0, len(names)), np.nan)
    q = (1 - confidence) / 2
    rows = []
    for j, name in enumerate(names):
        col = d[:, j][np.isfinite(d[:, j])]
        if len(col):
            lo, hi = np.quantile(col, [q, 1 - q])
            sd = float(np.std(col, ddof=1)) if len(col) > 1 else 0.0
            diff = ma[j] - mb[j]
            pv = (float(2 * ndtr(-abs(diff) / sd)) if sd > 0
                  else (1.0 if diff == 0 or not np.isfinite(diff) else 0.0))
        else:
            lo = hi = pv = np.nan
        rows.append({"metric": name, "value_a": ma[j], "value_b": mb[j],
                     "difference": ma[j] - mb[j], "lo": lo, "hi": hi, "p_boot": pv,
                     "n_boot": len(col)})
    # exact McNemar on the accept decisions at each model's threshold for the shared FMR
    dec = {}
    for tag, s in (("a", p.score_a), ("b", p.score_b)):
        imp = np.sort(s[p.label == 0])[::-1]
        k = int(np.floor(fmr * len(imp) + 1e-9))
        thr = np.nextafter(imp[k], np.inf) if k < len(imp) else -np.inf
        dec[tag] = (s >= thr) == (p.label == 1)
    b = int((dec["a"] & ~dec["b"]).sum())
    c = int((~dec["a"] & dec["b"]).sum())
    return pd.DataFrame(rows), {"mcnemar_a_only": b, "mcnemar_b_only": c,
                                "mcnemar_p": mcnemar_exact(b, c), "n_pairs": len(p.label)}


def holm(p: np.ndarray) -> np.ndarray:
    """Holm step-down adjusted p-values (family-wise error), capped at 1; NaN stays NaN."""
    p = np.asarray(p, np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = len(ok)
    if m == 0:
        return out
    order = ok[np.argsort(p[ok], kind="stable")]
    adj = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    out[order] = np.minimum(adj, 1.0)
    return out
