"""Merge the manifest, faces status and every scorer's shards into ``attributes.parquet``.

Streamed: one shard at a time is read and written as one row group, so the merge never
holds more than a shard in memory. Row order and row count are the manifest's.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from tqdm import tqdm

from facecast.attributes import COLUMNS_KEY
from facecast.datasets.manifest import read_shard, read_shard_ids
from facecast.io.parquet_io import ParquetStreamWriter, read_metadata

log = logging.getLogger("facecast.attributes")

BASE_COLUMNS = ["image_id", "identity", "split", "exclude", "status", "message"]


def _label_columns(manifest: str | os.PathLike) -> list[str]:
    return [c for c in pq.read_schema(manifest).names if c.startswith("label_")]


def label_as_float(values: pd.Series) -> tuple[np.ndarray | None, str]:
    """A label column as float64 (bools -> 0/1) or None when it is not numeric."""
    if pd.api.types.is_bool_dtype(values):
        return values.astype(float).to_numpy(np.float64), "float"
    num = pd.to_numeric(values, errors="coerce")
    if values.notna().sum() and num.notna().sum() == 0:
        return None, "string"
    return num.to_numpy(np.float64, na_value=np.nan), "float"


def _attribute_schema(scorer_files: Mapping[str, Sequence[str]]) -> tuple[list[str], dict, list]:
    """Attribute columns (in scorer order), their descriptions, and which scorer owns each."""
    columns, desc, owner = [], {}, {}
    for scorer, files in scorer_files.items():
        if not files:
            continue
        names = [c for c in pq.read_schema(files[0]).names
                 if c not in ("image_id", "status", "message")]
        d = json.loads(read_metadata(files[0]).get(COLUMNS_KEY, "{}"))
        for c in names:
            if c in owner or c in BASE_COLUMNS or c.startswith("label_"):
                other = owner.get(c, "the manifest")
                raise ValueError(f"attribute column {c!r} of scorer {scorer} clashes with "
                                 f"{other}; column names must be unique")
            owner[c] = scorer
            columns.append(c)
            desc[c] = f"[{scorer}] {d.get(c, '')}".strip()
    return columns, desc, list(owner.items())


def merge_attributes(manifest: str | os.PathLike, faces_files: Sequence[str],
                     scorer_files: Mapping[str, Sequence[str]], out_path: str | os.PathLike,
                     *, provenance: Mapping[str, Any] | None = None) -> Path:
    """Write the merged wide table (see docs/CONTRACTS.md); returns its path.

    ``faces_files`` and each ``scorer_files[scorer]`` list one file per manifest shard, in
    ``read_shard_ids(manifest)`` order. Rows missing from a scorer shard get NaN.
    """
    shard_ids = read_shard_ids(manifest)
    for name, files in [("faces", faces_files), *scorer_files.items()]:
        if len(files) != len(shard_ids):
            raise ValueError(f"{name}: {len(files)} shard files for {len(shard_ids)} shards")
    labels = _label_columns(manifest)
    attr_cols, desc, _ = _attribute_schema(scorer_files)
    # label types from the first shard that has rows
    first = read_shard(manifest, shard_ids[0], columns=labels) if shard_ids else pd.DataFrame()
    label_types = {c: label_as_float(first[c])[1] if c in first else "float" for c in labels}
    fields = [pa.field("image_id", pa.string()), pa.field("identity", pa.string()),
              pa.field("split", pa.string()), pa.field("exclude", pa.bool_()),
              pa.field("status", pa.string()), pa.field("message", pa.string())]
    fields += [pa.field(c, pa.float64()) for c in attr_cols]
    fields += [pa.field(c, pa.float64() if label_types[c] == "float" else pa.string())
               for c in labels]
    meta = {COLUMNS_KEY: json.dumps(desc), "facecast.shards": json.dumps(shard_ids),
            "facecast.scorers": json.dumps(list(scorer_files))}
    n_total = 0
    with ParquetStreamWriter(out_path, pa.schema(fields), provenance=provenance,
                             metadata=meta) as writer:
        for k, shard in enumerate(tqdm(shard_ids, desc="merge attributes", mininterval=5)):
            m = read_shard(manifest, shard,
                           columns=["image_id", "identity", "split", "exclude", "status",
                                    "message", *labels])
            ids = pd.Index(m["image_id"].astype(str))
            f = pq.read_table(faces_files[k], columns=["image_id", "status", "message"]
                              ).to_pandas().drop_duplicates("image_id").set_index("image_id")
            f = f.reindex(ids)
            status = f["status"].astype(object).where(f["status"].notna(),
                                                      m["status"].to_numpy()).astype(str)
            messages = [f["message"].fillna("").astype(str).to_numpy()]
            out = pd.DataFrame({"image_id": ids.to_numpy(dtype=object),
                                "identity": m["identity"].astype(str).to_numpy(),
                                "split": m["split"].astype(str).to_numpy(),
                                "exclude": m["exclude"].fillna(False).astype(bool).to_numpy(),
                                "status": status.to_numpy()})
            for scorer, files in scorer_files.items():
                t = pq.read_table(files[k]).to_pandas().drop_duplicates("image_id")
                t = t.set_index(t["image_id"].astype(str)).reindex(ids)
                msg = t["message"].fillna("").astype(str)
                bad = t["status"].notna() & ~t["status"].isin(["ok"]) & (msg != "")
                scorer_msg = np.where(bad & (t["status"] == "crop_error"),
                                      scorer + ": " + msg, "")
                messages.append(scorer_msg)
                for c in attr_cols:
                    if c in t:
                        out[c] = pd.to_numeric(t[c], errors="coerce").to_numpy(np.float64)
            for c in attr_cols:
                if c not in out:
                    out[c] = np.nan
            for c in labels:
                if label_types[c] == "float":
                    vals, _ = label_as_float(m[c])
                    out[c] = vals if vals is not None else np.nan
                else:
                    out[c] = [None if pd.isna(v) else str(v) for v in m[c].tolist()]
            joined = ["; ".join(p for p in parts if p) for parts in zip(*messages, strict=True)]
            out.insert(5, "message", joined)
            writer.write(out)
            n_total += len(out)
    log.info("merged %d rows x %d attribute columns from %s", n_total, len(attr_cols),
             list(scorer_files))
    return Path(out_path)
