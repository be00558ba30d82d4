"""``attributes.parquet`` of a dataset whose images are not read (a BFW dataset scored by
its datatable's columns only): the manifest's columns and labels, no scorer column.

The table has the layout of :func:`facecast.attributes.merge.merge_attributes` (the base
columns, then the ``label_*`` columns: numeric labels as float64, others as text), one row
per manifest row in manifest order, each with the manifest's status and message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow.parquet as pq

from facecast.attributes import COLUMNS_KEY
from facecast.attributes.merge import BASE_COLUMNS, label_as_float
from facecast.datasets.manifest import read_shard_ids
from facecast.io.parquet_io import read_parquet, write_parquet


def write_manifest_attributes(manifest: str | os.PathLike, out_path: str | os.PathLike, *,
                              provenance: Mapping[str, Any] | None = None) -> Path:
    """Write the attribute table of ``manifest`` without any scorer (module docstring)."""
    labels = [c for c in pq.read_schema(manifest).names if c.startswith("label_")]
    m = read_parquet(manifest, columns=[*BASE_COLUMNS, *labels])
    out = pd.DataFrame({
        "image_id": m["image_id"].astype(str), "identity": m["identity"].astype(str),
        "split": m["split"].astype(str), "exclude": m["exclude"].fillna(False).astype(bool),
        "status": m["status"].astype(str), "message": m["message"].fillna("").astype(str)})
    for c in labels:
        values, kind = label_as_float(m[c])
        out[c] = values if kind == "float" else m[c].astype(object).where(m[c].notna(), None)
    meta = {COLUMNS_KEY: json.dumps({}), "facecast.shards": json.dumps(read_shard_ids(manifest)),
            "facecast.scorers": json.dumps([])}
    return write_parquet(out, out_path, metadata=meta,
                         provenance={**dict(provenance or {}), "stage": "attributes",
                                     "scorers": "none (the dataset's images are not read)"})
