"""Paired comparison of two models scored on the same pairs.

Per benchmark and model pair: the difference (A - B) in 10-fold accuracy, AUC, TAR at
each FAR and FNMR at a shared FMR (each model at its own threshold for that FMR), with an
identity-clustered *paired* bootstrap (:func:`bootstrap_differences`) and the test of
:mod:`facecast.compare.inference` on its replicates.

**Clusters.** A cluster is an identity. A replicate draws the benchmark's identities with
replacement (:func:`facecast.evaluate.resample.identity_weights`) and weights the pairs of
*both* models alike: a genuine pair by its identity's count, an impostor pair by the
product of its two identities' counts (the pairs the drawn identities would form among
themselves). So every pair that shares an identity with another moves with it, and
errors that cluster by identity widen the interval as they should. Files without identity
columns: each image is its own identity (:func:`read_scores` logs a warning).

The replicates hold the 10-fold thresholds fixed (each fold's test pairs at the threshold
chosen on the other folds, re-weighted), re-rank for AUC and re-set the FMR thresholds per
replicate by facecast's one impostor-allowance rule.

**Failures.** A pair without a feature (status not ``ok`` or no score) counts by the one
failure rule (``evaluate.failed``, :mod:`facecast.evaluate.failures`, read from the
``accuracy`` settings): under ``nonmatch`` it is kept at score ``-inf`` for the model that
failed (a model that misses more faces pays for it in every figure), under ``drop`` the
pair leaves the comparison when either model failed it (the common scored pairs).
``n_failed_a`` / ``n_failed_b`` count them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from facecast.compare.inference import clustered_test
from facecast.evaluate.failures import DEFAULT_RULE, FAILED_SCORE, check_rule, failed_mask
from facecast.evaluate.folds import scored_folds
from facecast.evaluate.metrics import allowed_impostors, far_resolvable, kfold_accuracy
from facecast.evaluate.resample import identity_weights
from facecast.fairness.threshold import threshold_at, unresolved_note
from facecast.io.parquet_io import read_parquet

__all__ = ["Paired", "align", "read_scores", "bootstrap_differences", "compare_pair",
           "metric_names", "metric_target", "lower_is_better"]

log = logging.getLogger(__name__)

#: the compared metrics; ``tar@far=..`` per target and ``fnmr@fmr=..`` follow
BASE_METRICS = ("accuracy", "auc")
#: columns a scores file must have
NEEDED = ("image_a", "image_b", "label", "score")


def lower_is_better(metric: str) -> bool:
    """Whether a smaller value of ``metric`` is the better one (FNMR)."""
    return metric.startswith("fnmr")


@dataclass
class Paired:
    """Two models' scores on the same pairs (one row per pair)."""

    label: np.ndarray
    score_a: np.ndarray
    score_b: np.ndarray
    fold: np.ndarray
    identity_a: np.ndarray
    identity_b: np.ndarray
    failed_a: np.ndarray | None = None  # the pair has no feature for model A
    failed_b: np.ndarray | None = None

    @property
    def n_identities(self) -> int:
        """Distinct identities (clusters) among the pairs."""
        return len(pd.unique(np.concatenate([self.identity_a, self.identity_b])))


def read_scores(path: str | os.PathLike | pd.DataFrame) -> pd.DataFrame:
    """A scores file (or frame) with ``image_a``, ``image_b``, ``label``, ``score``; warns
    when ``identity_a``/``identity_b`` are absent (then :func:`align` takes the other
    model's, else treats each image as its own identity). Raises ``ValueError`` naming
    missing columns."""
    frame = path if isinstance(path, pd.DataFrame) else read_parquet(path)
    name = "scores" if isinstance(path, pd.DataFrame) else str(path)
    missing = [c for c in NEEDED if c not in frame.columns]
    if missing:
        raise ValueError(f"{name} lacks column(s) {missing}; scored pairs need "
                         f"{list(NEEDED)} (and optionally identity_a, identity_b, fold)")
    if not {"identity_a", "identity_b"} <= set(frame.columns):
        log.warning("%s has no identity_a/identity_b: unless the other model's file has "
                    "them, the bootstrap treats each image as its own identity "
                    "(dependence between images of one person is ignored)", name)
    return frame


IDS = ["identity_a", "identity_b"]


def _has_ids(frame: pd.DataFrame) -> bool:
    return set(IDS) <= set(frame.columns)


def _keyed(frame: pd.DataFrame, ids: bool, rule: str = DEFAULT_RULE) -> pd.DataFrame:
    """``lo``/``hi`` (the pair's images in text order: an order-free key), a numeric
    label, ``score`` (``-inf`` for a pair without a feature under ``nonmatch``, NaN under
    ``drop``), ``failed``, and with ``ids`` the identities of ``lo``/``hi`` (``id_lo``,
    ``id_hi``)."""
    a = frame["image_a"].astype(str).to_numpy(dtype=str)
    b = frame["image_b"].astype(str).to_numpy(dtype=str)
    first = a <= b
    failed = failed_mask(frame)
    score = pd.to_numeric(frame["score"], errors="coerce").to_numpy(np.float64).copy()
    score[failed] = FAILED_SCORE if rule == "nonmatch" else np.nan
    out = pd.DataFrame({"lo": np.where(first, a, b), "hi": np.where(first, b, a),
                        "label": pd.to_numeric(frame["label"], errors="coerce").to_numpy(),
                        "score": score, "failed": failed})
    if ids:
        ia = frame["identity_a"].astype(str).to_numpy(dtype=str)
        ib = frame["identity_b"].astype(str).to_numpy(dtype=str)
        out["id_lo"], out["id_hi"] = np.where(first, ia, ib), np.where(first, ib, ia)
    return out


def align(a: pd.DataFrame, b: pd.DataFrame, accuracy: Mapping[str, Any] | None = None
          ) -> Paired:
    """The pairs of evaluate's test that both models count (label 0/1; under the failure
    rule ``accuracy["failed"]``: every pair, one without a feature at ``-inf``, or under
    ``drop`` the pairs both scored), matched on the unordered image pair and the label,
    oriented as in A's file; ``fold``:
    each pair's fold in the 10-fold accuracy, by facecast's one fold rule
    (:func:`scored_folds` of model A's file with the ``evaluate`` settings ``accuracy``);
    held-out (``val``) pairs are left out, as evaluate leaves them out of every figure.
    Identities: A's, else B's, else each image its own. Logs how many pairs of either
    file found no partner."""
    acc = dict(accuracy or {})
    rule = check_rule(str(acc.get("failed", DEFAULT_RULE)))
    fold = scored_folds(a, n_folds=int(acc.get("n_folds", 10)), seed=int(acc.get("seed", 0)),
                        include_val=bool(acc.get("include_val", False)))
    from_a, from_b = _has_ids(a), not _has_ids(a) and _has_ids(b)
    left = _keyed(a, from_a, rule).assign(fold=np.asarray(fold, dtype=str),
                                          first=a["image_a"].astype(str).to_numpy(dtype=str))
    right = _keyed(b, from_b, rule).rename(columns={"score": "score_b", "failed": "failed_b"})
    right = right.drop_duplicates(["lo", "hi", "label"])
    m = left.merge(right, on=["lo", "hi", "label"], how="inner")
    if len(m) < max(len(left), len(right)):
        log.warning("%d of %d pairs of A and %d of %d of B have no partner in the other "
                    "file; compared on the %d common pairs", len(left) - len(m), len(left),
                    len(right) - len(m), len(right), len(m))
    counted = [~np.isnan(m[c].to_numpy(np.float64)) & (m[c].to_numpy(np.float64) != np.inf)
               for c in ("score", "score_b")]  # -inf: a pair without a feature (nonmatch)
    m = m[counted[0] & counted[1] & m["label"].isin([0, 1])
          & (m["fold"] != "")].reset_index(drop=True)
    id_lo, id_hi = ((m["id_lo"], m["id_hi"]) if from_a or from_b else (m["lo"], m["hi"]))
    flip = (m["first"] != m["lo"]).to_numpy()     # A's image_a is the pair's `hi`
    ida = np.where(flip, id_hi, id_lo).astype(str)
    idb = np.where(flip, id_lo, id_hi).astype(str)
    return Paired(m["label"].to_numpy().astype(int), m["score"].to_numpy(np.float64),
                  m["score_b"].to_numpy(np.float64), m["fold"].to_numpy(str), ida, idb,
                  m["failed"].to_numpy(bool), m["failed_b"].to_numpy(bool))


def fold_correct(score: np.ndarray, label: np.ndarray, fold: np.ndarray,
                  thresholds: str = "insightface") -> np.ndarray:
    """Per pair: correct at its fold's threshold (chosen on the other folds), decided by
    the 10-fold accuracy's own rule (:meth:`KFoldAccuracy.correct`, ``2 - 2s < t``), so a
    fold's mean is exactly its accuracy in :func:`kfold_accuracy` and the replicates
    re-weight the point estimate's decisions; pairs outside the 10-fold test (fold
    ``""``) and single-fold protocols excluded (NaN)."""
    out = np.full(len(score), np.nan)
    keep = fold != ""
    if len(np.unique(fold[keep])) < 2 or len(np.unique(label[keep])) < 2:
        return out
    acc = kfold_accuracy(score[keep], label[keep], fold[keep], thresholds)
    out[keep] = acc.correct(score[keep], label[keep], fold[keep]).astype(float)
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
        cum = np.cumsum(w[r, imp][order])   # the resample's impostor weight, best first
        if not cum.size or cum[-1] <= 0:
            continue
        wg = w[r, gen]
        for j, k in enumerate(allowed_impostors(cum, targets)):  # fairness's rule
            thr = threshold_at(si, int(k))
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


def metric_target(metric: str) -> float:
    """The target FAR/FMR of a ``tar@far=..``/``fnmr@fmr=..`` metric; NaN for the others."""
    return float(metric.split("=", 1)[1]) if "=" in metric else float("nan")


def bootstrap_differences(p: Paired, *, fars: Sequence[float], fmr: float, n_boot: int,
                          seed: int, thresholds: str = "insightface"
                          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(A, B, D)``: each model's metrics (:func:`metric_names` order; accuracy is the
    10-fold mean, as evaluate reports it) and ``(n_boot, metrics)`` paired replicates of
    A - B from one identity-clustered weight draw shared by both models (NaN where a
    replicate leaves a metric undefined)."""
    ca = fold_correct(p.score_a, p.label, p.fold, thresholds)
    cb = fold_correct(p.score_b, p.label, p.fold, thresholds)
    ones = np.ones((1, len(p.label)))
    ma = _metrics(p, p.score_a, ca, ones, fars, fmr)[0]
    mb = _metrics(p, p.score_b, cb, ones, fars, fmr)[0]
    keep = p.fold != ""
    if len(np.unique(p.fold[keep])) >= 2 and len(np.unique(p.label[keep])) == 2:
        ma[0] = kfold_accuracy(p.score_a[keep], p.label[keep], p.fold[keep], thresholds).mean
        mb[0] = kfold_accuracy(p.score_b[keep], p.label[keep], p.fold[keep], thresholds).mean
    rng = np.random.default_rng(seed)
    diffs = [_metrics(p, p.score_a, ca, w, fars, fmr) - _metrics(p, p.score_b, cb, w, fars, fmr)
             for w in identity_weights(p.identity_a, p.identity_b, n_boot, rng, chunk=16)]
    d = np.vstack(diffs) if diffs else np.full((0, len(ma)), np.nan)
    return ma, mb, d


def compare_pair(p: Paired, *, fars: Sequence[float], fmr: float, n_boot: int, seed: int,
                 confidence: float = 0.95, thresholds: str = "insightface"
                 ) -> tuple[pd.DataFrame, dict[str, int]]:
    """Per metric: ``value_a``, ``value_b``, ``difference`` (A - B), the clustered interval
    ``ci_lo``/``ci_hi``, ``test``, raw two-sided ``p``, ``n_boot`` and ``note`` - ``""``
    or why no test was made (``n/a (k impostors)`` at a FAR the pairs cannot resolve,
    ``n/a (k identities)``, ...; then interval and p are NaN); ``fmr_resolvable`` on the
    TAR/FNMR rows only (NA elsewhere). Plus the pair, impostor and identity counts.
    ``thresholds``: the 10-fold accuracy's threshold grid (``evaluate.thresholds``)."""
    names = metric_names(fars, fmr)
    ma, mb, d = bootstrap_differences(p, fars=fars, fmr=fmr, n_boot=n_boot, seed=seed,
                                      thresholds=thresholds)
    n_imp, n_ids = int((p.label == 0).sum()), p.n_identities
    rows = []
    for j, name in enumerate(names):
        target = metric_target(name)
        resolvable = pd.NA if np.isnan(target) else bool(far_resolvable(n_imp, target))
        test = clustered_test(ma[j] - mb[j], d[:, j], n_ids, confidence)
        if resolvable is False:
            test.update(ci_lo=np.nan, ci_hi=np.nan, p=np.nan, note=unresolved_note(n_imp))
        rows.append({"metric": name, "value_a": ma[j], "value_b": mb[j],
                     "difference": ma[j] - mb[j], **test, "fmr_resolvable": resolvable})
    table = pd.DataFrame(rows)
    table["fmr_resolvable"] = table["fmr_resolvable"].astype("boolean")
    return table, {"n_pairs": len(p.label), "n_impostors": n_imp,
                   "n_identities": n_ids,
                   "n_failed_a": int(p.failed_a.sum()) if p.failed_a is not None else 0,
                   "n_failed_b": int(p.failed_b.sum()) if p.failed_b is not None else 0}
