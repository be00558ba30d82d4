"""Verification metrics on scored pairs (numpy only, vectorised, exact).

Conventions: ``scores`` are similarities (cosine of L2-normalised embeddings; higher means
"same person"); ``labels`` are 1 for genuine and 0 for impostor pairs. A decision threshold
``t`` accepts a pair as genuine iff ``score >= t`` -- the convention of every threshold
facecast reports (ROC, TAR@FAR, EER here; the global thresholds of
:mod:`facecast.fairness.threshold`), so a threshold copied from one stage to the other gives
the same decisions. (The 10-fold accuracy alone follows insightface literally on distances,
``d < t``; its per-fold thresholds are internal to that figure.)

* :func:`kfold_accuracy` is the CAST / insightface 10-fold accuracy: for each fold, the
  threshold with the best accuracy on the other folds is applied to that fold; the result
  is the mean and (population) standard deviation of the per-fold accuracies. insightface
  thresholds the squared L2 distance of L2-normalised embeddings, ``d = 2 - 2 cos``, on
  the grid ``0, 0.01, ..., 3.99`` and predicts "same" when ``d < t``
  (:func:`predicts_same`, the rule every per-pair use of those thresholds shares:
  :meth:`KFoldAccuracy.correct`, the bootstrap of ``compare``); ties between
  thresholds go to the first (smallest) one, like ``np.argmax``. ``thresholds="exact"``
  searches every distinct distance instead of the grid.
* :func:`roc_points` equals ``sklearn.metrics.roc_curve(..., drop_intermediate=False)``.
* :func:`auc_score` is the Mann-Whitney statistic with average ranks for ties (equals
  ``sklearn.metrics.roc_auc_score``).
* :func:`equal_error_rate` interpolates linearly where FAR and FRR cross.
* :func:`tar_at_far` reports the best TAR among thresholds whose FAR does not exceed the
  target, with the FAR actually reached and the number of impostors behind it.
* :func:`far_resolvable` is the one rule of every stage for "can this protocol measure
  that FAR": at least ``1 / FAR`` impostor pairs (:func:`min_impostors`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from facecast.analysis.ranks import average_ranks

INSIGHTFACE_THRESHOLDS = np.arange(0, 4, 0.01)


@dataclass
class KFoldAccuracy:
    """Per-fold accuracies and the threshold (as a cosine similarity) each fold used."""

    folds: list[str]
    accuracies: np.ndarray
    thresholds: np.ndarray  # best squared-L2 threshold per fold

    @property
    def mean(self) -> float:
        return float(np.mean(self.accuracies)) if len(self.accuracies) else float("nan")

    @property
    def std(self) -> float:
        return float(np.std(self.accuracies)) if len(self.accuracies) else float("nan")

    @property
    def cosine_thresholds(self) -> np.ndarray:
        """The per-fold thresholds expressed as cosine similarities (``1 - t / 2``), for
        reading only: decide with :meth:`correct` (``s > 1 - t / 2`` and ``2 - 2s < t``
        differ in floating point where ``t`` is a pair's own distance)."""
        return 1.0 - self.thresholds / 2.0

    def correct(self, scores, labels, folds) -> np.ndarray:
        """Per pair: whether its fold's threshold decides it right, by the rule the
        accuracies were counted with (:func:`predicts_same`), so the mean over a fold's
        pairs is that fold's accuracy exactly. ``folds`` must be among :attr:`folds`."""
        f = np.asarray(folds).astype(str)
        names, inv = np.unique(f, return_inverse=True)
        known = dict(zip(self.folds, self.thresholds, strict=True))
        missing = sorted(set(names.tolist()) - set(known))
        if missing:
            raise ValueError(f"folds {missing} have no threshold (known: {self.folds})")
        t = np.array([known[n] for n in names.tolist()], np.float64)[inv.reshape(-1)]
        return predicts_same(scores, t) == (np.asarray(labels) == 1)


def _as_arrays(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(np.int64)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError("scores and labels must be 1-D arrays of the same length")
    if not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 (impostor) or 1 (genuine)")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN; apply the failure rule first "
                         "(facecast.evaluate.failures: -inf under nonmatch, left out under "
                         "drop)")
    return s, y


def _finite_mean(values: np.ndarray) -> float:
    """Mean of the finite values (NaN when there is none)."""
    v = values[np.isfinite(values)]
    return float(v.mean()) if v.size else float("nan")


def squared_distance(scores) -> np.ndarray:
    """insightface's distance of a cosine similarity: the squared L2 distance of two unit
    vectors, ``d = 2 - 2 s`` (float64)."""
    return 2.0 - 2.0 * np.asarray(scores, dtype=np.float64)


def predicts_same(scores, thresholds) -> np.ndarray:
    """The 10-fold accuracy's one decision rule: "same" iff ``d < t`` on the distance
    ``d`` of :func:`squared_distance` and a distance threshold ``t`` (insightface's
    ``calculate_accuracy``). :func:`kfold_accuracy` counts exactly these decisions;
    every per-pair use of its thresholds (:meth:`KFoldAccuracy.correct`) goes through
    here, never through the cosine ``1 - t / 2``."""
    return squared_distance(scores) < np.asarray(thresholds, dtype=np.float64)


def default_folds(n: int, n_folds: int = 10) -> np.ndarray:
    """Fold labels ``'0'..'n_folds-1'`` in contiguous blocks, like ``KFold(shuffle=False)``:
    the folds insightface's ``verification.py`` cuts a ``.bin`` protocol into (they become
    that protocol's own folds; :mod:`facecast.evaluate.folds` keeps them)."""
    idx = np.zeros(n, dtype=np.int64)
    bounds = np.full(n_folds, n // n_folds)
    bounds[: n % n_folds] += 1
    starts = np.concatenate([[0], np.cumsum(bounds)])
    for k in range(n_folds):
        idx[starts[k]:starts[k + 1]] = k
    return idx.astype(str)


def kfold_accuracy(scores, labels, folds, thresholds: str | np.ndarray = "insightface"
                   ) -> KFoldAccuracy:
    """10-fold best-threshold accuracy (CAST / insightface); see the module docstring.

    ``folds`` gives each pair's fold label; every fold is the test fold once. Promises the
    same per-fold accuracies as insightface's ``calculate_roc`` when the folds are its
    contiguous ``KFold`` blocks.
    """
    s, y = _as_arrays(scores, labels)
    folds = np.asarray(folds).astype(str)
    fold_names = sorted(np.unique(folds).tolist(), key=lambda f: (len(f), f))
    if len(fold_names) < 2:
        raise ValueError("k-fold accuracy needs at least two folds")
    dist = squared_distance(s)
    if isinstance(thresholds, str):
        if thresholds == "insightface":
            grid = INSIGHTFACE_THRESHOLDS
        elif thresholds == "exact":  # a pair without a feature (-inf) is never "same"
            u = np.unique(dist[np.isfinite(dist)])
            grid = np.concatenate([u, [u[-1] + 1.0]]) if u.size else np.array([0.0])
        else:
            raise ValueError(f"unknown threshold grid {thresholds!r} (insightface | exact)")
    else:
        grid = np.sort(np.asarray(thresholds, dtype=np.float64))
    k = len(fold_names)
    gen_below = np.zeros((k, len(grid)))
    imp_below = np.zeros((k, len(grid)))
    n_imp = np.zeros(k)
    n_all = np.zeros(k)
    for i, f in enumerate(fold_names):
        m = folds == f
        g = np.sort(dist[m & (y == 1)])
        im = np.sort(dist[m & (y == 0)])
        # predicts_same counted: #{d < t} per threshold
        gen_below[i] = np.searchsorted(g, grid, side="left")
        imp_below[i] = np.searchsorted(im, grid, side="left")
        n_imp[i] = len(im)
        n_all[i] = m.sum()
    correct = gen_below + (n_imp[:, None] - imp_below)          # [fold, threshold]
    tot_correct, tot_n = correct.sum(0), n_all.sum()
    accs, best_t = np.zeros(k), np.zeros(k)
    for i in range(k):
        train_acc = (tot_correct - correct[i]) / (tot_n - n_all[i])
        b = int(np.argmax(train_acc))
        best_t[i] = grid[b]
        accs[i] = correct[i, b] / n_all[i] if n_all[i] else float("nan")
    return KFoldAccuracy(fold_names, accs, best_t)


def roc_points(scores, labels) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(FAR, TAR, threshold) at every distinct score, starting at (0, 0, +inf).

    Predict "genuine" when ``score >= threshold``. Same points as
    ``sklearn.metrics.roc_curve(labels, scores, drop_intermediate=False)``.
    """
    s, y = _as_arrays(scores, labels)
    n_pos, n_neg = int(y.sum()), int(len(y) - y.sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("ROC needs genuine and impostor pairs")
    order = np.argsort(-s, kind="mergesort")
    s_sorted, y_sorted = s[order], y[order]
    # ties by equality, not by difference: -inf - -inf is NaN (pairs without a feature)
    last = np.r_[np.flatnonzero(s_sorted[1:] != s_sorted[:-1]), len(s_sorted) - 1]
    tps = np.cumsum(y_sorted)[last]
    fps = (last + 1) - tps
    far = np.r_[0.0, fps / n_neg]
    tar = np.r_[0.0, tps / n_pos]
    thr = np.r_[np.inf, s_sorted[last]]
    return far, tar, thr


def auc_score(scores, labels) -> float:
    """Area under the ROC curve (Mann-Whitney with average ranks for ties)."""
    s, y = _as_arrays(scores, labels)
    n_pos, n_neg = int(y.sum()), int(len(y) - y.sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUC needs genuine and impostor pairs")
    ranks = average_ranks(s)
    return float((ranks[y == 1].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def equal_error_rate(far: np.ndarray, tar: np.ndarray, thr: np.ndarray) -> tuple[float, float]:
    """(EER, threshold) where FAR = FRR = 1 - TAR, linearly interpolated between points."""
    frr = 1.0 - tar
    diff = frr - far                      # decreasing from 1 to -1 along the curve
    i = int(np.argmax(diff <= 0))
    if i == 0:
        return float(far[0]), float(thr[0])
    d0, d1 = diff[i - 1], diff[i]
    w = d0 / (d0 - d1) if d0 != d1 else 0.0
    eer = far[i - 1] + w * (far[i] - far[i - 1])
    t0 = thr[i - 1] if np.isfinite(thr[i - 1]) else thr[i]
    # the last point's threshold is -inf when pairs without a feature are kept
    # (evaluate.failed: nonmatch): w = 0 stays at t0, never 0 * inf = NaN
    return float(eer), float(t0 if w == 0 else t0 + w * (thr[i] - t0))


def allowed_impostors(impostors: int | np.ndarray, targets: float | Sequence[float]
                      ) -> np.ndarray:
    """How many of the highest-scoring impostors a target FAR (FMR) lets through, per
    target: the one rule behind every threshold at a target rate (TAR@FAR here, the
    thresholds of :func:`facecast.fairness.threshold.thresholds_at_fmr`, the bootstrap of
    ``compare``).

    ``impostors``: their number ``n`` (each weighs one: ``floor(target * n)``, capped at
    ``n``), or the running sum of their weights in descending score order (a resample's
    multiplicities): the largest ``k`` with ``cum[k - 1] <= target * total``. Both with a
    1e-9 tolerance on the product, so a target of exactly ``k / n`` allows ``k``.
    """
    t = np.atleast_1d(np.asarray(targets, dtype=np.float64))
    if np.ndim(impostors) == 0:
        n = int(impostors)
        return np.clip(np.floor(t * n + 1e-9), 0, n).astype(np.int64)
    cum = np.asarray(impostors, dtype=np.float64)
    total = cum[-1] if cum.size else 0.0
    return np.searchsorted(cum, t * total + 1e-9, side="right").astype(np.int64)


def min_impostors(far: float) -> int:
    """The fewest impostor pairs that can resolve a FAR (or FMR) of ``far``: ``1 / far``
    (one false accept is then a rate of at most ``far``)."""
    return int(np.ceil((1.0 - 1e-9) / float(far)))


def far_resolvable(n_impostor: int | np.ndarray, far: float | np.ndarray) -> bool | np.ndarray:
    """Whether ``n_impostor`` impostor pairs can resolve FAR (FMR) ``far``: at least
    :func:`min_impostors` of them (``n * far >= 1``). Below that, the only rate at or
    below the target is 0 and tables print ``n/a (N impostors)``. A NaN ``far`` (a fixed
    threshold, not a target rate) counts as resolvable. The one rule of every stage."""
    n = np.asarray(n_impostor, dtype=np.float64)
    t = np.asarray(far, dtype=np.float64)
    out = np.isnan(t) | (n * np.nan_to_num(t) >= 1.0 - 1e-9)
    return bool(out) if out.ndim == 0 else out


def tar_at_far(far: np.ndarray, tar: np.ndarray, thr: np.ndarray, target: float,
               n_impostors: int) -> dict[str, float | int | bool]:
    """Best TAR with FAR <= ``target``; also the FAR reached and the impostors behind it.

    ``resolvable`` is False when there are fewer than ``1 / target`` impostors: then the
    only FAR at or below the target is 0 and the figure says little; tables print it as
    ``n/a (N impostors)`` (:func:`facecast.evaluate.summary.summary_markdown`). The
    ``threshold`` accepts iff ``score >= threshold`` and reaches ``far_reached <= target``.
    """
    allowed = int(allowed_impostors(int(n_impostors), target)[0])
    ok = np.flatnonzero(np.rint(far * n_impostors) <= allowed)
    i = int(ok[-1])  # FAR is non-decreasing along the curve; TAR too
    return {
        "tar": float(tar[i]),
        "far_reached": float(far[i]),
        "threshold": float(thr[i]),
        "n_false_accepts": int(round(far[i] * n_impostors)),
        "n_impostors": int(n_impostors),
        "resolvable": bool(far_resolvable(n_impostors, target)),
    }


def det_points(far: np.ndarray, tar: np.ndarray, clip: float = 1e-6
               ) -> tuple[np.ndarray, np.ndarray]:
    """DET coordinates: probit (normal deviate) of FAR and FRR, clipped to (clip, 1-clip)."""
    from scipy.special import ndtri  # here: most jobs that import this module draw no DET

    frr = 1.0 - tar
    return (ndtri(np.clip(far, clip, 1 - clip)), ndtri(np.clip(frr, clip, 1 - clip)))


def verification_metrics(scores, labels, folds, *, fars=(1e-3, 1e-4),
                         thresholds: str | np.ndarray = "insightface"
                         ) -> dict[str, float | int | bool | str]:
    """All headline figures for one scored protocol as a flat dict (one table row).

    ``folds``: each pair's fold (from :func:`facecast.evaluate.folds.evaluation_folds`,
    the one fold rule). Fewer than two folds among the pairs: accuracy NaN.
    """
    s, y = _as_arrays(scores, labels)
    folds = np.asarray(folds).astype(str)
    if len(np.unique(folds)) >= 2:
        acc = kfold_accuracy(s, y, folds, thresholds)
    else:
        acc = KFoldAccuracy(sorted(set(folds.tolist())), np.full(0, np.nan), np.full(0, np.nan))
    far, tar, thr = roc_points(s, y)
    eer, eer_t = equal_error_rate(far, tar, thr)
    n_imp = int((y == 0).sum())
    out: dict[str, float | int | bool | str] = {
        "n_pairs": int(len(s)),
        "n_genuine": int(y.sum()),
        "n_impostor": n_imp,
        "n_folds": len(acc.folds),
        "accuracy": acc.mean,
        "accuracy_std": acc.std,
        "threshold_cosine_mean": (float(np.mean(acc.cosine_thresholds))
                                  if len(acc.thresholds) else float("nan")),
        "auc": auc_score(s, y),
        "eer": eer,
        "eer_threshold": eer_t,
        # over the scored pairs: a pair without a feature (-inf) has no score to average
        "genuine_mean": _finite_mean(s[y == 1]),
        "impostor_mean": _finite_mean(s[y == 0]),
    }
    for target in fars:
        t = tar_at_far(far, tar, thr, target, n_imp)
        key = f"{target:.0e}".replace("e-0", "e-")
        out[f"tar@far={key}"] = t["tar"]
        out[f"far_reached@far={key}"] = t["far_reached"]
        out[f"threshold@far={key}"] = t["threshold"]
        out[f"false_accepts@far={key}"] = t["n_false_accepts"]
        out[f"resolvable@far={key}"] = t["resolvable"]
    return out
