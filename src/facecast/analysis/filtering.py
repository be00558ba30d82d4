"""CAST filtering: a benchmark is a list of ANDed attribute filters over a pool of images.

A filter is a mapping ``{attribute, mode, low, high}`` or ``{attribute, mode: class, value}``:

* ``rank``: keep images whose percentile rank of ``attribute`` lies in ``[low, high]``
  (fractions in [0, 1]; ``low: 0.9, high: 1.0`` is the top 10 %). Ranks are computed over
  the benchmark pool's images that have a value of that attribute (NaN = no value, never
  selected) as ``(average rank - 1) / (n - 1)``: the smallest value has 0, the largest 1,
  tied values share their average rank, so a filter never splits a tie (all tied images are
  in or all out). A pool with one valued image gives it 0.5.
* ``value``: keep ``low <= value <= high`` (raw values; NaN never selected).
* ``class``: keep ``value == filter value`` (equality; NaN never selected).

Bounds are inclusive (CAST's own code uses strict inequalities; with inclusive bounds the
``[0, 1]`` rank filter keeps every valued image). Each filter is evaluated on the whole pool
independently and the masks are ANDed, as CAST does. The pool: rows with ``status == ok``
and ``exclude`` false (training identities never enter a benchmark).

``description.txt`` is written in CAST's format, one line per filter:
``attribute: <name> lower_quartile: <low> upper_quartile: <high>`` (a class filter writes
its value as both bounds; numbers are written as Python writes them, so ``1`` stays ``1``
and ``0.0`` stays ``0.0``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from scipy.stats import rankdata

from facecast.atomic import write_text
from facecast.parquet_io import write_parquet

KEY_COLUMNS = ["image_id", "identity", "split"]


class FilterError(ValueError):
    """A benchmark's filters are malformed or name a column the attribute table lacks."""


@dataclass(frozen=True)
class AttributeFilter:
    """One CAST filter (see the module docstring)."""

    attribute: str
    mode: str
    low: Any = None
    high: Any = None
    value: Any = None

    @classmethod
    def from_config(cls, spec: Mapping[str, Any], bench: str = "") -> AttributeFilter:
        """Parse and check a filter mapping; errors name the benchmark and the filter."""
        where = f"benchmark {bench!r}: filter {dict(spec)!r}"
        if "attribute" not in spec:
            raise FilterError(f"{where} has no 'attribute'")
        mode = spec.get("mode", "rank")
        if mode not in ("rank", "value", "class"):
            raise FilterError(f"{where}: mode must be rank, value or class")
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
        return cls(str(spec["attribute"]), mode, low=low, high=high)

    def description_line(self) -> str:
        """This filter's line of CAST's ``description.txt`` (with the newline)."""
        lo, hi = (self.value, self.value) if self.mode == "class" else (self.low, self.high)
        return f"attribute: {self.attribute} lower_quartile: {lo} upper_quartile: {hi}\n"


def parse_filters(specs: Sequence[Mapping[str, Any]], bench: str = "") -> list[AttributeFilter]:
    """Parse a benchmark's filter list."""
    return [AttributeFilter.from_config(s, bench) for s in specs or []]


def describe_filters(filters: Sequence[AttributeFilter]) -> str:
    """The text of CAST's ``description.txt`` for ``filters`` (empty for no filters)."""
    return "".join(f.description_line() for f in filters)


def percentile_ranks(values: np.ndarray) -> np.ndarray:
    """Percentile ranks as fractions in [0, 1] (average ranks for ties; NaN stays NaN)."""
    v = np.asarray(values, dtype=np.float64)
    out = np.full(v.shape, np.nan)
    valid = ~np.isnan(v)
    n = int(valid.sum())
    if n == 1:
        out[valid] = 0.5
    elif n > 1:
        out[valid] = (rankdata(v[valid]) - 1.0) / (n - 1.0)
    return out


def filter_mask(values: np.ndarray, pool: np.ndarray, f: AttributeFilter) -> np.ndarray:
    """Boolean mask of the rows that pass ``f`` (only pool rows can pass)."""
    if f.mode == "class":
        if isinstance(f.value, str):
            vals = np.asarray(values).astype(str)
            return pool & (vals == f.value)
        v = np.asarray(values, dtype=np.float64)
        return pool & (v == float(f.value))
    v = np.asarray(values, dtype=np.float64)
    if f.mode == "rank":
        ranks = np.full(v.shape, np.nan)
        ranks[pool] = percentile_ranks(v[pool])
        v = ranks
    with np.errstate(invalid="ignore"):
        return pool & (v >= f.low) & (v <= f.high)


def benchmark_pool(status: np.ndarray, exclude: np.ndarray) -> np.ndarray:
    """Rows that may enter a benchmark: status ``ok`` and not excluded."""
    return (np.asarray(status).astype(str) == "ok") & ~np.asarray(exclude).astype(bool)


def select_subset(table: pd.DataFrame | pa.Table, filters: Sequence[AttributeFilter]
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
    pool = benchmark_pool(status, exclude)
    mask = pool.copy()
    report: dict[str, Any] = {"n_rows": int(len(pool)), "n_pool": int(pool.sum()), "filters": []}
    for f in filters:
        col = table.column(f.attribute)
        if f.mode == "class" and pa.types.is_string(col.type):
            vals = col.fill_null("").to_numpy(zero_copy_only=False)
        else:
            vals = col.cast(pa.float64()).fill_null(np.nan).to_numpy(zero_copy_only=False)
        m = filter_mask(vals, pool, f)
        n_valid = int((pool & ~pd.isna(vals)).sum()) if f.mode != "class" else int(pool.sum())
        report["filters"].append({"attribute": f.attribute, "mode": f.mode,
                                  "n_valued": n_valid, "n_pass": int(m.sum())})
        mask &= m
    report["n_subset"] = int(mask.sum())
    return mask, report


def build_subset(attributes_path: str | os.PathLike, filters: Sequence[AttributeFilter],
                 subset_path: str | os.PathLike, description_path: str | os.PathLike, *,
                 provenance: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Filter the attribute table into ``subset.parquet`` + ``description.txt``; return counts.

    Reads only the key columns and the filtered attributes. The subset keeps ``image_id``,
    ``identity``, ``split`` and each filtered attribute's value.
    """
    attrs = list(dict.fromkeys(f.attribute for f in filters))
    schema = pq.read_schema(attributes_path)
    missing = [a for a in attrs if a not in schema.names]
    if missing:
        raise FilterError(f"attribute column(s) {missing} not in {attributes_path}; available: "
                          f"{sorted(n for n in schema.names if n not in KEY_COLUMNS)}")
    cols = KEY_COLUMNS + ["exclude", "status"] + [a for a in attrs if a not in KEY_COLUMNS]
    table = pq.read_table(attributes_path, columns=cols)
    mask, report = select_subset(table, filters)
    subset = table.filter(pa.array(mask)).select(
        KEY_COLUMNS + [a for a in attrs if a not in KEY_COLUMNS])
    prov = dict(provenance or {})
    prov.update({"stage": "benchmark_subset", "filters": [vars(f) for f in filters]})
    n_ids = len(pc.unique(subset.column("identity"))) if subset.num_rows else 0
    report["n_identities"] = int(n_ids)
    write_parquet(subset, subset_path, provenance=prov,
                  metadata={"facecast.subset_report": json.dumps(report)})
    write_text(description_path, describe_filters(filters))
    return report
