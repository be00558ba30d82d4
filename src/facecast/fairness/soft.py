"""CAST's probabilistic inter-category accuracy (Robbins et al., WACV 2023).

With soft attribute probabilities (e.g. FairFace race softmax outputs) a pair belongs to
category l with probability P_pair(l), and

    accuracy(l) = sum_pairs P_pair(l) * correct / sum_pairs P_pair(l)

where ``correct`` is whether the pair's decision at the global threshold
(accept = score >= threshold) matches its label. P_pair(l) is the product of the two
images' probabilities (``pair_prob: product``, default: the chance both images are in l,
treating the two estimates as independent) or their mean (``pair_prob: mean``: the
expected share of the pair's images in l). Beside it, the usual hard subsets: pairs whose
two images both have l as their argmax category.

A category is a column name, or ``1-<column>`` for the complement of a probability
(``female: 1-age_gender_male``). Probabilities are clipped to [0, 1] and not renormalised;
an image with a missing probability gives its pairs P = 0 for that category set (they
count in no category) and no argmax.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd


def category_probs(attributes: pd.DataFrame, categories: Mapping[str, str]) -> pd.DataFrame:
    """Per-image probability of each category, indexed by ``image_id``."""
    out = pd.DataFrame(index=pd.Index(attributes["image_id"].astype(str), name="image_id"))
    for name, expr in categories.items():
        expr = str(expr).replace(" ", "")
        complement = expr.startswith("1-")
        col = expr[2:] if complement else expr
        if col not in attributes.columns:
            raise KeyError(f"soft category {name!r}: attribute table lacks column {col!r}")
        v = pd.to_numeric(attributes[col], errors="coerce").to_numpy(np.float64,
                                                                     na_value=np.nan)
        v = np.clip(v, 0.0, 1.0)
        out[str(name)] = 1.0 - v if complement else v
    return out


def soft_accuracy(pairs: pd.DataFrame, probs: pd.DataFrame, thresholds: Sequence[float],
                  threshold_names: Sequence[str], *, attribute: str,
                  pair_prob: str = "product") -> pd.DataFrame:
    """Probabilistic and hard-subset accuracy per category and threshold.

    ``pairs`` needs ``image_a``, ``image_b``, ``label``, ``score`` (valid rows only).
    Columns: ``attribute``, ``category``, ``threshold_name``, ``threshold``,
    ``prob_accuracy``, ``prob_mass`` (sum of P_pair(l)), ``hard_accuracy``, ``hard_n``.
    """
    if pair_prob not in ("product", "mean"):
        raise ValueError(f"pair_prob must be 'product' or 'mean', got {pair_prob!r}")
    cats = list(probs.columns)
    pa_ = probs.reindex(pairs["image_a"].astype(str).to_numpy()).to_numpy(np.float64)
    pb_ = probs.reindex(pairs["image_b"].astype(str).to_numpy()).to_numpy(np.float64)
    complete_a = np.isfinite(pa_).all(axis=1)
    complete_b = np.isfinite(pb_).all(axis=1)
    pa0 = np.nan_to_num(pa_)
    pb0 = np.nan_to_num(pb_)
    p = pa0 * pb0 if pair_prob == "product" else (pa0 + pb0) / 2
    p[~(complete_a & complete_b)] = 0.0
    hard_a = np.where(complete_a, np.argmax(pa0, axis=1), -1)
    hard_b = np.where(complete_b, np.argmax(pb0, axis=1), -2)
    hard = np.where(hard_a == hard_b, hard_a, -1)
    scores = pairs["score"].to_numpy(np.float64)
    labels = pairs["label"].to_numpy().astype(bool)
    rows = []
    for tname, t in zip(threshold_names, thresholds, strict=True):
        correct = ((scores >= t) == labels).astype(np.float64)
        mass = p.sum(axis=0)
        with np.errstate(invalid="ignore", divide="ignore"):
            acc = (p * correct[:, None]).sum(axis=0) / mass
        for k, cat in enumerate(cats):
            m = hard == k
            rows.append({"attribute": attribute, "category": cat, "threshold_name": tname,
                         "threshold": float(t),
                         "prob_accuracy": float(acc[k]) if mass[k] > 0 else np.nan,
                         "prob_mass": float(mass[k]),
                         "hard_accuracy": float(correct[m].mean()) if m.any() else np.nan,
                         "hard_n": int(m.sum())})
    return pd.DataFrame(rows)
