"""Read embeddings back from the embed stage's shard files.

:func:`load_embeddings` reads only the rows it is asked for (``image_id``, ``embedding``;
rows with a null embedding are not ``ok`` and are left out). Every later stage that needs
embeddings (mining, evaluation, identification) reads them through here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
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


def load_embeddings(paths: Iterable[str | os.PathLike], image_ids: Iterable[str] | None = None,
                    *, raw: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(image_ids, embeddings float32 [n, D]) of the ok rows of ``paths`` (only ``image_ids``).

    Streams the shards one at a time; with ``image_ids`` the output is allocated once for
    at most that many rows, so peak memory is the wanted embeddings plus one shard.
    ``raw``: the model's features before L2 normalisation (``embedding * norm``, the
    embed stage keeps both), as insightface's IJB evaluation pools them.
    """
    wanted = None if image_ids is None else pa.array(sorted(set(image_ids)), pa.string())
    ids: list[np.ndarray] = []
    mats: list[np.ndarray] = []
    out: np.ndarray | None = None
    n = 0
    for p in paths:
        t = pq.read_table(p, columns=["image_id", "embedding"] + (["norm"] if raw else []))
        keep = pc.is_valid(t.column("embedding"))
        if wanted is not None:
            keep = pc.and_(keep, pc.is_in(t.column("image_id"), value_set=wanted))
        t = t.filter(keep)
        if not t.num_rows:
            continue
        ids.append(t.column("image_id").to_numpy(zero_copy_only=False).astype(str))
        mat = _embedding_matrix(t.column("embedding"))
        if raw:
            mat = mat * t.column("norm").to_numpy().astype(np.float32)[:, None]
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
