"""Embeddings in, cosine scores out.

:func:`facecast.embed.read.load_embeddings` reads the embeddings;
:func:`score_pairs` adds ``score`` (cosine similarity; equals ``1 - d/2`` for the squared L2
distance ``d`` of the L2-normalised embeddings) to a protocol and gives pairs whose
embeddings are missing the status ``no_embedding`` with a message naming the image.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def cosine_rows(a: np.ndarray, b: np.ndarray, chunk: int = 65_536) -> np.ndarray:
    """Row-wise cosine similarity of two equally long embedding matrices."""
    out = np.empty(len(a), np.float64)
    for s in range(0, len(a), chunk):
        x, y = a[s:s + chunk].astype(np.float64), b[s:s + chunk].astype(np.float64)
        den = np.linalg.norm(x, axis=1) * np.linalg.norm(y, axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            out[s:s + chunk] = np.einsum("ij,ij->i", x, y) / den
    return out


def score_pairs(pairs: pd.DataFrame, ids: np.ndarray, emb: np.ndarray) -> pd.DataFrame:
    """``pairs`` + ``score``; pairs without both embeddings get ``no_embedding`` (score NaN)."""
    out = pairs.copy()
    index = pd.Index(ids)
    ia = index.get_indexer(out["image_a"].astype(str))
    ib = index.get_indexer(out["image_b"].astype(str))
    have = (ia >= 0) & (ib >= 0)
    score = np.full(len(out), np.nan)
    if have.any():
        score[have] = cosine_rows(emb[ia[have]], emb[ib[have]])
    status = out["status"].astype(str).to_numpy().copy() if "status" in out else \
        np.full(len(out), "ok", dtype=object)
    message = out["message"].astype(str).to_numpy().copy() if "message" in out else \
        np.full(len(out), "", dtype=object)
    lost = (status == "ok") & ~have
    for k in np.flatnonzero(lost):
        who = [s for s, i in (("image_a", ia[k]), ("image_b", ib[k])) if i < 0]
        status[k] = "no_embedding"
        message[k] = "no embedding for " + " and ".join(
            f"{w} {out[w].iloc[k]}" for w in who)
    score[status != "ok"] = np.nan
    out["status"], out["message"], out["score"] = status.astype(str), message.astype(str), score
    return out
