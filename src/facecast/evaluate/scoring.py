"""Embeddings in, cosine scores out.

:func:`load_embeddings` reads only the rows it is asked for from an embedder's shard files
(``image_id``, ``embedding``; rows with a null embedding are not ``ok`` and are left out).
:func:`score_pairs` adds ``score`` (cosine similarity; equals ``1 - d/2`` for the squared L2
distance ``d`` of the L2-normalised embeddings) to a protocol and gives pairs whose
embeddings are missing the status ``no_embedding`` with a message naming the image.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def _embedding_matrix(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if len(arr) == 0:
        return np.zeros((0, 0), np.float32)
    if pa.types.is_fixed_size_list(arr.type):
        dim = arr.type.list_size
    else:
        dim = len(arr[0].as_py())
    values = np.asarray(arr.flatten(), dtype=np.float32)
    return values.reshape(len(arr), dim)


def load_embeddings(paths: Iterable[str | os.PathLike], image_ids: Iterable[str] | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(image_ids, embeddings float32 [n, D]) of the ok rows of ``paths`` (only ``image_ids``).

    Streams the shards one at a time; with ``image_ids`` the output is allocated once for
    at most that many rows, so peak memory is the wanted embeddings plus one shard.
    """
    wanted = None if image_ids is None else pa.array(sorted(set(image_ids)), pa.string())
    ids: list[np.ndarray] = []
    mats: list[np.ndarray] = []
    out: np.ndarray | None = None
    n = 0
    for p in paths:
        t = pq.read_table(p, columns=["image_id", "embedding"])
        keep = pc.is_valid(t.column("embedding"))
        if wanted is not None:
            keep = pc.and_(keep, pc.is_in(t.column("image_id"), value_set=wanted))
        t = t.filter(keep)
        if not t.num_rows:
            continue
        ids.append(t.column("image_id").to_numpy(zero_copy_only=False).astype(str))
        mat = _embedding_matrix(t.column("embedding"))
        if wanted is None:
            mats.append(mat)
            continue
        if out is None:
            out = np.empty((len(wanted), mat.shape[1]), np.float32)
        out[n:n + len(mat)] = mat
        n += len(mat)
    if not ids:
        return np.zeros(0, dtype=str), np.zeros((0, 0), np.float32)
    return np.concatenate(ids), (out[:n] if out is not None else np.concatenate(mats))


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
