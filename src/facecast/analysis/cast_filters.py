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
from the values at its ends (:mod:`facecast.analysis.order_stats`) when no tie is cut
there, and runs CAST's full ``np.argsort`` (default kind, the column's own dtype: float32
as shipped) when one is, so tied rows at a slice end are cut exactly as CAST's code cuts
them on the same numpy; two tuples on one column share its read and its argsort. A column
is read from the ``.npy`` file block by block into one reused buffer (never the whole N x K array, never
twice: the subset's values come from the same read), and columns run in a pool of worker
processes (``threads``). The selected paths are gathered span by span from a map of the
span alone and turned into Arrow strings from their code points
(:func:`facecast.datasets.cast_paths.read_path_blocks`), identities counted from folder
keys (:func:`facecast.datasets.cast_paths.count_identities`), and
``subset.parquet`` is written without dictionary pages for the paths and identities
(:data:`SUBSET_ENCODING`): the values read back are the same.
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

from facecast.analysis.filtering import (
    AttributeFilter,
    FilterError,
    cast_rank_select,
    describe_filters,
    filter_mask,
)
from facecast.analysis.pool import benchmark_pool
from facecast.datasets.cast_arrays import CastArrays, fill_from, npy_layout
from facecast.datasets.cast_paths import count_identities, read_path_blocks
from facecast.io.atomic import write_text
from facecast.io.parquet_io import write_parquet

#: rows per block when a column is read from the ``.npy`` file
READ_ROWS = 1 << 15
#: subset columns that are not filtered attributes
KEY_NAMES = ("image_id", "identity", "split", "row")


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


def read_columns(path: str | os.PathLike, js: Sequence[int]) -> list[np.ndarray]:
    """Columns ``js`` of a 2-D C-order ``.npy`` file in one pass, each in the file's dtype,
    read block by block into one reused buffer (the file is never mapped or loaded whole)."""
    (n, k), dtype, offset = npy_layout(path)
    outs = [np.empty(n, dtype=dtype) for _ in js]
    row_bytes = k * dtype.itemsize
    if not n or not row_bytes:
        return outs
    buf = np.empty(min(READ_ROWS, n) * k, dtype)
    raw = memoryview(buf).cast("B")
    with open(path, "rb", buffering=0) as fh:
        fh.seek(offset)
        for lo in range(0, n, READ_ROWS):
            rows = min(READ_ROWS, n - lo)
            if fill_from(fh, raw[:rows * row_bytes]) < rows * row_bytes:
                raise FilterError(f"{path}: file ends before row {n - 1}")
            block = buf[:rows * k].reshape(rows, k)
            for out, j in zip(outs, js, strict=True):
                out[lo:lo + rows] = block[:, j]
    return outs


def read_column(path: str | os.PathLike, j: int) -> np.ndarray:
    """Column ``j`` of a 2-D C-order ``.npy`` file (:func:`read_columns`)."""
    return read_columns(path, [j])[0]


def _column_masks(args: tuple[str | np.ndarray, int, Sequence[AttributeFilter], int,
                              np.ndarray | None, bool, bool]
                  ) -> tuple[list[tuple[np.ndarray, int]], np.ndarray | None]:
    """Masks over all N rows of the filters on column ``j`` (of the ``.npy`` file
    ``source``, or ``source`` itself when it is the column already read), bit-packed when
    ``pack`` (to be sent from a worker process), with the column's valued rows, and the
    column itself when ``keep`` (for the subset's values).
    One column read and at most one full ``argsort`` serve every filter on the column.
    ``pool`` is needed (and given) only by facecast-ranked filters, which rank over it."""
    source, j, filters, n, pool, keep, pack = args
    v = source if isinstance(source, np.ndarray) else read_column(source, j)
    n_valued = n - int(np.count_nonzero(np.isnan(v))) if v.dtype.kind == "f" else n
    order: list[np.ndarray] = []

    def argsort() -> np.ndarray:         # CAST's full argsort, once per column
        if not order:
            order.append(np.argsort(v))
        return order[0]

    out = []
    for f in filters:
        if f.mode == "rank" and (f.cast_bounds is not None or f.rank_method == "cast"):
            lo, hi = (f.cast_bounds if f.cast_bounds is not None
                      else (round(f.low * 100, 9), round(f.high * 100, 9)))
            m = cast_rank_select(v, float(lo), float(hi), f.ties, argsort=argsort)
        else:
            m = filter_mask(v, pool if pool is not None else np.ones(n, bool), f)
        out.append((np.packbits(m) if pack else m, n_valued))
    return out, (v if keep else None)


def select_from_arrays(arrays: CastArrays, attributes_path: str | os.PathLike,
                       filters: Sequence[AttributeFilter], pool: np.ndarray, *,
                       workers: int = 1, values: dict[str, np.ndarray] | None = None
                       ) -> tuple[np.ndarray, dict[str, Any]]:
    """Mask of the benchmark's rows (pool AND every filter) and the per-filter counts.

    CAST tuples and ``rank_method: cast`` filters rank over all N rows (CAST's slice);
    facecast-ranked filters over the pool's valued rows, as on an attribute table. Each
    column is read once, whatever the number of filters on it; ``values`` (a dict), when
    given, receives each filtered column (all N rows) for :func:`write_array_subset`
    (with ``workers`` 1; columns read in worker processes are not sent back).
    """
    n = arrays.n_rows
    missing = [f.attribute for f in filters if f.attribute not in arrays.columns]
    if missing:
        raise FilterError(f"attribute column(s) {missing} not in columns.csv; available: "
                          f"{arrays.columns}")
    pool = np.asarray(pool, bool)
    by_column: dict[str, list[int]] = {}
    for i, f in enumerate(filters):
        by_column.setdefault(f.attribute, []).append(i)
    parallel = workers > 1 and len(by_column) > 1
    jobs = [(os.fspath(attributes_path), arrays.columns.index(a), [filters[i] for i in idx],
             n, pool if any(filters[i].mode == "rank" and filters[i].cast_bounds is None
                            and filters[i].rank_method != "cast" for i in idx) else None,
             values is not None and not parallel, parallel)
            for a, idx in by_column.items()]
    if parallel:
        with ProcessPoolExecutor(max_workers=min(workers, len(jobs))) as ex:
            done = list(ex.map(_column_masks, jobs))
    else:
        if values is not None and len(jobs) > 1:   # kept anyway: all columns in one pass
            read = read_columns(attributes_path, [job[1] for job in jobs])
            jobs = [(column, *job[1:]) for column, job in zip(read, jobs, strict=True)]
        done = [_column_masks(job) for job in jobs]
    results: list[tuple[np.ndarray, int]] = [(np.empty(0, bool), 0)] * len(filters)
    for (a, idx), (masks, column) in zip(by_column.items(), done, strict=True):
        for i, r in zip(idx, masks, strict=True):
            results[i] = r
        if values is not None and column is not None:
            values[a] = column
    mask = np.asarray(pool, bool).copy()
    report: dict[str, Any] = {"n_rows": n, "n_pool": int(np.count_nonzero(mask)),
                              "filters": []}
    for f, (packed, n_valued) in zip(filters, results, strict=True):
        m = packed if packed.dtype == bool else np.unpackbits(packed, count=n).view(bool)
        report["filters"].append({"attribute": f.attribute, "mode": f.mode,
                                  "rank_method": ("cast" if f.cast_bounds is not None
                                                  and f.mode == "rank" else f.rank_method),
                                  "bounds": list(f.cast_bounds or (f.low, f.high)),
                                  "n_valued": n_valued,
                                  "n_pass_all_rows": int(np.count_nonzero(m)),
                                  "n_pass": int(np.count_nonzero(m & pool))})
        mask &= m
    report["n_subset"] = int(np.count_nonzero(mask))
    return mask, report


#: Parquet page settings of ``subset.parquet`` (the values read back are the same):
#: dictionary pages only for ``split`` (unique paths and runs of identities compress better
#: and faster without), rows delta-coded, float values byte-split, no min/max statistics
#: for the two string columns (nothing filters a subset file on them)
SUBSET_ENCODING = {"row": "DELTA_BINARY_PACKED"}


def write_array_subset(arrays: CastArrays, attributes_path: str | os.PathLike,
                       paths_path: str | os.PathLike, mask: np.ndarray,
                       filters: Sequence[AttributeFilter], report: dict[str, Any],
                       subset_path: str | os.PathLike, description_path: str | os.PathLike, *,
                       provenance: Mapping[str, Any] | None = None,
                       values: Mapping[str, np.ndarray] | None = None) -> dict[str, Any]:
    """``subset.parquet`` (``image_id`` = path, ``identity``, ``split``, ``row``, each
    filtered attribute) and ``description.txt`` of the selected rows; return ``report``.

    ``values``: filtered columns already read (:func:`select_from_arrays`); others are
    read from the file."""
    rows = np.flatnonzero(mask)
    image_id, ident, heads = [], [], []
    # span by span (a map of each span alone): no N-long copy, no whole-file map resident
    for ids, folders, first, head_keys in read_path_blocks(paths_path, rows):
        image_id.append(ids)
        ident.append(folders)
        heads.append((folders, first, head_keys))     # each identity run once
    table = {"image_id": pa.chunked_array(image_id, type=pa.string()),
             "identity": pa.chunked_array(ident, type=pa.string()),
             "split": pa.DictionaryArray.from_arrays(np.zeros(len(rows), np.int8), ["all"]),
             "row": pa.array(rows.astype(np.int64, copy=False))}
    attrs = list(dict.fromkeys(f.attribute for f in filters))
    for a in attrs:
        column = (values or {}).get(a)
        if column is None:
            column = read_column(attributes_path, arrays.columns.index(a))
        table[a] = pa.array(column[rows].astype(np.float64))
    report["n_identities"] = count_identities(heads) if len(rows) else 0
    prov = dict(provenance or {})
    prov.update({"stage": "benchmark_subset", "source": "cast_arrays",
                 "filters": [{k: v for k, v in vars(f).items()} for f in filters]})
    encoding = dict(SUBSET_ENCODING)
    encoding.update({a: "BYTE_STREAM_SPLIT" for a in attrs if a not in KEY_NAMES})
    write_parquet(pa.table(table), subset_path, provenance=prov,
                  metadata={"facecast.subset_report": json.dumps(report, default=str)},
                  use_dictionary=["split"], column_encoding=encoding,
                  write_statistics=[c for c in table if c not in ("image_id", "identity")])
    write_text(description_path, describe_filters(filters))
    return report


def array_pool(manifest_path: str | os.PathLike, statuses: Sequence[str]) -> np.ndarray:
    """Rows of a ``cast_arrays`` manifest that may enter a benchmark (status in
    ``statuses``, not excluded), in array row order; reads three columns only. The status
    test runs on each chunk's dictionary (a handful of values), then maps its indices."""
    import pyarrow.parquet as pq

    t = pq.read_table(manifest_path, columns=["status", "exclude", "row"],
                      read_dictionary=["status"], use_threads=False)
    keep = np.empty(t.num_rows, bool)
    at = 0
    for chunk in t.column("status").chunks:
        values = np.array(chunk.dictionary.to_pylist(), dtype=object)
        ok = np.append(benchmark_pool(values, np.zeros(len(values), bool), statuses), False)
        idx = chunk.indices.fill_null(len(ok) - 1).to_numpy(zero_copy_only=False)
        keep[at:at + len(chunk)] = ok[idx]
        at += len(chunk)
    keep &= ~t.column("exclude").fill_null(False).to_numpy(zero_copy_only=False)
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
    values: dict[str, np.ndarray] = {}
    mask, report = select_from_arrays(arrays, Path(str(spec["attributes"])), filters, pool,
                                      workers=workers, values=values)
    return write_array_subset(arrays, Path(str(spec["attributes"])), Path(str(spec["paths"])),
                              mask, filters, report, subset_path, description_path,
                              provenance=provenance, values=values)
