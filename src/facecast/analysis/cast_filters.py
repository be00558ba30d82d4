"""CAST's filter tuples as CAST's ``run.py`` writes them
(``benchmarks.<bench>.cast_filters``), and benchmark subsets straight from a
``cast_arrays`` dataset's mapped arrays.

A tuple selects what CAST's ``dataset_builder/filter.py`` (class ``FilterClass``, driven by
``run.py``) selects: facecast reproduces ``FilterClass.run``'s behaviour, comparing the
column in the array's own dtype (float32 as CAST ships it) with the tuple's numbers as
written, so numpy's promotion rules decide, as in CAST. With NumPy 2 (NEP 50) a Python
number is cast to float32 before a float32 column is compared with it: a bound float32 cannot hold exactly (``0.1``,
``0.7``, ``12.3``) is its float32 image, so ``float32(0.1) > 0.1`` is False and
``float32(0.7) == 0.7`` is True (a float64 copy of the column says the opposite):

* ``[attribute, class]``: ``column == class`` (:func:`cast_class_mask`). NaN equals
  nothing. A string class on the (numeric) array is refused: CAST's comparison would
  select no row.
* ``[attribute, abs, lo, hi]``: ``(column > lo) * (column < hi)`` (:func:`cast_abs_mask`;
  strict bounds; NaN is never inside).
* ``[attribute, rank, lo, hi]``: ``lo``/``hi`` are percents 0-100 and select the positional
  slice ``np.argsort(column)[round(N*lo/100) : round(N*hi/100) - 1]`` over the WHOLE array
  (every row, excluded and NaN rows too; NaN sorts last; Python slice semantics, so
  ``hi = 0`` keeps all but the last position). The slice drops its last position: ``[x,
  rank, 90, 100]`` leaves out the single top-ranked row. ``description.txt`` says so in a
  ``#`` line after the CAST-format lines (:data:`facecast.analysis.filtering.CAST_RANK_NOTE`).
  facecast's own ``filters`` (``mode: rank``) keep ties together instead.

facecast's own ``filters`` (``value``, ``class``) on the arrays compare in the column's
float32 too (:func:`facecast.analysis.filtering.filter_mask`): ``value: 0.7`` matches the
stored ``float32(0.7)``.

Masks are multiplied (ANDed) after the exclusions (CAST's ``train_set`` mask: facecast's
pool, rows not excluded and with a status in ``mining.statuses``).

NaN cells (``benchmarks.<bench>.cast_nan``, :data:`CAST_NAN_MODES`): the manifest gives a
row with a NaN or infinite cell in any column status ``nan_attribute``. CAST keeps such a
row unless the filtered column itself excludes it, and so does ``cast_nan: cast`` (the
default): ``nan_attribute`` rows enter the pool wherever ``ok`` rows do, and each filter
decides on its own column (comparisons with NaN are False; a rank range reaching the end
of the argsort order takes NaN rows; a log line counts them, and the report's
``n_nan_selected``). Their ``image_id`` in the subset is the manifest's, ``<path>//row<n>``;
the subset's ``path`` column holds every row's path in ``paths.npy`` (CAST's output). In the
pool manifest such a row is processed as ``ok`` (its image is embedded and mined like any
other: :func:`facecast.datasets.cast_manifest.write_pool_manifest`).
``cast_nan: drop`` keeps them out of every benchmark (facecast's behaviour before).

Ties: which tied rows a rank slice keeps is ``np.argsort``'s default order, which on NumPy
>= 1.25 depends on the CPU's sort kernel (AVX-512 or not). Every subset's provenance
records :func:`argsort_platform` (NumPy version, CPU architecture, sort-relevant SIMD
features), and each cut tie is logged with its row counts (report ``tie_cuts``);
``cast_ties: row_order`` cuts ties in row order instead, the same on every machine.

Exactness and speed: :func:`facecast.analysis.filtering.cast_rank_select` finds a slice
from the values at its ends (:mod:`facecast.analysis.order_stats`) when no tie is cut
there, and runs CAST's full ``np.argsort`` (default kind, the column's own dtype) when one
is, so tied rows at a slice end are cut exactly as CAST's code cuts them on the same numpy
and CPU; two tuples on one column share its argsort. The filtered columns are read from
the ``.npy`` file in one pass, block by block into one reused buffer (never the whole N x K
array, never twice: the subset's values come from the same read), and their filters run in
``threads`` threads (numpy's sorts release the GIL; no process is forked). The selected
paths are gathered span by span from a map of the span alone and turned into Arrow
strings from their code points (:func:`facecast.datasets.cast_paths.read_path_blocks`),
identities counted from folder keys (:func:`facecast.datasets.cast_paths.count_identities`),
and ``subset.parquet`` is written without dictionary pages for the paths and identities
(:data:`SUBSET_ENCODING`): the values read back are the same.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from facecast.analysis.cast_tuples import (
    CAST_NAN_MODES,
    TIES_HINT,
    argsort_platform,
    cast_abs_mask,
    cast_class_mask,
    parse_cast_filters,
    tie_cuts,
)
from facecast.analysis.filtering import (
    AttributeFilter,
    FilterError,
    cast_rank_select,
    describe_filters,
    filter_mask,
)
from facecast.analysis.pool import benchmark_pool
from facecast.datasets.cast_arrays import NAN_STATUS, CastArrays, fill_from, npy_layout
from facecast.datasets.cast_paths import count_identities, read_path_blocks
from facecast.datasets.manifest import ID_SEP
from facecast.io.atomic import write_text
from facecast.io.parquet_io import write_parquet

log = logging.getLogger(__name__)

#: rows per block when a column is read from the ``.npy`` file
READ_ROWS = 1 << 15
#: subset columns that are not filtered attributes
KEY_NAMES = ("image_id", "path", "identity", "split", "row")


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


def _cast_ranked(f: AttributeFilter) -> bool:
    """Whether ``f`` is CAST's positional rank slice (a tuple, or ``rank_method: cast``)."""
    return f.mode == "rank" and (f.cast_bounds is not None or f.rank_method == "cast")


def _facecast_ranked(f: AttributeFilter) -> bool:
    """Whether ``f`` ranks over the pool (a facecast rank filter) rather than all rows."""
    return f.mode == "rank" and f.cast_bounds is None and f.rank_method != "cast"


@dataclass(frozen=True)
class ColumnJob:
    """The filters on one attribute column, with what they need."""

    #: the column's N values, in the file's dtype (float32 as CAST ships it)
    column: np.ndarray
    #: the filters on this column, in benchmark order
    filters: tuple[AttributeFilter, ...]
    #: the benchmark pool (facecast-ranked filters rank over it; NaN rows are counted in it)
    pool: np.ndarray


@dataclass(frozen=True)
class FilterResult:
    """One filter's mask over all N rows and what the report says of it."""

    mask: np.ndarray
    #: rows of the column with a value (not NaN)
    n_valued: int
    #: NaN rows of the column the filter selects (over all rows / in the pool)
    n_nan_selected: int = 0
    n_nan_pass: int = 0
    #: tied values a CAST rank slice cuts (:func:`tie_cuts`)
    tie_cuts: list[dict[str, Any]] = field(default_factory=list)


def _filter_mask(v: np.ndarray, f: AttributeFilter, pool: np.ndarray,
                 argsort: Callable[[], np.ndarray]) -> np.ndarray:
    """Mask over all N rows of one filter: CAST's comparisons for CAST tuples, in the
    column's dtype; facecast's filters as on an attribute table."""
    if _cast_ranked(f):
        return cast_rank_select(v, *_percents(f), f.ties, argsort=argsort)
    if f.cast_bounds is not None and f.mode == "abs":
        return cast_abs_mask(v, f.low, f.high)
    if f.cast_bounds is not None and f.mode == "class":
        return cast_class_mask(v, f.value)
    return filter_mask(v, pool if _facecast_ranked(f) else np.ones(len(v), bool), f)


def _percents(f: AttributeFilter) -> tuple[float, float]:
    """A CAST rank slice's percent bounds (a tuple's as written; a fraction times 100)."""
    lo, hi = (f.cast_bounds if f.cast_bounds is not None
              else (round(f.low * 100, 9), round(f.high * 100, 9)))
    return float(lo), float(hi)


def _column_masks(job: ColumnJob) -> list[FilterResult]:
    """Per filter of ``job``: its mask, NaN counts and cut ties (:class:`FilterResult`).

    At most one full ``argsort`` serves every filter on the column. A CAST slice that did
    not need it (``cast_ties: argsort``) cut no tie: :func:`cast_rank_select` sorts only
    when one is cut."""
    v = job.column
    nan = np.isnan(v) if v.dtype.kind == "f" else None
    n_nan = int(np.count_nonzero(nan)) if nan is not None else 0
    nan = nan if n_nan else None
    order: list[np.ndarray] = []
    calls = [0]

    def argsort() -> np.ndarray:         # CAST's full argsort, once per column
        calls[0] += 1
        if not order:
            order.append(np.argsort(v))
        return order[0]

    out = []
    for f in job.filters:
        before = calls[0]
        m = _filter_mask(v, f, job.pool, argsort)
        cuts: list[dict[str, Any]] = []
        if _cast_ranked(f) and (f.ties != "argsort" or calls[0] > before):
            cuts = tie_cuts(v, m, *_percents(f), order[0] if calls[0] > before else None)
        picked = m & nan if nan is not None else None
        out.append(FilterResult(
            m, len(v) - n_nan,
            int(np.count_nonzero(picked)) if picked is not None else 0,
            int(np.count_nonzero(picked & job.pool)) if picked is not None else 0, cuts))
    return out


def _check_classes(filters: Sequence[AttributeFilter]) -> None:
    """Refuse CAST class tuples whose class is a string: the numeric array never equals it
    (CAST's ``==`` would select no row)."""
    bad = [f for f in filters
           if f.mode == "class" and f.cast_bounds is not None and isinstance(f.value, str)]
    if bad:
        raise FilterError(
            "; ".join(f"cast_filters [{f.attribute}, {f.value!r}]: the class is a string but "
                      "the attribute array is numeric, so CAST's == selects no row; write "
                      "the number" for f in bad))


def _log_filter(f: AttributeFilter, r: FilterResult) -> None:
    """Log the NaN rows a filter took and the ties it cut (see the module docstring)."""
    what = f.description_line().strip()
    if r.n_nan_selected:
        log.info("%s: %d rows with a NaN %s fell inside the range (np.argsort sorts NaN "
                 "last; CAST keeps them), %d of them in the pool", what, r.n_nan_selected,
                 f.attribute, r.n_nan_pass)
    for c in r.tie_cuts:
        log.info("%s: %d rows tied at %s straddle a cut: %d inside, %d outside; %s", what,
                 c["rows"], c["value"], c["inside"], c["rows"] - c["inside"],
                 TIES_HINT if f.ties == "argsort" else "cast_ties: row_order (row order "
                 "decides, the same on every machine)")
    if _cast_ranked(f) and not r.tie_cuts:
        log.info("%s: no tie straddles a cut", what)


def _filter_report(f: AttributeFilter, r: FilterResult, pool: np.ndarray) -> dict[str, Any]:
    """One filter's entry of the subset report."""
    return {"attribute": f.attribute, "mode": f.mode,
            "rank_method": "cast" if f.cast_bounds is not None and f.mode == "rank"
            else f.rank_method,
            "bounds": list(f.cast_bounds or (f.low, f.high)),
            "n_valued": r.n_valued,
            "n_pass_all_rows": int(np.count_nonzero(r.mask)),
            "n_pass": int(np.count_nonzero(r.mask & pool)),
            "n_nan_selected": r.n_nan_selected, "n_nan_pass": r.n_nan_pass,
            "tie_cuts": r.tie_cuts}


def select_from_arrays(arrays: CastArrays, attributes_path: str | os.PathLike,
                       filters: Sequence[AttributeFilter], pool: np.ndarray, *,
                       workers: int = 1, values: dict[str, np.ndarray] | None = None
                       ) -> tuple[np.ndarray, dict[str, Any]]:
    """Mask of the benchmark's rows (pool AND every filter) and the per-filter counts.

    CAST tuples and ``rank_method: cast`` filters rank over all N rows (CAST's slice);
    facecast-ranked filters over the pool's valued rows, as on an attribute table. The
    filtered columns are read in one pass over the file, whatever the number of filters on
    them; the columns' filters run in ``workers`` threads (numpy's sorts release the GIL).
    ``values`` (a dict), when given, receives each filtered column (all N rows) for
    :func:`write_array_subset`. Logs the NaN rows each filter took and each cut tie.
    """
    missing = [f.attribute for f in filters if f.attribute not in arrays.columns]
    if missing:
        raise FilterError(f"attribute column(s) {missing} not in columns.csv; available: "
                          f"{arrays.columns}")
    clash = sorted({f.attribute for f in filters} & set(KEY_NAMES))
    if clash:
        raise FilterError(f"attribute column(s) {clash} of columns.csv have the name of a "
                          f"subset key column {list(KEY_NAMES)}: rename them in columns.csv")
    _check_classes(filters)
    pool = np.asarray(pool, bool)
    by_column: dict[str, list[int]] = {}
    for i, f in enumerate(filters):
        by_column.setdefault(f.attribute, []).append(i)
    columns = read_columns(attributes_path, [arrays.columns.index(a) for a in by_column])
    jobs = [ColumnJob(column, tuple(filters[i] for i in idx), pool)
            for column, idx in zip(columns, by_column.values(), strict=True)]
    if workers > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(max_workers=min(workers, len(jobs))) as ex:
            done = list(ex.map(_column_masks, jobs))
    else:
        done = [_column_masks(job) for job in jobs]
    results: list[FilterResult] = [FilterResult(np.empty(0, bool), 0)] * len(filters)
    for (a, idx), found, job in zip(by_column.items(), done, jobs, strict=True):
        for i, r in zip(idx, found, strict=True):
            results[i] = r
        if values is not None:
            values[a] = job.column
    mask = pool.copy()
    report: dict[str, Any] = {"n_rows": arrays.n_rows,
                              "n_pool": int(np.count_nonzero(mask)), "filters": []}
    for f, r in zip(filters, results, strict=True):
        _log_filter(f, r)
        report["filters"].append(_filter_report(f, r, pool))
        mask &= r.mask
    report["n_subset"] = int(np.count_nonzero(mask))
    return mask, report


#: Parquet page settings of ``subset.parquet`` (the values read back are the same):
#: dictionary pages only for ``split`` (unique paths and runs of identities compress better
#: and faster without), rows delta-coded, float values byte-split, no min/max statistics
#: for the two string columns (nothing filters a subset file on them)
SUBSET_ENCODING = {"row": "DELTA_BINARY_PACKED"}


def _manifest_ids(ids: Any, rows: np.ndarray, flagged: np.ndarray) -> Any:
    """``ids`` (the paths of ``rows``, an Arrow string array) with the manifest's
    ``<path>//row<n>`` (``n`` 1-based) for the rows ``flagged`` (a bool mask over all N
    rows): the ids :mod:`facecast.datasets.cast_manifest` gives ``nan_attribute`` rows."""
    hit = flagged[rows]
    if not hit.any():
        return ids
    paths = ids.filter(pa.array(hit)).to_pylist()
    new = [f"{p}{ID_SEP}row{int(r) + 1}" for p, r in zip(paths, rows[hit], strict=True)]
    return pc.replace_with_mask(ids, pa.array(hit), pa.array(new, pa.string()))


def write_array_subset(arrays: CastArrays, attributes_path: str | os.PathLike,
                       paths_path: str | os.PathLike, mask: np.ndarray,
                       filters: Sequence[AttributeFilter], report: dict[str, Any],
                       subset_path: str | os.PathLike, description_path: str | os.PathLike, *,
                       provenance: Mapping[str, Any] | None = None,
                       values: Mapping[str, np.ndarray] | None = None,
                       nan_rows: np.ndarray | None = None) -> dict[str, Any]:
    """``subset.parquet`` (``image_id``, ``path``, ``identity``, ``split``, ``row``, each
    filtered attribute) and ``description.txt`` of the selected rows; return ``report``.

    ``path`` is the row's path in ``paths.npy`` (what CAST's ``FilterClass.run`` returns);
    ``image_id`` is the same path, or the manifest's ``<path>//row<n>`` for the
    ``nan_rows`` (status ``nan_attribute``). ``values``: filtered columns already read
    (:func:`select_from_arrays`); others are read from the file. The provenance records
    :func:`argsort_platform`."""
    rows = np.flatnonzero(mask)
    image_id, path, ident, heads = [], [], [], []
    at = 0
    # span by span (a map of each span alone): no N-long copy, no whole-file map resident
    for ids, folders, first, head_keys in read_path_blocks(paths_path, rows):
        path.append(ids)
        if nan_rows is not None:
            ids = _manifest_ids(ids, rows[at:at + len(ids)], nan_rows)
        at += len(ids)
        image_id.append(ids)
        ident.append(folders)
        heads.append((folders, first, head_keys))     # each identity run once
    table = {"image_id": pa.chunked_array(image_id, type=pa.string()),
             "path": pa.chunked_array(path, type=pa.string()),
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
                 "filters": [{k: v for k, v in vars(f).items()} for f in filters],
                 "argsort_platform": argsort_platform()})
    encoding = dict(SUBSET_ENCODING)
    encoding.update({a: "BYTE_STREAM_SPLIT" for a in attrs if a not in KEY_NAMES})
    write_parquet(pa.table(table), subset_path, provenance=prov,
                  metadata={"facecast.subset_report": json.dumps(report, default=str)},
                  use_dictionary=["split"], column_encoding=encoding,
                  write_statistics=[c for c in table
                                    if c not in ("image_id", "path", "identity")])
    write_text(description_path, describe_filters(filters))
    return report


def array_pool(manifest_path: str | os.PathLike, statuses: Sequence[str], *,
               cast_nan: str = "cast") -> tuple[np.ndarray, np.ndarray]:
    """Rows of a ``cast_arrays`` manifest that may enter a benchmark, in array row order:
    status in ``statuses`` (with ``cast_nan: cast``, ``nan_attribute`` wherever ``ok``
    is), not excluded; and the rows of status ``nan_attribute`` not excluded, in or out.
    Reads three columns only; the status test runs on each chunk's dictionary (a handful
    of values), then maps its indices."""
    import pyarrow.parquet as pq

    allowed = list(statuses) + ([NAN_STATUS] if cast_nan == "cast" and "ok" in statuses
                                else [])
    t = pq.read_table(manifest_path, columns=["status", "exclude", "row"],
                      read_dictionary=["status"], use_threads=False)
    keep, nan = np.empty(t.num_rows, bool), np.empty(t.num_rows, bool)
    at = 0
    for chunk in t.column("status").chunks:
        values = np.array(chunk.dictionary.to_pylist(), dtype=object)
        ok = np.append(benchmark_pool(values, np.zeros(len(values), bool), allowed), False)
        is_nan = np.append(values == NAN_STATUS, False)
        idx = chunk.indices.fill_null(len(ok) - 1).to_numpy(zero_copy_only=False)
        keep[at:at + len(chunk)] = ok[idx]
        nan[at:at + len(chunk)] = is_nan[idx]
        at += len(chunk)
    included = ~t.column("exclude").fill_null(False).to_numpy(zero_copy_only=False)
    rows = t.column("row").to_numpy()
    pool, nan_rows = np.zeros(len(rows), bool), np.zeros(len(rows), bool)
    pool[rows] = keep & included
    nan_rows[rows] = nan & included
    return pool, nan_rows


def _nan_report(mode: str, pool: np.ndarray, nan_rows: np.ndarray,
                mask: np.ndarray) -> dict[str, Any]:
    """The subset report's ``cast_nan`` entry, logged: the ``nan_attribute`` rows (not
    excluded), how many are in the pool and in the subset."""
    out = {"mode": mode, "n_rows": int(np.count_nonzero(nan_rows)),
           "n_pool": int(np.count_nonzero(nan_rows & pool)),
           "n_subset": int(np.count_nonzero(nan_rows & mask))}
    if out["n_rows"]:
        log.info("cast_nan: %s - %d rows (not excluded) have a NaN or infinite attribute "
                 "cell (status nan_attribute): %d in the pool, %d in the subset%s", mode,
                 out["n_rows"], out["n_pool"], out["n_subset"],
                 " (as CAST: each filter decides on its own column)" if mode == "cast"
                 else " (kept out of every benchmark)")
    return out


def build_array_subset(spec: Mapping[str, Any], manifest_path: str | os.PathLike,
                       bench_cfg: Mapping[str, Any], subset_path: str | os.PathLike,
                       description_path: str | os.PathLike, *, bench: str,
                       statuses: Sequence[str], workers: int = 1,
                       provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A benchmark of a ``cast_arrays`` dataset from its arrays (rule
    ``cast_benchmark_subset``): ``filters`` then ``cast_filters``, ANDed, over the pool
    ``cast_nan`` gives (:func:`array_pool`); return the counts."""
    from facecast.analysis.filtering import parse_filters
    from facecast.datasets.cast_arrays import open_cast_arrays

    cast_nan = str(bench_cfg.get("cast_nan", "cast"))
    if cast_nan not in CAST_NAN_MODES:
        raise FilterError(f"benchmarks.{bench}.cast_nan: {cast_nan!r} must be one of "
                          f"{list(CAST_NAN_MODES)}")
    arrays = open_cast_arrays(spec)
    filters = (parse_filters(bench_cfg.get("filters") or [], bench,
                             bench_cfg.get("rank_method", "facecast"))
               + parse_cast_filters(bench_cfg.get("cast_filters") or [], bench,
                                    bench_cfg.get("cast_ties", "argsort")))
    pool, nan_rows = array_pool(manifest_path, statuses, cast_nan=cast_nan)
    values: dict[str, np.ndarray] = {}
    mask, report = select_from_arrays(arrays, Path(str(spec["attributes"])), filters, pool,
                                      workers=workers, values=values)
    report["cast_nan"] = _nan_report(cast_nan, pool, nan_rows, mask)
    return write_array_subset(arrays, Path(str(spec["attributes"])), Path(str(spec["paths"])),
                              mask, filters, report, subset_path, description_path,
                              provenance={**(provenance or {}), "cast_nan": cast_nan},
                              values=values, nan_rows=nan_rows)
