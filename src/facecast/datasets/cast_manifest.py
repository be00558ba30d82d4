"""The manifest of a ``cast_arrays`` dataset, written straight from the mapped arrays.

One pass over the arrays in blocks (:func:`facecast.datasets.cast_arrays.row_statuses`),
then one Parquet row group per shard, so 42M rows never sit in memory as Python objects.
Columns are the manifest's usual ones plus ``row`` (the row of the arrays, int64), which
lets later stages read an image's attributes by position. ``image_id`` is the path for
``ok`` rows; ids of other rows contain ``//`` and can never equal a path
(``<path>//dup<k>`` for a repeated path, ``<path>//row<n>`` / ``(no path)//row<n>``
for the others, ``n`` 1-based).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from tqdm import tqdm

from facecast.datasets.cast_arrays import (
    DUPLICATE,
    NAN_STATUS,
    OK,
    STATUSES,
    CastArrays,
    open_cast_arrays,
    row_statuses,
)
from facecast.datasets.cast_paths import identities
from facecast.datasets.manifest import ID_SEP, resolve_shard_size, shard_name
from facecast.io.parquet_io import ParquetStreamWriter
from facecast.io.paths import portable_path

log = logging.getLogger("facecast.datasets")

#: the status a ``nan_attribute`` row gets in the pool manifest (its image is processed)
OK_STATUS = STATUSES[OK]
#: what a ``nan_attribute`` row's message starts with in the pool manifest
NAN_POOL_NOTE = ("manifest status nan_attribute (a NaN or infinite cell in the attribute "
                 "array, not in the image): processed as ok; ")

MANIFEST_SCHEMA = pa.schema([
    ("image_id", pa.string()), ("path", pa.string()), ("identity", pa.string()),
    ("split", pa.string()), ("shard", pa.string()), ("exclude", pa.bool_()),
    ("status", pa.string()), ("message", pa.string()), ("single_image", pa.bool_()),
    ("row", pa.int64()),
])


def _image_ids(paths: np.ndarray, code: np.ndarray, lo: int,
               dup_seen: dict[str, int]) -> list[str]:
    ids = paths.astype(object)
    for r in np.flatnonzero(code != OK):
        p = str(paths[r])
        if code[r] == DUPLICATE:
            k = dup_seen.get(p, 0) + 1
            dup_seen[p] = k
            ids[r] = f"{p}{ID_SEP}dup{k}"
        else:
            ids[r] = f"{p or '(no path)'}{ID_SEP}row{lo + int(r) + 1}"
    return ids.tolist()


def _single_identities(ident_blocks: list[pa.Array], ok_blocks: list[np.ndarray]) -> pa.Array:
    """Identities with exactly one ``ok`` image."""
    ok_ids = pa.chunked_array([b.filter(pa.array(m)) for b, m in
                               zip(ident_blocks, ok_blocks, strict=True)], type=pa.string())
    counts = pc.value_counts(ok_ids)
    return counts.field("values").filter(pc.equal(counts.field("counts"), 1))


def write_cast_manifest(arrays: CastArrays, out_path: str | os.PathLike, *, shard_size: int,
                        provenance: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Write the sharded manifest of ``arrays``; return the status counts.

    Every row is kept (bad rows get their status and a message naming the row).
    """
    n = arrays.n_rows
    code, messages = row_statuses(arrays)
    exclude = arrays.exclude_mask()
    n_shards = (n + shard_size - 1) // shard_size
    ident_blocks, ok_blocks = [], []
    for s in range(n_shards):
        lo, hi = s * shard_size, min(n, (s + 1) * shard_size)
        ident_blocks.append(identities(arrays.paths[lo:hi]))
        ok_blocks.append(code[lo:hi] == OK)
    singles = _single_identities(ident_blocks, ok_blocks)
    counts = {STATUSES[c]: int(k) for c, k in zip(*np.unique(code, return_counts=True),
                                                   strict=True)}
    meta = {"facecast.shards": json.dumps([shard_name(s) for s in range(n_shards)]),
            "facecast.shard_size": str(shard_size), "facecast.n_images": str(n),
            "facecast.status_counts": json.dumps(dict(sorted(counts.items())))}
    dup_seen: dict[str, int] = {}
    status_names = np.array(STATUSES, dtype=object)
    # row: delta-coded (every cast_benchmark_subset job reads it back whole)
    with ParquetStreamWriter(out_path, MANIFEST_SCHEMA, provenance=provenance, metadata=meta,
                             column_encoding={"row": "DELTA_BINARY_PACKED"}) as writer:
        for s in tqdm(range(n_shards), desc="manifest shards", mininterval=10):
            lo, hi = s * shard_size, min(n, (s + 1) * shard_size)
            paths = np.asarray(arrays.paths[lo:hi])
            paths = paths if paths.dtype.kind == "U" else np.char.decode(paths, "utf-8")
            c = code[lo:hi]
            ident = ident_blocks[s]
            single = pc.and_(pc.is_in(ident, value_set=singles), pa.array(c == OK))
            writer.write(pa.table({
                "image_id": _image_ids(paths, c, lo, dup_seen),
                "path": pa.array(paths, type=pa.string()),
                "identity": ident,
                "split": pa.array(["all"] * (hi - lo), type=pa.string()),
                "shard": pa.array([shard_name(s)] * (hi - lo), type=pa.string()),
                "exclude": pa.array(exclude[lo:hi]),
                "status": pa.array(status_names[c].tolist(), type=pa.string()),
                "message": [messages.get(r, "") for r in range(lo, hi)],
                "single_image": single,
                "row": pa.array(np.arange(lo, hi, dtype=np.int64)),
            }))
    return counts


def build_cast_manifest(spec: Mapping[str, Any], out_path: str | os.PathLike, *,
                        provenance: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Map the arrays of dataset block ``spec`` and write its manifest (rule ``manifest``);
    return the status counts."""
    arrays = open_cast_arrays(spec)
    root = Path(str(spec.get("root") or Path(str(spec["paths"])).parent))
    prov = dict(provenance or {})
    prov.update({"stage": "manifest", "dataset_kind": "cast_arrays",
                 "dataset_root": portable_path(root),
                 "cast_arrays": {k: portable_path(Path(str(spec[k])))
                                 for k in ("attributes", "paths", "columns", "exclude_mask")
                                 if spec.get(k)},
                 "columns": arrays.columns, "n_rows": arrays.n_rows})
    counts = write_cast_manifest(
        arrays, out_path, shard_size=resolve_shard_size(spec.get("shard_size"), arrays.n_rows),
        provenance=prov)
    log.info("cast_arrays manifest: %d rows, statuses %s, %d excluded", arrays.n_rows, counts,
             int(arrays.exclude_mask().sum()))
    return counts


def write_pool_manifest(manifest_path: str | os.PathLike, subset_paths: list[str],
                        out_path: str | os.PathLike, *, shard_size: int | str | None,
                        provenance: Mapping[str, Any] | None = None) -> int:
    """The manifest rows of a ``cast_arrays`` dataset that some benchmark's subset holds
    (the union of the pools, by ``row``), re-sharded: what the faces and embed stages run
    on instead of all N images (checkpoint ``pool_manifest``). Returns its row count.

    Columns, ids and provenance (``containers`` none; ``dataset_root``) are the manifest's;
    provenance ``pool_of`` names the benchmarks' subset files. A row of status
    ``nan_attribute`` (a NaN or infinite cell in CAST's attribute array, which entered a
    benchmark with ``cast_nan: cast``) gets status ``ok`` here, its manifest message kept
    after :data:`NAN_POOL_NOTE`: the NaN is in the array, not in the image, so its image
    is detected, aligned and embedded like any other and it can be mined (its
    ``image_id`` stays ``<path>//row<n>``, as in the subset). Provenance
    ``n_nan_attribute`` counts them.
    """
    import pyarrow.parquet as pq

    from facecast.datasets.manifest import write_manifest
    from facecast.io.parquet_io import read_provenance

    rows = np.unique(np.concatenate([pq.read_table(p, columns=["row"]).column("row")
                                     .to_numpy() for p in subset_paths] or [np.zeros(0, int)]))
    keep = pa.array(rows.astype(np.int64))
    pf = pq.ParquetFile(manifest_path)
    parts = [pf.read_row_group(g).filter(pc.is_in(pf.read_row_group(g, columns=["row"])
                                                  .column("row"), value_set=keep))
             for g in range(pf.num_row_groups)]
    table = pa.concat_tables(parts) if parts else pf.schema_arrow.empty_table()
    df = table.to_pandas()
    nan = (df["status"] == NAN_STATUS).to_numpy()
    df.loc[nan, "message"] = NAN_POOL_NOTE + df.loc[nan, "message"].fillna("").astype(str)
    df.loc[nan, "status"] = OK_STATUS
    shard_size = resolve_shard_size(shard_size, len(df))
    df["shard"] = [shard_name(i // shard_size) for i in range(len(df))]
    prov = dict(read_provenance(manifest_path))
    prov.update(dict(provenance or {}))
    prov.update({"stage": "pool_manifest", "pool_of": [str(p) for p in subset_paths],
                 "n_nan_attribute": int(nan.sum())})
    write_manifest(df, out_path, shard_size=shard_size, provenance=prov)
    log.info("pool manifest: %d of %d rows (union of %d benchmark subsets), %d shards; "
             "%d of them with a NaN attribute cell (manifest status nan_attribute) are "
             "processed as ok: the NaN is in the attribute array, not in the image",
             len(df), pf.metadata.num_rows, len(subset_paths),
             (len(df) + shard_size - 1) // shard_size, int(nan.sum()))
    return len(df)
