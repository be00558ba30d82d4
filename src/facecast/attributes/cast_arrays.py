"""``attributes.parquet`` of a ``cast_arrays`` dataset: CAST's precomputed attributes as
they are, nothing recomputed (rule ``cast_attributes``).

Streamed shard by shard: the manifest's key columns of one shard plus the same rows of the
mapped attribute array (by the manifest's ``row``), one row group per shard. Columns are
named by ``columns.csv``; values are written as float64 like every attribute column (a NaN
cell stays NaN and its row has status ``nan_attribute``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa
from tqdm import tqdm

from facecast.config.columns import BASE_COLUMNS
from facecast.datasets.cast_arrays import open_cast_arrays
from facecast.datasets.manifest import DatasetError, read_shard, read_shard_ids
from facecast.io.parquet_io import ParquetStreamWriter

log = logging.getLogger("facecast.attributes")


def write_cast_attributes(spec: Mapping[str, Any], manifest_path: str | os.PathLike,
                          out_path: str | os.PathLike, *,
                          provenance: Mapping[str, Any] | None = None) -> int:
    """Write ``attributes.parquet`` from the arrays of dataset block ``spec``; return rows.

    Row order and count are the manifest's; ``status`` is the manifest's row status.
    """
    arrays = open_cast_arrays(spec)
    clash = [c for c in arrays.columns if c in BASE_COLUMNS]
    if clash:
        raise DatasetError(f"columns file {spec['columns']} names {clash}, which are "
                           "attribute-table key columns; rename them")
    schema = pa.schema([("image_id", pa.string()), ("identity", pa.string()),
                        ("split", pa.string()), ("exclude", pa.bool_()),
                        ("status", pa.string()), ("message", pa.string())]
                       + [(c, pa.float64()) for c in arrays.columns])
    prov = dict(provenance or {})
    prov.update({"stage": "attributes", "source": "cast_arrays", "columns": arrays.columns})
    n = 0
    with ParquetStreamWriter(out_path, schema, provenance=prov) as writer:
        for shard in tqdm(read_shard_ids(manifest_path), desc="attributes shards",
                          mininterval=10):
            m = read_shard(manifest_path, shard, columns=[*BASE_COLUMNS, "row"])
            rows = m["row"].to_numpy(np.int64)
            lo, hi = (int(rows[0]), int(rows[-1]) + 1) if len(rows) else (0, 0)
            block = np.asarray(arrays.attributes[lo:hi], dtype=np.float64)[rows - lo]
            table = {c: m[c].to_numpy() for c in BASE_COLUMNS}
            table.update({c: block[:, j] for j, c in enumerate(arrays.columns)})
            writer.write(pa.table(table))
            n += len(m)
    log.info("attributes.parquet from %s: %d rows x %d columns", spec["attributes"], n,
             len(arrays.columns))
    return n
