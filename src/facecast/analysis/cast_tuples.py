"""CAST's filter tuples and masks that reproduce CAST's comparisons: what
:mod:`facecast.analysis.cast_filters` runs over a ``cast_arrays`` dataset's columns.

:func:`parse_cast_filter` turns ``[attribute, class]`` / ``[attribute, rank | abs, lo, hi]``
(the tuples of CAST's ``run.py``, as written) into an
:class:`~facecast.analysis.filtering.AttributeFilter`; :func:`cast_abs_mask` reproduces
CAST ``dataset_builder/filter.py`` ``FilterClass.make_range_mask`` (style ``abs``) and
:func:`cast_class_mask` ``FilterClass.make_classification_mask`` (numpy's promotion of the
column's dtype decides, as in CAST); :func:`tie_cuts` says which tied values a rank slice
cuts, and :func:`argsort_platform` what decided numpy's order of them on this machine.
Equality with CAST is tested on CAST's recorded outputs
(``tests/data/reference/cast/``).
"""

from __future__ import annotations

import platform
from collections.abc import Sequence
from functools import cache
from typing import Any

import numpy as np

from facecast.analysis.filtering import AttributeFilter, FilterError
from facecast.analysis.order_stats import sorted_at

#: ``benchmarks.<bench>.cast_nan``: ``cast`` (CAST's selection: rows with a NaN cell stay
#: in the pool, each filter decides on its own column) or ``drop`` (out of every benchmark)
CAST_NAN_MODES = ("cast", "drop")
#: SIMD targets of numpy's sorts (x86-simd-sort on x86-64, Highway's vqsort on aarch64):
#: which of them the CPU has decides numpy's default order of tied values
SORT_SIMD = ("AVX2", "AVX512_SKX", "AVX512_ICL", "AVX512_SPR", "ASIMD", "SVE")
#: the hint logged with a tie cut by numpy's argsort
TIES_HINT = ("numpy's argsort chose which (the order of tied values depends on the NumPy "
             "version and the CPU's sort kernel: another machine may keep other rows); "
             "cast_ties: row_order cuts ties in row order, the same on every machine")


def parse_cast_filter(spec: Sequence[Any], bench: str = "", i: int = 0,
                      ties: str = "argsort") -> AttributeFilter:
    """One CAST tuple as an :class:`AttributeFilter`; errors name the benchmark and tuple."""
    where = f"benchmarks.{bench}.cast_filters[{i}]"
    if not isinstance(spec, (list, tuple)) or len(spec) not in (2, 4):
        raise FilterError(f"{where}: {spec!r} is not a CAST tuple: [attribute, class] or "
                          "[attribute, rank | abs, low, high]")
    attr = str(spec[0])
    if len(spec) == 2:     # the class as both bounds marks it a CAST tuple (CAST's ==)
        return AttributeFilter(attr, "class", value=spec[1], cast_bounds=(spec[1], spec[1]))
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


@cache
def argsort_platform() -> dict[str, Any]:
    """What decides ``np.argsort``'s default order of tied values here (recorded in every
    subset's provenance): the NumPy version, the CPU architecture, the sort-relevant SIMD
    features (:data:`SORT_SIMD`) numpy found enabled on the CPU, and numpy's compiled
    dispatch targets."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:                                  # NumPy 1.x
        from numpy.core import _multiarray_umath as umath  # type: ignore[no-redef]
    found = getattr(umath, "__cpu_features__", {})
    return {"numpy": np.__version__, "machine": platform.machine(),
            "sort_simd": [f for f in SORT_SIMD if found.get(f)],
            "dispatch": list(getattr(umath, "__cpu_dispatch__", []))}


def cast_abs_mask(column: np.ndarray, lower_range: Any, upper_range: Any) -> np.ndarray:
    """CAST's ``abs`` mask (reproduces CAST ``dataset_builder/filter.py``
    ``FilterClass.make_range_mask``, style ``abs``): strict bounds,
    compared in numpy's promotion of the column's dtype with the bounds as written (float32
    and a Python number: the number's float32 image); NaN is never inside. A bound beyond
    float32's range compares as infinity, as in CAST (numpy's overflow warning silenced)."""
    with np.errstate(over="ignore"):
        lower_mask = column > lower_range
        upper_mask = column < upper_range
    return lower_mask * upper_mask


def cast_class_mask(column: np.ndarray, filter_class: Any) -> np.ndarray:
    """CAST's class mask (reproduces CAST ``dataset_builder/filter.py``
    ``FilterClass.make_classification_mask``):
    ``column == filter_class`` in numpy's promotion (float32: the class's float32 image)."""
    with np.errstate(over="ignore"):
        return column == filter_class


def tie_cuts(v: np.ndarray, m: np.ndarray, lo_pct: float, hi_pct: float,
             order: np.ndarray | None = None) -> list[dict[str, Any]]:
    """The tied values CAST's rank slice ``m`` of ``v`` (percents ``lo_pct``, ``hi_pct``:
    sorted positions ``round(N*lo/100) .. round(N*hi/100) - 2``) cuts: each value at a cut
    with rows both inside and outside the slice (``"NaN"``: the NaN rows, tied in the sort,
    sorted last), as ``{value, rows, inside}``, lowest cut first. The values at the cut
    positions are read from ``order`` (``np.argsort(v)``) when given, else found with
    :func:`facecast.analysis.order_stats.sorted_at`."""
    n = len(v)
    start, stop, _ = slice(round(n * lo_pct / 100), round(n * hi_pct / 100) - 1).indices(n)
    if stop <= start:
        return []
    ks = [k for k in (start - 1, start, stop - 1, stop) if 0 <= k < n]
    at = {k: v[order[k]] for k in ks} if order is not None else sorted_at(v, ks)
    out: list[dict[str, Any]] = []
    for inner, outer in ((start, start - 1), (stop - 1, stop)):
        x = at[inner]
        if outer not in at or not (at[outer] == x or (at[outer] != at[outer] and x != x)):
            continue                               # this cut falls between two values
        eq = np.isnan(v) if x != x else v == x
        cut = {"value": "NaN" if x != x else x.item(), "rows": int(np.count_nonzero(eq)),
               "inside": int(np.count_nonzero(eq & m))}
        if cut not in out:                         # one tie spanning the whole slice
            out.append(cut)
    return out
