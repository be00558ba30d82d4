"""The rater-free evaluation of face descriptions (stage ``describe``): do the captions
carry identity? :func:`caption_verification` (same vs different identity from two captions)
and :func:`retrieval` (caption-to-image retrieval in a gallery of distinct identities).
:func:`facecast.labels.describe.run_describe` reports both for every variant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

__all__ = ["caption_verification", "retrieval"]


def caption_verification(captions: pd.Series, identity: pd.Series, seed: int,
                         n_pairs: int = 2000) -> dict[str, float]:
    """AUC of same-identity vs different-identity caption pairs (identity-disjoint halves).

    TF-IDF (word 1-2 grams) fitted on the training half; pair features = elementwise
    product and absolute difference of the two vectors (symmetric); logistic regression.
    """
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(seed)
    ids = np.asarray(sorted(identity.astype(str).unique()))
    rng.shuffle(ids)
    half = set(ids[: ids.size // 2].tolist())
    caps = captions.to_numpy(dtype=object)
    idv = identity.astype(str).to_numpy()
    res: dict[str, float] = {}
    parts = {}
    for name, sel in (("train", np.isin(idv, list(half))), ("test", ~np.isin(idv, list(half)))):
        rows = np.flatnonzero(sel)
        by_id = pd.Series(rows).groupby(idv[rows]).apply(list)
        multi = [v for v in by_id if len(v) >= 2]
        if not multi or len(by_id) < 2:
            return {"auc": float("nan"), "status": f"n/a ({name} half lacks pairs)"}
        gen = []
        for _ in range(n_pairs // 2):
            v = multi[rng.integers(len(multi))]
            a, b = rng.choice(v, 2, replace=False)
            gen.append((a, b, 1))
        imp = []
        while len(imp) < n_pairs // 2:
            a, b = rng.choice(rows, 2, replace=False)
            if idv[a] != idv[b]:
                imp.append((a, b, 0))
        parts[name] = np.array(gen + imp)
    vec = TfidfVectorizer(ngram_range=(1, 2), token_pattern=r"[A-Za-z]+")
    vec.fit(caps[np.isin(idv, list(half))])
    x = vec.transform(caps)

    def pair_x(p: np.ndarray):
        a, b = x[p[:, 0]], x[p[:, 1]]
        return sparse.hstack([a.multiply(b), abs(a - b)]).tocsr()

    tr, te = parts["train"], parts["test"]
    if len(np.unique(tr[:, 2])) < 2:
        return {"auc": float("nan"), "status": "n/a (one class)"}
    clf = LogisticRegression(max_iter=1000).fit(pair_x(tr), tr[:, 2])
    score = clf.predict_proba(pair_x(te))[:, 1]
    res["auc"] = float(roc_auc_score(te[:, 2], score)) if np.ptp(score) > 0 else 0.5
    res["status"] = "ok" if np.ptp(score) > 0 else "ok (captions carry no information: 0.5)"
    res["n_test_pairs"] = int(len(te))
    return res


def retrieval(facts: Sequence[dict[str, Any]], image_probs: pd.DataFrame,
              image_features: Sequence[set[str]], identity: np.ndarray, gender_attr: str,
              gallery_size: int, seed: int) -> dict[str, Any]:
    """Caption-to-image retrieval: rank a gallery of images of distinct identities.

    Query = the facts of image a's description; gallery = another image b of a's identity
    plus ``gallery_size - 1`` images of other identities; each gallery image is scored by
    the log-likelihood of the query facts under its own probabilities (clipped to
    [0.05, 0.95]) and prominent features (0 if the image has the feature, log 0.2 if not).
    """
    rng = np.random.default_rng(seed)
    names, code = np.unique(np.asarray(identity).astype(str), return_inverse=True)
    order = np.argsort(code, kind="stable")  # images grouped by identity
    counts = np.bincount(code, minlength=names.size)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    n_ids = names.size
    size = min(int(gallery_size), n_ids)
    status = "ok" if size == gallery_size else f"gallery {size} (< {gallery_size} identities)"
    if size < 2:
        return {"top1": float("nan"), "top10": float("nan"), "gallery": size,
                "status": "n/a (fewer than 2 identities)"}
    p = np.clip(image_probs.to_numpy(dtype=float), 0.05, 0.95)
    cols = {c: j for j, c in enumerate(image_probs.columns)}
    hits1 = hits10 = total = 0
    vocab = {w: j for j, w in enumerate(sorted({w for s in image_features for w in s}))}
    has_feat = np.zeros((len(identity), max(len(vocab), 1)), dtype=bool)
    for i, s in enumerate(image_features):
        for w in s:
            has_feat[i, vocab[w]] = True
    for q in range(len(identity)):
        c = code[q]
        mates = order[starts[c]:starts[c] + counts[c]]
        mates = mates[mates != q]
        if not mates.size:
            continue
        target = mates[rng.integers(mates.size)]
        others = np.delete(np.arange(n_ids), c)
        pick = others[rng.choice(others.size, size - 1, replace=False)]
        members = order[starts[pick] + rng.integers(0, counts[pick])]
        gallery = np.r_[target, members]
        g = np.asarray(gallery)
        score = np.zeros(g.size)
        f = facts[q]
        for a in f["present"]:
            if a in cols:
                score += np.log(np.nan_to_num(p[g, cols[a]], nan=0.5))
        if f["gender"] is not None and gender_attr in cols:
            pm = np.nan_to_num(p[g, cols[gender_attr]], nan=0.5)
            score += np.log(pm if f["gender"] == "man" else 1 - pm)
        for feat in f["features"]:
            if feat in vocab:
                score += np.where(has_feat[g, vocab[feat]], 0.0, np.log(0.2))
            else:
                score += np.log(0.2)
        score += rng.random(g.size) * 1e-9  # ties broken at random, not by position
        rank = int(np.sum(score > score[0]))
        hits1 += rank < 1
        hits10 += rank < 10
        total += 1
    if total == 0:
        return {"top1": float("nan"), "top10": float("nan"), "gallery": size,
                "status": "n/a (no identity with 2 images)"}
    return {"top1": hits1 / total, "top10": hits10 / total, "gallery": size,
            "chance_top1": 1 / size, "chance_top10": min(10, size) / size,
            "n_queries": total, "status": status}
