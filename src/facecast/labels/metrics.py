"""Per-attribute baselines and scores, F1 first (Lingenfelter 2021, Tables 3.3-3.4 layout)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import average_precision_score

__all__ = ["METRIC_COLUMNS", "attribute_metrics", "best_f1_threshold", "macro_row"]

METRIC_COLUMNS = ["attribute", "source", "n", "prevalence", "f1", "precision", "recall",
                  "accuracy", "balanced_accuracy", "average_precision", "majority_accuracy",
                  "all_positive_f1", "threshold", "status"]


def _scores(y: np.ndarray, pred: np.ndarray) -> dict[str, float]:
    tp = float(np.sum(y & pred))
    fp = float(np.sum(~y & pred))
    fn = float(np.sum(y & ~pred))
    tn = float(np.sum(~y & ~pred))
    prec = tp / (tp + fp) if tp + fp else float("nan")
    rec = tp / (tp + fn) if tp + fn else float("nan")
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else float("nan")
    spec = tn / (tn + fp) if tn + fp else float("nan")
    return {"f1": f1, "precision": prec, "recall": rec,
            "accuracy": (tp + tn) / max(len(y), 1),
            "balanced_accuracy": float(np.nanmean([rec, spec])) if np.isfinite([rec, spec]).any()
            else float("nan")}


def attribute_metrics(attribute: str, labels: np.ndarray, probs: np.ndarray | None,
                      source: str, threshold: float = 0.5) -> dict[str, object]:
    """One metrics row: baselines always, model scores where ``probs`` are given.

    Majority-class accuracy = max(p, 1 - p); the F1 of predicting every image positive is
    2p / (1 + p) (p = prevalence). Rows without both classes say so in ``status``.
    """
    y_all = np.asarray(labels, dtype=float)
    ok = np.isfinite(y_all)
    if probs is not None:
        pr = np.asarray(probs, dtype=float)
        ok &= np.isfinite(pr)
    y = y_all[ok] >= 0.5
    n = int(y.size)
    row: dict[str, object] = {c: float("nan") for c in METRIC_COLUMNS}
    row.update(attribute=attribute, source=source, n=n, threshold=float(threshold))
    if n == 0:
        row["status"] = "n/a (no labelled images)"
        return row
    p = float(y.mean())
    row.update(prevalence=p, majority_accuracy=max(p, 1 - p), all_positive_f1=2 * p / (1 + p))
    if probs is None:
        row["status"] = "baseline only (no prediction)"
        return row
    s = pr[ok]
    row.update(_scores(y, s >= threshold))
    if 0 < y.sum() < n:
        row["average_precision"] = float(average_precision_score(y, s))
        row["status"] = "ok"
    else:
        row["status"] = "n/a (one class only)"
    return row


def best_f1_threshold(labels: np.ndarray, probs: np.ndarray) -> tuple[float, float]:
    """(threshold, F1) maximising F1 over the distinct scores (0.5, NaN if undefined)."""
    y = np.asarray(labels, dtype=float)
    s = np.asarray(probs, dtype=float)
    ok = np.isfinite(y) & np.isfinite(s)
    y, s = y[ok] >= 0.5, s[ok]
    if y.sum() == 0 or y.sum() == y.size:
        return 0.5, float("nan")
    order = np.argsort(-s, kind="stable")
    ys, ss = y[order], s[order]
    tp = np.cumsum(ys)
    fp = np.cumsum(~ys)
    last = np.r_[ss[1:] != ss[:-1], True]  # a threshold between distinct scores
    f1 = 2 * tp / (tp + fp + y.sum())
    f1 = np.where(last, f1, -1.0)
    i = int(np.argmax(f1))
    nxt = ss[i + 1] if i + 1 < ss.size else ss[i] - 1e-6
    return float((ss[i] + nxt) / 2.0), float(f1[i])


def macro_row(table: pd.DataFrame, source: str) -> dict[str, object]:
    """Macro average (unweighted mean over attributes with status ok) of one source."""
    good = table["status"].isin(["ok", "baseline only (no prediction)"])
    sub = table[(table["source"] == source) & good]
    row: dict[str, object] = {"attribute": "macro average", "source": source,
                              "n": int(sub["n"].sum()), "threshold": float("nan"),
                              "status": f"mean of {len(sub)} attributes" if len(sub) else
                              "n/a (no scored attribute)"}
    for c in METRIC_COLUMNS:
        if c not in row:
            row[c] = float(sub[c].mean()) if len(sub) else float("nan")
    return row
