"""CAST's filter tuples, verbatim (``benchmarks.<bench>.cast_filters``), and benchmark
subsets straight from a ``cast_arrays`` dataset's mapped arrays.

A tuple means what CAST's ``dataset_builder/filter.py`` (driven by ``run.py``) does:

* ``[attribute, class]``: class equality, ``x == class``.
* ``[attribute, abs, lo, hi]``: raw values with strict bounds, ``lo < x < hi``.
* ``[attribute, rank, lo, hi]``: ``lo``/``hi`` are percents 0-100 and select the positional
  slice ``np.argsort(column)[round(N*lo/100) : round(N*hi/100) - 1]`` over the WHOLE array
  (every row, excluded and NaN rows too; NaN sorts last; Python slice semantics, so
  ``hi = 0`` keeps all but the last position). The slice drops its last position: ``[x,
  rank, 90, 100]`` leaves out the single top-ranked row. ``description.txt`` says so in a
  ``#`` line after CAST's lines (:data:`facecast.analysis.filtering.CAST_RANK_NOTE`).
  facecast's own ``filters`` (``mode: rank``) keep ties together instead.

Masks are multiplied (ANDed) after the exclusions (CAST's ``train_set`` mask: facecast's
pool, rows not excluded and with a status in ``mining.statuses``).

Exactness and speed: :func:`facecast.analysis.filtering.cast_rank_select` finds a slice
with one ``np.partition`` when no tie is cut at its ends, and runs CAST's full
``np.argsort`` (default kind, the column's own dtype: float32 as shipped) when one is, so
tied rows at a slice end are cut exactly as CAST's code cuts them on the same numpy. A
column is read from the ``.npy`` file block by block (never the whole N x K array), and
filters run in a pool of worker processes (``threads``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from facecast.analysis.filtering import (
    AttributeFilter,
    FilterError,
    cast_rank_select,
    describe_filters,
    filter_mask,
)
from facecast.datasets.cast_arrays import CastArrays, npy_layout, path_arrays, read_rows
from facecast.io.atomic import write_text
from facecast.io.parquet_io import write_parquet

#: rows per block when a column is read from the ``.npy`` file
READ_ROWS = 1 << 20


def parse_cast_filter(spec: Sequence[Any], bench: str = "", i: int = 0,
                      ties: str = "argsort") -> AttributeFilter:
    """One CAST tuple as an :class:`AttributeFilter`; errors name the benchmark and tuple."""
    where = f"benchmarks.{bench}.cast_filters[{i}]"
    if not isinstance(spec, (list, tuple)) or len(spec) not in (2, 4):
        raise FilterError(f"{where}: {spec!r} is not a CAST tuple: [attribute, class] or "
                          "[attribute, rank | abs, low, high]")
    attr = str(spec[0])
    if len(spec) == 2:
        return AttributeFilter(attr, "class", value=spec[1])
    style, lo, hi = spec[1], spec[2], spec[3]
    if style not in ("rank", "abs"):
        raise FilterError(f"{where}: style {style!r} must be rank or abs")
    if not all(isinstance(b, (int, float)) and not isinstance(b, bool) for b in (lo, hi)):
        raise FilterError(f"{where}: bounds {lo!r}, {hi!r} must be numbers")
    if lo > hi:
        raise FilterError(f"{where}: low {lo} > high {hi}")
    if style == "rank":
        if not (0 <= lo <= 100 and 0 <= hi <= 100):
            raise FilterError(f"{where}: rank bounds are percents 0-100 (got {lo}, {hi})")
        return AttributeFilter(attr, "rank", low=lo / 100, high=hi / 100, rank_method="cast",
                               cast_bounds=(lo, hi), ties=ties)
    return AttributeFilter(attr, "abs", low=lo, high=hi, cast_bounds=(lo, hi))


def parse_cast_filters(specs: Sequence[Sequence[Any]], bench: str = "",
                       ties: str = "argsort") -> list[AttributeFilter]:
    """A benchmark's ``cast_filters`` list, in order (``ties``: its ``cast_ties``)."""
    return [parse_cast_filter(s, bench, i, ties) for i, s in enumerate(specs or [])]


def read_column(path: str | os.PathLike, j: int) -> np.ndarray:
    """Column ``j`` of a 2-D C-order ``.npy`` file, read block by block in its own dtype
    (the file is never mapped or loaded whole)."""
    (n, k), dtype, offset = npy_layout(path)
    with open(path, "rb") as fh:
        fh.seek(offset)
        out = np.empty(n, dtype=dtype)
        row_bytes = k * dtype.itemsize
        for lo in range(0, n, READ_ROWS):
            rows = min(READ_ROWS, n - lo)
            block = np.frombuffer(fh.read(rows * row_bytes), dtype=dtype).reshape(rows, k)
            out[lo:lo + rows] = block[:, j]
    return out


def _one_mask(args: tuple[str, int, AttributeFilter, int, np.ndarray | None]
              ) -> tuple[np.ndarray, int]:
    """Packed mask of one filter over all N rows, and its valued rows. ``pool`` is needed
    (and given) only by a facecast-ranked filter, which ranks over the pool."""
    path, j, f, n, pool = args
    v = read_column(path, j)
    n_valued = int(np.count_nonzero(~np.isnan(v))) if v.dtype.kind == "f" else n
    if f.mode == "rank" and (f.cast_bounds is not None or f.rank_method == "cast"):
        lo, hi = (f.cast_bounds if f.cast_bounds is not None
                  else (round(f.low * 100, 9), round(f.high * 100, 9)))
        m = cast_rank_select(v, float(lo), float(hi), f.ties)
    else:
        m = filter_mask(v, pool if pool is not None else np.ones(n, bool), f)
    return np.packbits(m), n_valued


def select_from_arrays(arrays: CastArrays, attributes_path: str | os.PathLike,
                       filters: Sequence[AttributeFilter], pool: np.ndarray, *,
                       workers: int = 1) -> tuple[np.ndarray, dict[str, Any]]:
    """Mask of the benchmark's rows (pool AND every filter) and the per-filter counts.

    CAST tuples and ``rank_method: cast`` filters rank over all N rows (CAST's slice);
    facecast-ranked filters over the pool's valued rows, as on an attribute table.
    """
    n = arrays.n_rows
    missing = [f.attribute for f in filters if f.attribute not in arrays.columns]
    if missing:
        raise FilterError(f"attribute column(s) {missing} not in columns.csv; available: "
                          f"{arrays.columns}")
    pool = np.asarray(pool, bool)
    jobs = [(os.fspath(attributes_path), arrays.columns.index(f.attribute), f, n,
             pool if (f.mode == "rank" and f.cast_bounds is None
                      and f.rank_method != "cast") else None)
            for f in filters]
    if workers > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as ex:
            results = list(ex.map(_one_mask, jobs))
    else:
        results = [_one_mask(job) for job in jobs]
    mask = np.asarray(pool, bool).copy()
    report: dict[str, Any] = {"n_rows": n, "n_pool": int(mask.sum()), "filters": []}
    for f, (packed, n_valued) in zip(filters, results, strict=True):
        m = np.unpackbits(packed, count=n).astype(bool)
        report["filters"].append({"attribute": f.attribute, "mode": f.mode,
                                  "rank_method": ("cast" if f.cast_bounds is not None
                                                  and f.mode == "rank" else f.rank_method),
                                  "bounds": list(f.cast_bounds or (f.low, f.high)),
                                  "n_valued": n_valued, "n_pass_all_rows": int(m.sum()),
                                  "n_pass": int((m & pool).sum())})
        mask &= m
    report["n_subset"] = int(mask.sum())
    return mask, report


def write_array_subset(arrays: CastArrays, attributes_path: str | os.PathLike,
                       paths_path: str | os.PathLike, mask: np.ndarray,
                       filters: Sequence[AttributeFilter], report: dict[str, Any],
                       subset_path: str | os.PathLike, description_path: str | os.PathLike, *,
                       provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``subset.parquet`` (``image_id`` = path, ``identity``, ``split``, ``row``, each
    filtered attribute) and ``description.txt`` of the selected rows; return ``report``."""
    rows = np.flatnonzero(mask)
    image_id, ident = [], []
    # block by block with file reads: no N-long copy, no mapped page left resident
    for block in (read_rows(paths_path, rows) if len(rows) else []):
        if block.dtype.kind == "S":
            block = np.char.decode(block, "utf-8")
        ids, folders = path_arrays(block)
        image_id.append(ids)
        ident.append(folders)
    table = {"image_id": pa.chunked_array(image_id, type=pa.string()),
             "identity": pa.chunked_array(ident, type=pa.string()),
             "split": pa.DictionaryArray.from_arrays(np.zeros(len(rows), np.int8), ["all"]),
             "row": pa.array(rows.astype(np.int64))}
    for a in dict.fromkeys(f.attribute for f in filters):
        table[a] = pa.array(read_column(attributes_path, arrays.columns.index(a))[rows]
                            .astype(np.float64))
    report["n_identities"] = int(len(pc.unique(table["identity"]))) if len(rows) else 0
    prov = dict(provenance or {})
    prov.update({"stage": "benchmark_subset", "source": "cast_arrays",
                 "filters": [{k: v for k, v in vars(f).items()} for f in filters]})
    write_parquet(pa.table(table), subset_path, provenance=prov,
                  metadata={"facecast.subset_report": json.dumps(report, default=str)})
    write_text(description_path, describe_filters(filters))
    return report


def array_pool(manifest_path: str | os.PathLike, statuses: Sequence[str]) -> np.ndarray:
    """Rows of a ``cast_arrays`` manifest that may enter a benchmark (status in
    ``statuses``, not excluded), in array row order; reads two columns only."""
    import pyarrow.parquet as pq

    t = pq.read_table(manifest_path, columns=["status", "exclude", "row"],
                      read_dictionary=["status"])
    ok = pc.is_in(t.column("status"), value_set=pa.array(list(statuses), type=pa.string()))
    keep = pc.and_(ok, pc.invert(t.column("exclude"))).to_numpy(zero_copy_only=False)
    rows = t.column("row").to_numpy()
    pool = np.zeros(len(rows), bool)
    pool[rows] = keep
    return pool


def build_array_subset(spec: Mapping[str, Any], manifest_path: str | os.PathLike,
                       bench_cfg: Mapping[str, Any], subset_path: str | os.PathLike,
                       description_path: str | os.PathLike, *, bench: str,
                       statuses: Sequence[str], workers: int = 1,
                       provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A benchmark of a ``cast_arrays`` dataset from its arrays (rule
    ``cast_benchmark_subset``): ``filters`` then ``cast_filters``, ANDed; return counts."""
    from facecast.analysis.filtering import parse_filters
    from facecast.datasets.cast_arrays import open_cast_arrays

    arrays = open_cast_arrays(spec)
    filters = (parse_filters(bench_cfg.get("filters") or [], bench,
                             bench_cfg.get("rank_method", "facecast"))
               + parse_cast_filters(bench_cfg.get("cast_filters") or [], bench,
                                    bench_cfg.get("cast_ties", "argsort")))
    pool = array_pool(manifest_path, statuses)
    mask, report = select_from_arrays(arrays, Path(str(spec["attributes"])), filters, pool,
                                      workers=workers)
    return write_array_subset(arrays, Path(str(spec["attributes"])), Path(str(spec["paths"])),
                              mask, filters, report, subset_path, description_path,
                              provenance=provenance)
