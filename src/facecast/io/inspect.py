"""Describe any facecast artifact: schema, provenance, row count, head, column summaries.

Works on one Parquet file or a directory of shard files (e.g. ``results/demo/faces``).
Reads only the footer for schema/provenance/row counts, and at most ``sample_rows``
rows for the head and summaries, so it is quick on huge tables.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from facecast.io.parquet_io import PROVENANCE_KEY


def parquet_files(path: str | os.PathLike) -> list[Path]:
    """The Parquet files at ``path`` (itself, or every ``*.parquet`` below a directory)."""
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*.parquet") if not f.name.startswith("."))
        if not files:
            raise FileNotFoundError(f"no .parquet files under {p}")
        return files
    if not p.is_file():
        raise FileNotFoundError(f"{p} does not exist")
    return [p]


def _summary(series: pd.Series) -> str:
    non_null = series.dropna()
    n_null = len(series) - len(non_null)
    if len(non_null) == 0:
        return f"all null ({n_null})"
    first = non_null.iloc[0]
    if isinstance(first, (bytes, bytearray)):
        sizes = non_null.map(len)
        return f"binary, {len(non_null)} values, {sizes.mean():.0f} bytes mean, {n_null} null"
    if isinstance(first, (list, tuple, np.ndarray)):
        lens = non_null.map(len)
        return f"list, length {lens.min()}..{lens.max()}, {n_null} null"
    if pd.api.types.is_bool_dtype(non_null):
        return f"bool, {int(non_null.sum())} true / {len(non_null)}, {n_null} null"
    if pd.api.types.is_numeric_dtype(non_null):
        d = non_null.astype(float)
        return (f"min {d.min():.4g}  mean {d.mean():.4g}  max {d.max():.4g}  "
                f"std {d.std():.4g}, {n_null} null")
    counts = non_null.astype(str).value_counts()
    top = ", ".join(f"{k!s:.40}={v}" for k, v in counts.head(5).items())
    return f"{counts.size} distinct; top: {top}; {n_null} null"


def describe(path: str | os.PathLike, sample_rows: int = 1000, head: int = 5,
             random_seed: int | None = None) -> str:
    """A readable multi-section description of the artifact at ``path``.

    Summaries run over the first ``sample_rows`` rows, or, with ``random_seed`` set, over
    ``sample_rows`` rows drawn uniformly at random without replacement (seeded; only the
    row groups holding drawn rows are read). The text says which.
    """
    files = parquet_files(path)
    out = io.StringIO()
    schema = pq.read_schema(files[0])
    n_rows = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    out.write(f"artifact: {path}\nfiles: {len(files)}\nrows: {n_rows}\n\n")
    meta = schema.metadata or {}
    prov = meta.get(PROVENANCE_KEY)
    out.write("provenance:\n")
    out.write(json.dumps(json.loads(prov), indent=2, sort_keys=True) if prov else "  (none)")
    out.write("\n")
    extra = {k.decode(): v.decode() for k, v in meta.items()
             if k not in (PROVENANCE_KEY, b"ARROW:schema", b"pandas")}
    for k, v in extra.items():
        out.write(f"{k}: {v if len(v) < 200 else v[:200] + '...'}\n")
    out.write("\nschema:\n")
    for field in schema:
        out.write(f"  {field.name}: {field.type}\n")
    if random_seed is None:
        table = _sample(files, sample_rows)
        what = f"the first {table.num_rows} of {n_rows} rows"
    else:
        table = _random_sample(files, sample_rows, random_seed)
        what = f"{table.num_rows} of {n_rows} rows drawn at random (seed {random_seed})"
    df = table.to_pandas()
    out.write(f"\nhead ({min(head, len(df))} of {what}):\n")
    with pd.option_context("display.max_columns", 12, "display.width", 160,
                           "display.max_colwidth", 40):
        shown = df.head(head).copy()
        for c in shown.columns:
            if len(shown) and isinstance(shown[c].dropna().iloc[0] if shown[c].notna().any()
                                         else None, (bytes, bytearray)):
                shown[c] = shown[c].map(lambda b: f"<{len(b)} bytes>" if b is not None else None)
        out.write(shown.to_string() + "\n")
    out.write(f"\ncolumns (summary over {what}):\n")
    for c in df.columns:
        out.write(f"  {c}: {_summary(df[c])}\n")
    return out.getvalue()


def _sample(files: list[Path], n: int) -> pa.Table:
    batches = []
    left = n
    for f in files:
        for batch in pq.ParquetFile(f, pre_buffer=False).iter_batches(batch_size=min(max(left, 1), 65536)):
            batches.append(batch.slice(0, left))
            left -= min(left, batch.num_rows)
            if left <= 0:
                break
        if left <= 0:
            break
    if not batches:
        return pq.read_schema(files[0]).empty_table()
    return pa.Table.from_batches(batches)


def _random_sample(files: list[Path], n: int, seed: int) -> pa.Table:
    """``n`` rows drawn uniformly without replacement over all files, in file order."""
    sizes = [[rg.num_rows for rg in _row_groups(f)] for f in files]
    flat = np.array([k for per in sizes for k in per], np.int64)
    total = int(flat.sum())
    if total == 0:
        return pq.read_schema(files[0]).empty_table()
    picks = np.sort(np.random.default_rng(seed).choice(total, size=min(n, total),
                                                       replace=False))
    starts = np.concatenate([[0], np.cumsum(flat)])
    parts, g = [], 0
    for f, per in zip(files, sizes, strict=True):
        pf = pq.ParquetFile(f, pre_buffer=False)
        for k in range(len(per)):
            lo, hi = starts[g], starts[g + 1]
            g += 1
            inside = picks[(picks >= lo) & (picks < hi)] - lo
            if inside.size:
                parts.append(pf.read_row_group(k).take(pa.array(inside)))
    return pa.concat_tables(parts)


def _row_groups(f: Path) -> list:
    meta = pq.ParquetFile(f).metadata
    return [meta.row_group(k) for k in range(meta.num_row_groups)]
