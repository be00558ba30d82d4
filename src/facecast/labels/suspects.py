"""Suspect labels: out-of-fold confident learning + identity majority + contradiction rules.

For every (image, attribute) label the score adds three evidences:

- ``model``: 1 - cleanlab's self-confidence of the label under out-of-fold predicted
  probabilities (:func:`oof_probabilities`: one logistic regression per attribute on
  embeddings and/or scorer columns, identity-disjoint folds, so an identity never helps
  predict itself). Multilabel ranking: ``cleanlab.multilabel_classification.rank``.
- ``identity``: for identity-invariant attributes, the share of the other images of the
  identity that disagree with this label, weighted by the attribute's Fleiss kappa
  (clipped at 0): the more consistent an attribute is across an identity, the more a
  disagreement means.
- ``rule``: 1 if the label takes part in a violated hard contradiction rule (0.5 soft).

``score = w_model * model + w_identity * identity + w_rule * rule``; rank 1 = most suspect.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from cleanlab.multilabel_classification.rank import get_label_quality_scores_per_class
from cleanlab.rank import get_label_quality_scores
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold
from sklearn.preprocessing import StandardScaler

from facecast.labels.agreement import leave_one_out_disagreement
from facecast.labels.rules import rule_attributes

__all__ = ["identity_suspects", "label_quality", "oof_probabilities", "rank_suspects"]

log = logging.getLogger(__name__)


def oof_probabilities(features: np.ndarray, labels: pd.DataFrame, identity: np.ndarray, *,
                      folds: int = 3, c: float = 1.0, seed: int = 0) -> pd.DataFrame:
    """Out-of-fold P(attribute) per image from a logistic regression on ``features``.

    ``features``: (N, D) floats, a row with a NaN = no prediction (NaN out). Folds split
    identities (GroupKFold on a seeded shuffle of identity names). A fold whose training
    part has one class only predicts that class's share. Returns a frame like ``labels``.
    """
    x = np.asarray(features, dtype=float)
    has_x = np.isfinite(x).all(axis=1)
    ids = np.asarray(identity).astype(str)
    uniq = np.unique(ids)
    perm = np.random.default_rng(seed).permutation(uniq.size)
    code = dict(zip(uniq, perm, strict=True))
    groups = np.array([code[i] for i in ids])
    out = pd.DataFrame(np.nan, index=labels.index, columns=labels.columns)
    n_splits = min(int(folds), uniq.size)
    for attr in labels.columns:
        y = labels[attr].to_numpy(dtype=float)
        ok = has_x & np.isfinite(y)
        if ok.sum() < 4 or n_splits < 2:
            continue
        xi, yi, gi = x[ok], (y[ok] >= 0.5).astype(int), groups[ok]
        pred = np.full(yi.size, np.nan)
        for tr, te in GroupKFold(n_splits=n_splits).split(xi, yi, gi):
            if yi[tr].min() == yi[tr].max():
                pred[te] = float(yi[tr].mean())
                continue
            scaler = StandardScaler().fit(xi[tr])
            model = LogisticRegression(C=c, max_iter=500)
            model.fit(scaler.transform(xi[tr]), yi[tr])
            pred[te] = model.predict_proba(scaler.transform(xi[te]))[:, 1]
        col = np.full(len(labels), np.nan)
        col[ok] = pred
        out[attr] = col
    return out


def label_quality(labels: pd.DataFrame, probs: pd.DataFrame) -> pd.DataFrame:
    """cleanlab self-confidence of each given label (NaN where label or prob is missing).

    Rows with every attribute labelled and predicted go through cleanlab's multilabel
    per-class ranking at once; the remaining rows attribute by attribute (binary ranking).
    """
    y = labels.to_numpy(dtype=float)
    p = np.clip(probs.to_numpy(dtype=float), 1e-6, 1 - 1e-6)
    q = np.full(y.shape, np.nan)
    full = np.isfinite(y).all(axis=1) & np.isfinite(p).all(axis=1)
    if full.sum() and y.shape[1] >= 2:
        yb = y[full] >= 0.5
        lists = [list(np.flatnonzero(r)) for r in yb]
        q[full] = np.asarray(get_label_quality_scores_per_class(lists, p[full]))
    rest = ~full if y.shape[1] >= 2 else np.ones(len(y), bool)
    for j in range(y.shape[1]):
        ok = rest & np.isfinite(y[:, j]) & np.isfinite(p[:, j])
        if ok.sum():
            pp = np.stack([1 - p[ok, j], p[ok, j]], axis=1)
            q[ok, j] = get_label_quality_scores((y[ok, j] >= 0.5).astype(int), pp)
    return pd.DataFrame(q, index=labels.index, columns=labels.columns)


def rank_suspects(image_ids: Sequence[str], identity: Sequence[str], labels: pd.DataFrame,
                  probs: pd.DataFrame | None, kappas: Mapping[str, float],
                  invariant: Sequence[str], rule_flags: pd.DataFrame,
                  rules: Mapping[str, Mapping[str, Any]],
                  weights: Mapping[str, float] | None = None) -> pd.DataFrame:
    """One row per labelled (image, attribute): image_id, identity, attribute, label,
    score, model, identity_disagreement, rule, reasons, rank (1 = most suspect)."""
    w = {"model": 1.0, "identity": 1.0, "rule": 1.0} | dict(weights or {})
    n, attrs = len(labels), list(labels.columns)
    quality = label_quality(labels, probs) if probs is not None else None
    ident = np.asarray(identity).astype(str)
    rule_by_attr: dict[str, list[str]] = {a: [] for a in attrs}
    for name, r in rules.items():
        if name in rule_flags.columns:
            for a in rule_attributes(r):
                if a in rule_by_attr:
                    rule_by_attr[a].append(name)
    frames = []
    for a in attrs:
        y = labels[a].to_numpy(dtype=float)
        m = (1.0 - quality[a].to_numpy()) if quality is not None else np.full(n, np.nan)
        if a in invariant:
            share, others = leave_one_out_disagreement(y, ident)
            k = max(float(kappas.get(a, np.nan)), 0.0) if np.isfinite(kappas.get(a, np.nan)) \
                else 0.0
            idd = k * share
        else:
            share, others, idd = np.full(n, np.nan), np.zeros(n, int), np.full(n, np.nan)
        r = np.zeros(n)
        names = np.full(n, "", dtype=object)
        for rn in rule_by_attr[a]:
            v = rule_flags[rn].to_numpy(dtype=bool)
            r = np.maximum(r, np.where(v, 0.5 if rules[rn].get("soft") else 1.0, 0.0))
            names = np.where(v, names + np.where(names == "", "", ",") + rn, names)
        score = (w["model"] * np.nan_to_num(m) + w["identity"] * np.nan_to_num(idd)
                 + w["rule"] * r)
        reasons = []
        for i in range(n):
            parts = []
            if np.isfinite(m[i]) and m[i] >= 0.5:
                parts.append(f"model disagrees ({m[i]:.2f})")
            if np.isfinite(share[i]) and share[i] > 0.5:
                parts.append(f"identity majority disagrees ({share[i]:.2f} of {others[i]})")
            if names[i]:
                parts.append(f"rule {names[i]}")
            reasons.append("; ".join(parts))
        frames.append(pd.DataFrame({
            "image_id": np.asarray(image_ids).astype(str), "identity": ident, "attribute": a,
            "label": y, "score": score, "model": m, "identity_disagreement": share,
            "rule": r, "reasons": reasons}))
    out = pd.concat(frames, ignore_index=True)
    out = out[np.isfinite(out["label"].to_numpy(dtype=float))]
    out = out.sort_values(["score", "image_id", "attribute"], ascending=[False, True, True],
                          kind="stable").reset_index(drop=True)
    out["rank"] = np.arange(1, len(out) + 1)
    return out


def identity_suspects(identity: Sequence[str], labels: pd.DataFrame, probs: pd.DataFrame,
                      invariant: Sequence[str]) -> pd.DataFrame:
    """Identities whose (invariant-attribute) label majority the model contradicts.

    One row per (identity, attribute): n_images, share_positive (labels), model_mean
    (mean out-of-fold probability), disagree (majority label on the other side of 0.5 from
    model_mean), score = |share_positive - model_mean|, rank within the attribute.
    """
    rows = []
    ident = pd.Series(np.asarray(identity).astype(str), index=labels.index)
    for a in invariant:
        if a not in labels.columns or a not in probs.columns:
            continue
        df = pd.DataFrame({"identity": ident, "y": labels[a] >= 0.5,
                           "p": probs[a]}).dropna()
        agg = df.groupby("identity").agg(n_images=("y", "size"), share_positive=("y", "mean"),
                                         model_mean=("p", "mean")).reset_index()
        agg["attribute"] = a
        agg["disagree"] = (agg["share_positive"] >= 0.5) != (agg["model_mean"] >= 0.5)
        agg["score"] = (agg["share_positive"] - agg["model_mean"]).abs()
        agg = agg.sort_values(["score", "identity"], ascending=[False, True])
        agg["rank"] = np.arange(1, len(agg) + 1)
        rows.append(agg)
    cols = ["attribute", "identity", "n_images", "share_positive", "model_mean", "disagree",
            "score", "rank"]
    return pd.concat(rows, ignore_index=True)[cols] if rows else pd.DataFrame(columns=cols)
