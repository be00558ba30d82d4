"""CAST filtering: a benchmark is a list of ANDed attribute filters over a pool of images.

A filter is a mapping ``{attribute, mode, low, high}`` or ``{attribute, mode: class, value}``:

* ``rank``: keep images whose percentile rank of ``attribute`` lies in ``[low, high]``
  (fractions in [0, 1]; ``low: 0.9, high: 1.0`` is the top 10 %). How ranks are formed is
  the filter's ``rank_method`` (default: the benchmark's ``rank_method``, else
  ``facecast``):

  - ``facecast`` (default): ranks over the benchmark pool's images that have a value of
    that attribute (NaN = no value, never selected), ``(average rank - 1) / (n - 1)``: the
    smallest value has 0, the largest 1, tied values share their average rank, so a filter
    never splits a tie (all tied images are in or all out; the top 10 % of a 70/30 binary
    attribute is empty, and ``[0.3, 1.0]`` keeps exactly its 30 %). A pool with one valued
    image gives it 0.5. Bounds are inclusive, so ``[0, 1]`` keeps every valued image.
  - ``cast``: CAST's current ``filter.py`` selection, reproduced exactly: ``ranked =
    np.argsort(values)`` over the WHOLE attribute table (every row, whatever its status;
    NaN sorts last), then the positional slice ``ranked[round(N * lo / 100):round(N * hi /
    100) - 1]`` with CAST's percent bounds ``lo = 100 * low``, ``hi = 100 * high`` and
    ``N`` the table's row count (Python's ``round``: halves to even). Ties are split by
    position, the slice drops the last position (``[0.9, 1.0]`` leaves out the single
    highest row), and a top slice reaches into NaN rows when the column has NaNs. The
    selection is then ANDed with the pool like every filter.
* ``value``: keep ``low <= value <= high`` (raw values; NaN never selected).
* ``class``: keep ``value == filter value`` (equality; NaN never selected).

``value`` and ``class`` compare in the column's own float type: on a float32 column
(CAST's arrays, a float32 attribute column) the bounds and the class are first rounded to
float32, so ``value: 0.7`` matches the stored ``float32(0.7)`` (which is
0.699999988...; a float64 comparison would miss it), and a number beyond float32's range
is +-inf. Integer and boolean columns compare as float64.

(An older CAST, ``dataset_builder/dataset_splitter.py``, turned the rank positions into
value bounds and kept ``lower_bound < value < upper_bound`` with strict inequalities;
CAST's current code selects positions as above.)

Each filter is evaluated independently and the masks are ANDed, as CAST does. The pool:
rows whose faces ``status`` is in ``mining.statuses`` (default ``[ok, aligned_input]``;
``aligned_input`` only occurs with ``faces.detector: none``; add ``fallback``
for ``faces.fallback: center_crop`` sets) and ``exclude`` false (training identities never
enter a benchmark).

``description.txt`` is written in CAST's format, one line per filter:
``attribute: <name> lower_quartile: <low> upper_quartile: <high>`` (a class filter writes
its value as both bounds). Numbers are written as CAST's published files write them: a
whole number without a decimal point (``1``, not ``1.0``), a zero bound as ``0.0`` (CAST's
``CC11/random/description.txt``), any other number as Python writes it (``0.9``). A
benchmark without filters (``random``) gets the file CAST published for its own random
benchmark, a no-op filter written twice (:data:`CAST_NO_OP_DESCRIPTION`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from facecast.analysis.order_stats import sorted_at
from facecast.analysis.pool import DEFAULT_STATUSES, benchmark_pool
from facecast.analysis.ranks import average_ranks
from facecast.analysis.template_level import table_level
from facecast.io.atomic import write_text
from facecast.io.parquet_io import write_parquet

KEY_COLUMNS = ["image_id", "identity", "split"]
#: the key columns of a subset of templates (``analysis.level: template``)
TEMPLATE_SUBSET_KEYS = ["template_id", "identity", "split", "n_images"]
RANK_METHODS = ("facecast", "cast")
#: CAST's published ``CC11/random/description.txt``, byte for byte (its no-op filter)
CAST_NO_OP_DESCRIPTION = ("attribute: Eyeglasses lower_quartile: 0.0 upper_quartile: 1\n"
                          "attribute: Eyeglasses lower_quartile: 0.0 upper_quartile: 1\n")


#: the line a benchmark with CAST rank tuples adds after the CAST-format lines (CAST's
#: slice drops the last position of every rank range, so ``[x, rank, 90, 100]`` misses
#: the top row)
CAST_RANK_NOTE = ("# facecast: rank tuples select argsort(column)[round(N*lo/100):"
                  "round(N*hi/100)-1] over all N rows, as CAST's filter.py: the last "
                  "position of each range (the top-ranked row when hi is 100) is dropped\n")


class FilterError(ValueError):
    """A benchmark's filters are malformed or name a column the attribute table lacks."""


def cast_number(x: Any, *, zero: str = "0.0") -> str:
    """A bound as CAST's published files write it.

    A whole number without a decimal point (``1``, not ``1.0``), a zero bound as ``zero``
    (``0.0``, as in CAST's ``CC11/random/description.txt``), any other number as Python
    writes it (``0.9``); strings and booleans as they are.
    """
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)):
        return str(x)
    if float(x) == 0.0:
        return zero
    if float(x).is_integer():
        return str(int(x))
    return str(x)


@dataclass(frozen=True)
class AttributeFilter:
    """One CAST filter (see the module docstring)."""

    attribute: str
    mode: str
    low: Any = None
    high: Any = None
    value: Any = None
    rank_method: str = "facecast"
    #: the bounds as a CAST tuple gave them (percents for ``rank``), written to
    #: ``description.txt`` as given; None for facecast's own ``filters``
    cast_bounds: tuple[Any, Any] | None = None
    #: how a CAST slice cuts tied values at its ends: ``argsort`` (numpy's default sort, as
    #: CAST) or ``row_order`` (stable; no argsort of the rows)
    ties: str = "argsort"

    @classmethod
    def from_config(cls, spec: Mapping[str, Any], bench: str = "",
                    rank_method: str = "facecast") -> AttributeFilter:
        """Parse and check a filter mapping; errors name the benchmark and the filter.

        ``rank_method`` is the benchmark's default; a filter's own ``rank_method`` wins.
        """
        where = f"benchmark {bench!r}: filter {dict(spec)!r}"
        if "attribute" not in spec:
            raise FilterError(f"{where} has no 'attribute'")
        mode = spec.get("mode", "rank")
        if mode not in ("rank", "value", "class"):
            raise FilterError(f"{where}: mode must be rank, value or class")
        method = spec.get("rank_method", rank_method) or "facecast"
        if method not in RANK_METHODS:
            raise FilterError(f"{where}: rank_method must be one of {list(RANK_METHODS)}")
        if mode == "class":
            if "value" not in spec:
                raise FilterError(f"{where}: a class filter needs 'value'")
            return cls(str(spec["attribute"]), mode, value=spec["value"])
        if "low" not in spec or "high" not in spec:
            raise FilterError(f"{where}: a {mode} filter needs 'low' and 'high'")
        low, high = spec["low"], spec["high"]
        if low > high:
            raise FilterError(f"{where}: low > high")
        if mode == "rank" and not (0 <= low <= 1 and 0 <= high <= 1):
            raise FilterError(f"{where}: rank bounds are fractions in [0, 1]")
        return cls(str(spec["attribute"]), mode, low=low, high=high,
                   rank_method=method if mode == "rank" else "facecast")

    def description_line(self) -> str:
        """This filter's line of CAST's ``description.txt`` (with the newline)."""
        if self.mode == "class":
            lo = hi = cast_number(self.value, zero="0")
        elif self.cast_bounds is not None:
            lo, hi = (cast_number(b) for b in self.cast_bounds)
        else:
            lo, hi = cast_number(self.low), cast_number(self.high)
        return f"attribute: {self.attribute} lower_quartile: {lo} upper_quartile: {hi}\n"


def parse_filters(specs: Sequence[Mapping[str, Any]], bench: str = "",
                  rank_method: str = "facecast") -> list[AttributeFilter]:
    """Parse a benchmark's filter list (``rank_method``: the benchmark's default)."""
    return [AttributeFilter.from_config(s, bench, rank_method) for s in specs or []]


def describe_filters(filters: Sequence[AttributeFilter]) -> str:
    """The text of CAST's ``description.txt`` for ``filters`` (CAST's no-op for none)."""
    if not filters:
        return CAST_NO_OP_DESCRIPTION
    text = "".join(f.description_line() for f in filters)
    if any(f.cast_bounds is not None and f.mode == "rank" for f in filters):
        text += CAST_RANK_NOTE
    return text


def percentile_ranks(values: np.ndarray) -> np.ndarray:
    """Percentile ranks as fractions in [0, 1] (average ranks for ties; NaN stays NaN)."""
    v = np.asarray(values, dtype=np.float64)
    out = np.full(v.shape, np.nan)
    valid = ~np.isnan(v)
    n = int(valid.sum())
    if n == 1:
        out[valid] = 0.5
    elif n > 1:
        out[valid] = (average_ranks(v[valid]) - 1.0) / (n - 1.0)
    return out


def _percent(fraction: float) -> float:
    """A rank fraction as CAST's percent bound (0.9 -> 90.0, without float noise)."""
    return round(float(fraction) * 100.0, 9)


def cast_rank_mask(values: np.ndarray, low: float, high: float,
                   ties: str = "argsort") -> np.ndarray:
    """CAST's positional rank selection over the whole array (see the module docstring),
    in a float column's own dtype (:func:`numeric_column`), as CAST sorts it."""
    return cast_rank_select(numeric_column(values), _percent(low), _percent(high), ties)


def _stable_slice(v: np.ndarray, start: int, stop: int, first: Any, last: Any) -> np.ndarray:
    """Mask of ``np.argsort(v, kind="stable")[start:stop]`` in linear time, given the values
    at sorted positions ``start`` and ``stop - 1`` (NaN last, tied rows in row order)."""
    nan = np.isnan(v) if v.dtype.kind == "f" else np.zeros(len(v), bool)

    def group(x: Any) -> tuple[np.ndarray, int]:    # rows equal to x, rows sorted before
        if x != x:                                    # NaN
            return np.flatnonzero(nan), int(len(v) - nan.sum())
        return np.flatnonzero(v == x), int(np.count_nonzero(v < x))

    mask = np.zeros(len(v), bool)
    lo_rows, lo_before = group(first)
    if first == last or (first != first and last != last):
        mask[lo_rows[start - lo_before:stop - lo_before]] = True
        return mask
    hi_rows, hi_before = group(last)
    mask[lo_rows[start - lo_before:]] = True
    mask[hi_rows[:stop - hi_before]] = True
    with np.errstate(invalid="ignore"):
        mask |= (v > first) & ((v < last) if last == last else ~nan)
    return mask


def cast_rank_select(values: np.ndarray, lo_pct: float, hi_pct: float,
                     ties: str = "argsort", *,
                     argsort: Callable[[], np.ndarray] | None = None) -> np.ndarray:
    """Mask of ``np.argsort(values)[round(N*lo/100):round(N*hi/100)-1]`` (CAST's slice).

    Exactly CAST's selection, in the array's own dtype (float32 as CAST ships it: a float64
    copy can order ties differently). Fast path: when the values just inside and just
    outside both ends of the slice differ (no tie is cut) and the slice holds no NaN, the
    slice is every value between its end values, read from the sorted positions of floats
    (:func:`facecast.analysis.order_stats.sorted_at`), a value sort of 32- and 64-bit
    integers or ``np.partition`` of others; otherwise the full
    ``np.argsort`` decides, as in CAST. ``ties="row_order"`` cuts a tie in row order
    instead (``np.argsort(kind="stable")``) without sorting rows: numpy's default order of
    tied values is an implementation detail of its sort.
    ``argsort``, when given, returns ``np.argsort(values)`` (a cache shared by the slices of
    one column, so a column is sorted at most once).
    """
    v = np.asarray(values)
    n = len(v)
    # Python slice semantics, as CAST's slice: hi = 0 gives stop -1, i.e. all but the last
    start, stop, _ = slice(round(n * lo_pct / 100), round(n * hi_pct / 100) - 1).indices(n)
    mask = np.zeros(n, bool)
    if stop <= start:
        return mask
    ends = [k for k in (start - 1, start, stop - 1, stop) if 0 <= k < n]
    if v.dtype.kind == "f" and v.dtype.itemsize >= 4:
        # the values at the slice's ends without a full sort (order_stats), as numpy's SIMD
        # sort of 32- and 64-bit types gives them (0.4 s for 42M float32; np.partition 0.9 s)
        part = sorted_at(v, ends)
    elif v.dtype.kind in "iu" and v.dtype.itemsize >= 4:
        part = np.sort(v)
    else:
        part = np.partition(v, sorted(set(ends)))
    first, last = part[start], part[stop - 1]
    tie_cut = ((start > 0 and not part[start - 1] < first)
               or (stop < n and not (last < part[stop] or np.isnan(part[stop]))))
    if not tie_cut and not np.isnan(last):
        mask[:] = (v >= first) & (v <= last)
        return mask
    if ties == "row_order":
        return _stable_slice(v, start, stop, first, last)
    order = argsort() if argsort is not None else np.argsort(v)
    mask[order[start:stop]] = True             # CAST: default kind, NaN sorted last
    return mask


def numeric_column(values: np.ndarray) -> np.ndarray:
    """A column as the filters compare it: a float column in its own dtype (float32 as
    CAST ships it), any other as float64."""
    v = np.asarray(values)
    return v if v.dtype.kind == "f" else v.astype(np.float64)


def as_column_number(x: Any, dtype: np.dtype) -> np.floating:
    """``x`` as a number of a float column's ``dtype``: float32 rounds it to its float32
    image (``0.7`` -> ``float32(0.7)``); beyond the type's range it is +-inf."""
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float64).astype(dtype)[()]


def filter_mask(values: np.ndarray, pool: np.ndarray, f: AttributeFilter) -> np.ndarray:
    """Boolean mask of the rows that pass ``f`` (only pool rows can pass).

    ``values`` covers the whole attribute table (``cast`` ranks over all of it). ``value``
    and ``class`` compare in the column's float type (:func:`numeric_column`,
    :func:`as_column_number`); ``abs`` in numpy's promotion of it, as CAST.
    """
    if f.mode == "class":
        if isinstance(f.value, str):
            vals = np.asarray(values).astype(str)
            return pool & (vals == f.value)
        v = numeric_column(values)
        return pool & (v == as_column_number(f.value, v.dtype))
    v = numeric_column(values)
    if f.mode == "abs":                      # CAST's abs: strict bounds
        with np.errstate(invalid="ignore", over="ignore"):
            return pool & (v > f.low) & (v < f.high)
    if f.mode == "rank":
        if f.rank_method == "cast":
            return pool & cast_rank_mask(v, f.low, f.high, f.ties)
        ranks = np.full(v.shape, np.nan)
        ranks[pool] = percentile_ranks(v[pool])
        with np.errstate(invalid="ignore"):
            return pool & (ranks >= f.low) & (ranks <= f.high)
    lo, hi = as_column_number(f.low, v.dtype), as_column_number(f.high, v.dtype)
    with np.errstate(invalid="ignore"):
        return pool & (v >= lo) & (v <= hi)


def select_subset(table: pd.DataFrame | pa.Table, filters: Sequence[AttributeFilter], *,
                  statuses: Sequence[str] = DEFAULT_STATUSES
                  ) -> tuple[np.ndarray, dict[str, Any]]:
    """Mask of the rows in the benchmark, and counts: pool size, per-filter pass counts."""
    if isinstance(table, pd.DataFrame):
        table = pa.Table.from_pandas(table, preserve_index=False)
    missing = [f.attribute for f in filters if f.attribute not in table.column_names]
    if missing:
        raise FilterError(f"attribute column(s) {missing} not in the attribute table; "
                          f"available: {sorted(table.column_names)}")
    status = table.column("status").to_numpy(zero_copy_only=False)
    exclude = table.column("exclude").fill_null(False).to_numpy(zero_copy_only=False)
    pool = benchmark_pool(status, exclude, statuses)
    mask = pool.copy()
    report: dict[str, Any] = {"n_rows": int(len(pool)), "n_pool": int(pool.sum()),
                              "statuses": list(statuses), "filters": []}
    for f in filters:
        col = table.column(f.attribute)
        if f.mode == "class" and (pa.types.is_string(col.type)
                                  or pa.types.is_large_string(col.type)):
            vals = col.fill_null("").to_numpy(zero_copy_only=False)
        else:
            keep = pa.types.is_float32(col.type)
            vals = (col if keep else col.cast(pa.float64())).fill_null(np.nan).to_numpy(
                zero_copy_only=False)         # a float32 column compares in float32
        m = filter_mask(vals, pool, f)
        n_valid = int((pool & ~pd.isna(vals)).sum()) if f.mode != "class" else int(pool.sum())
        report["filters"].append({"attribute": f.attribute, "mode": f.mode,
                                  "rank_method": f.rank_method,
                                  "n_valued": n_valid, "n_pass": int(m.sum())})
        mask &= m
    report["n_subset"] = int(mask.sum())
    return mask, report


def build_subset(attributes_path: str | os.PathLike, filters: Sequence[AttributeFilter],
                 subset_path: str | os.PathLike, description_path: str | os.PathLike, *,
                 statuses: Sequence[str] = DEFAULT_STATUSES,
                 provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Filter the attribute table into ``subset.parquet`` + ``description.txt``; return counts.

    Reads only the key columns and the filtered attributes. The subset keeps ``image_id``,
    ``identity``, ``split`` and each filtered attribute's value. A template attribute table
    (provenance ``level: template``, :mod:`facecast.analysis.template_level`) gives a
    subset of templates: ``template_id`` instead of ``image_id``, plus ``n_images``; its
    pool is the templates with status ``ok`` (``statuses`` name image statuses, which
    decided the template's status already). The report and provenance say the ``level``.
    """
    level = table_level(attributes_path)
    keys = KEY_COLUMNS if level == "image" else TEMPLATE_SUBSET_KEYS
    if level == "template":
        statuses = ("ok",)
    attrs = list(dict.fromkeys(f.attribute for f in filters))
    schema = pq.read_schema(attributes_path)
    missing = [a for a in attrs if a not in schema.names]
    if missing:
        raise FilterError(f"attribute column(s) {missing} not in {attributes_path}; available: "
                          f"{sorted(n for n in schema.names if n not in keys)}")
    cols = keys + ["exclude", "status"] + [a for a in attrs if a not in keys]
    table = pq.read_table(attributes_path, columns=cols)
    mask, report = select_subset(table, filters, statuses=statuses)
    report["level"] = level
    if report["n_pool"] == 0:  # issue 16.3: an empty pool must never pass silently
        import logging

        logging.getLogger(__name__).warning(
            "EMPTY BENCHMARK POOL: none of the %d rows of %s may enter a benchmark (status "
            "and exclude); every benchmark of this dataset is empty (check the manifest's "
            "exclude column and statuses)", report["n_rows"], attributes_path)
    subset = table.filter(pa.array(mask)).select(keys + [a for a in attrs if a not in keys])
    prov = dict(provenance or {})
    prov.update({"stage": "benchmark_subset", "filters": [vars(f) for f in filters],
                 "statuses": list(statuses), "level": level})
    n_ids = len(pc.unique(subset.column("identity"))) if subset.num_rows else 0
    report["n_identities"] = int(n_ids)
    write_parquet(subset, subset_path, provenance=prov,
                  metadata={"facecast.subset_report": json.dumps(report)})
    write_text(description_path, describe_filters(filters))
    return report
