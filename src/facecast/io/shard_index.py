"""Shard indexes: one small table that stands for every shard of a per-shard stage.

A per-shard stage (faces, one embedding model) writes ``{shard}.parquet`` files; its index
(``results/{ds}/index/faces.parquet``, ``results/{ds}/index/embed_{model}.parquet``) lists
each shard with its row and status counts. The indexes live in their own folder, so a
shard folder holds shards only and ``'results/demo/faces/*.parquet'`` in DuckDB (or a
pyarrow dataset of the folder) still reads one table. Stages that need *all* shards
(fitting, mining, evaluation, fairness, the report) take the index as their one input
instead of thousands of shard files: the Snakemake DAG then holds one edge per consumer
instead of one per shard and consumer (at 42M images: 4,200 shards x every benchmark x
every model), and rerunning any shard still reruns the index and everything after it
(its input is newer).

The index stores shard paths relative to its own folder, so a results tree can be moved
or copied; :func:`shard_files` resolves them.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from facecast.io.parquet_io import read_parquet, write_parquet

INDEX_COLUMNS = ["shard", "file", "n_rows", "n_ok"]
#: where the pipeline keeps its indexes (``str.format`` patterns, Snakemake wildcards)
FACES_INDEX = "results/{ds}/index/faces.parquet"
EMBED_INDEX = "results/{ds}/index/embed_{model}.parquet"


def _shard_row(path: Path, folder: Path) -> dict[str, Any]:
    pf = pq.ParquetFile(path)
    n_ok = None
    if "status" in pf.schema_arrow.names:
        status = pf.read(columns=["status"]).column("status")
        usable = pa.array(["ok", "aligned_input"])  # aligned_input: pre-aligned input
        n_ok = int(pc.sum(pc.is_in(status, value_set=usable)).as_py() or 0)
    return {"shard": path.stem, "file": Path(os.path.relpath(path, folder)).as_posix(),
            "n_rows": pf.metadata.num_rows, "n_ok": n_ok}


def write_shard_index(shard_paths: Iterable[str | os.PathLike], index_path: str | os.PathLike,
                      *, provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Write the index of ``shard_paths`` and return it.

    One row per shard, in shard order: ``shard``, ``file`` (path relative to the index's
    folder), ``n_rows``, ``n_ok`` (rows with status ``ok``; null for shards without a
    status column). Nothing in it depends on where the results folder lies, so the same
    shards give the same index.
    """
    index_path = Path(index_path)
    folder = index_path.parent
    rows = [_shard_row(p, folder) for p in sorted(map(Path, shard_paths), key=lambda p: p.name)]
    table = pd.DataFrame(rows, columns=INDEX_COLUMNS)
    table["n_ok"] = table["n_ok"].astype("Int64")
    prov = {"stage": "shard_index", **dict(provenance or {}),
            "n_shards": len(table), "n_rows": int(table["n_rows"].sum())}
    write_parquet(table, index_path, provenance=prov)
    return table


def shard_files(index_path: str | os.PathLike) -> list[str]:
    """Paths of the shard files an index lists (resolved from its folder), in shard order.

    Raises FileNotFoundError naming the index when a listed shard is missing.
    """
    index_path = Path(index_path)
    names = read_parquet(index_path, columns=["file"])["file"].tolist()
    paths = [Path(os.path.normpath(index_path.parent / n)) for n in names]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} shard(s) listed in {index_path} are missing, "
                                f"e.g. {missing[0]}; rerun the stage that writes them")
    return [str(p) for p in paths]
