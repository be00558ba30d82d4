"""Issue 51: benchmark subsets of a ``cast_arrays`` dataset
(facecast.analysis.cast_filters) pinned by numbers worked out by hand on tiny arrays: which
rank filters take CAST's positional slice, CAST's bounds on ``abs`` and ``class`` tuples,
the NaN and tie-cut counts of each column, the report's entries, the log lines word for
word, the pool read from a manifest, and ``subset.parquet`` read back cell by cell, so a
mutant of `make mutate MODULES=analysis.cast_filters` fails here.

Every test calls the code itself (no shared fixture result): mutmut credits a function only
to the tests during which it ran."""

from __future__ import annotations

import json
import logging
import math
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from facecast.analysis import cast_filters as cf
from facecast.analysis.cast_filters import (
    ColumnJob,
    FilterResult,
    _cast_ranked,
    _check_classes,
    _column_masks,
    _facecast_ranked,
    _filter_mask,
    _filter_report,
    _log_filter,
    _manifest_ids,
    _nan_report,
    _percents,
    array_pool,
    build_array_subset,
    read_column,
    read_columns,
    select_from_arrays,
    write_array_subset,
)
from facecast.analysis.cast_tuples import TIES_HINT, argsort_platform, parse_cast_filters
from facecast.analysis.filtering import CAST_RANK_NOTE, AttributeFilter, FilterError
from facecast.datasets.cast_arrays import open_cast_arrays
from facecast.datasets.cast_manifest import build_cast_manifest
from facecast.io.parquet_io import read_metadata, read_provenance

LOGGER = "facecast.analysis.cast_filters"
NAN = np.nan
F32 = np.float32


def _spec(d: Path, attrs: np.ndarray, paths: list[str], columns: list[str],
          exclude: list[bool] | None = None) -> dict[str, str]:
    """CAST-format arrays written to ``d`` (attributes as given, paths, columns.csv)."""
    d.mkdir(parents=True, exist_ok=True)
    np.save(d / "attrArr.npy", attrs)
    np.save(d / "paths.npy", np.array(paths))
    (d / "columns.csv").write_text(",".join(columns) + "\n")
    spec = {"kind": "cast_arrays", "attributes": str(d / "attrArr.npy"),
            "paths": str(d / "paths.npy"), "columns": str(d / "columns.csv")}
    if exclude is not None:
        np.save(d / "mask.npy", np.array(exclude, bool))
        spec["exclude_mask"] = str(d / "mask.npy")
    return spec


def _messages(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


# ------------------------------------------------------------------- read_columns


def test_read_columns_block_by_block_in_the_files_dtype(tmp_path):
    """Three blocks of READ_ROWS (32768) rows, the last one ragged (3 rows): every row of
    the asked columns, in asked order (a column asked twice comes twice), in the file's
    dtype; a read column equals numpy's."""
    n = 2 * cf.READ_ROWS + 3                                   # 65539 rows
    a = np.arange(3 * n, dtype=np.float32).reshape(n, 3)      # cell (i, j) = 3 i + j
    np.save(tmp_path / "a.npy", a)
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # the file is read unbuffered, silently
        got = read_columns(tmp_path / "a.npy", [2, 0, 2])
    assert [g.dtype for g in got] == [np.float32] * 3 and [len(g) for g in got] == [n] * 3
    for g, j in zip(got, [2, 0, 2], strict=True):
        np.testing.assert_array_equal(g, a[:, j])
    # column 0 (3 i) at the block edges: rows 32767 | 32768 (block 2) and 65536 (block 3,
    # its first) .. 65538 (the last)
    assert got[1][[32767, 32768, 65536, 65538]].tolist() == [98301, 98304, 196608, 196614]
    np.testing.assert_array_equal(read_column(tmp_path / "a.npy", 1), a[:, 1])
    ints = np.array([[1, -2], [3, -4], [5, -6]], np.int16)
    np.save(tmp_path / "i.npy", ints)
    (col,) = read_columns(tmp_path / "i.npy", [1])
    assert col.dtype == np.int16 and col.tolist() == [-2, -4, -6]
    f64 = np.array([[0.1], [0.7]])
    np.save(tmp_path / "f.npy", f64)
    assert read_column(tmp_path / "f.npy", 0).dtype == np.float64
    assert read_column(tmp_path / "f.npy", 0).tolist() == [0.1, 0.7]


def test_read_columns_of_an_empty_array_and_a_truncated_file(tmp_path):
    """No row: one empty column per index, in the file's dtype. A file shorter than its
    header says: the error names the file and the last row."""
    np.save(tmp_path / "e.npy", np.zeros((0, 4), np.float32))
    got = read_columns(tmp_path / "e.npy", [3, 1])
    assert [(g.dtype, g.shape) for g in got] == [(np.float32, (0,)), (np.float32, (0,))]
    np.save(tmp_path / "t.npy", np.arange(10, dtype=np.float32).reshape(5, 2))
    raw = (tmp_path / "t.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(raw[:-4])                # 5 rows of 8 bytes, 36 left
    with pytest.raises(FilterError) as exc:
        read_columns(tmp_path / "t.npy", [0])
    assert str(exc.value) == f"{tmp_path / 't.npy'}: file ends before row 4"
    (tmp_path / "t.npy").write_bytes(raw)                     # whole again: reads
    assert read_column(tmp_path / "t.npy", 1).tolist() == [1, 3, 5, 7, 9]


# ------------------------------------------------------- which path a filter takes


def test_which_rank_filters_take_casts_slice():
    """CAST's slice: a rank tuple (cast_bounds) or ``rank_method: cast``; facecast's
    ranks: a rank filter with neither. No other mode is ranked."""
    cases = [
        (AttributeFilter("x", "rank", 0.1, 0.9), False, True),
        (AttributeFilter("x", "rank", 0.1, 0.9, rank_method="cast"), True, False),
        (AttributeFilter("x", "rank", 0.1, 0.9, cast_bounds=(10, 90)), True, False),
        (AttributeFilter("x", "rank", 0.1, 0.9, rank_method="cast", cast_bounds=(10, 90)),
         True, False),
        (AttributeFilter("x", "abs", 1, 2, cast_bounds=(1, 2)), False, False),
        (AttributeFilter("x", "abs", 1, 2, rank_method="cast"), False, False),
        (AttributeFilter("x", "value", 1, 2), False, False),
        (AttributeFilter("x", "value", 1, 2, rank_method="cast"), False, False),
        (AttributeFilter("x", "class", value=1, cast_bounds=(1, 1)), False, False),
    ]
    assert [(_cast_ranked(f), _facecast_ranked(f)) for f, _, _ in cases] == \
        [(c, r) for _, c, r in cases]


def _ranked_inputs():
    # v:     rows 0..9 = 5 1 4 2 3 0 7 6 9 8 (distinct); pool: rows 8 and 9 out
    v = np.array([5, 1, 4, 2, 3, 0, 7, 6, 9, 8], F32)
    pool = np.array([1, 1, 1, 1, 1, 1, 1, 1, 0, 0], bool)
    return v, pool


def test_filter_mask_rank_filters_cast_slice_over_all_rows_facecast_over_the_pool():
    """[x, rank, 20, 70] over N = 10 rows: positions round(2) = 2 .. round(7) - 1 - 1 = 5,
    i.e. the sorted values 2, 3, 4, 5 -> rows 3, 4, 2, 0, whatever the pool.
    ``rank_method: cast`` with fractions 0.2, 0.7: the same slice. facecast's ranks over
    the 8 pool rows (values 0..7, rank (r - 1) / 7): [0.2, 0.7] keeps 2/7, 3/7, 4/7 ->
    values 2, 3, 4 -> rows 3, 4, 2 (5 has 5/7 = 0.714 > 0.7)."""
    v, pool = _ranked_inputs()
    sorts = []

    def argsort():
        sorts.append(1)
        return np.argsort(v)

    tup = parse_cast_filters([["x", "rank", 20, 70]])[0]
    assert np.flatnonzero(_filter_mask(v, tup, pool, argsort)).tolist() == [0, 2, 3, 4]
    cast = AttributeFilter("x", "rank", 0.2, 0.7, rank_method="cast")
    assert np.flatnonzero(_filter_mask(v, cast, pool, argsort)).tolist() == [0, 2, 3, 4]
    own = AttributeFilter("x", "rank", 0.2, 0.7)
    assert np.flatnonzero(_filter_mask(v, own, pool, argsort)).tolist() == [2, 3, 4]
    # [x, rank, 70, 100]: positions 7 .. 8 = values 7, 8 -> rows 6, 9 (row 9 out of the
    # pool, still selected: the pool is ANDed later); facecast [0.7, 1]: 5/7, 6/7, 1 ->
    # values 5, 6, 7 -> rows 0, 7, 6
    top = parse_cast_filters([["x", "rank", 70, 100]])[0]
    assert np.flatnonzero(_filter_mask(v, top, pool, argsort)).tolist() == [6, 9]
    assert np.flatnonzero(_filter_mask(v, AttributeFilter("x", "rank", 0.7, 1.0), pool,
                                       argsort)).tolist() == [0, 6, 7]
    assert sorts == []                        # no tie is cut: no full argsort


def test_row_order_ties_are_cut_in_row_order():
    """20 rows, 1 at rows 0, 3, .., 18 (7 rows), 0 elsewhere (13 rows: 1, 2, 4, 5, 7, 8,
    ..). [x, rank, 0, 35] -> positions 0 .. round(7) - 2 = 5: six of the 13 zeros. With
    cast_ties row_order they are the first six in row order: rows 1, 2, 4, 5, 7, 8 (numpy's
    default argsort is not stable on 20 rows: it may keep others); the tie of 0 is cut, 6
    inside."""
    v = (np.arange(20) % 3 == 0).astype(F32)
    f = parse_cast_filters([["x", "rank", 0, 35]], ties="row_order")[0]
    pool = np.ones(20, bool)
    assert np.flatnonzero(_filter_mask(v, f, pool, np.argsort)).tolist() == [1, 2, 4, 5, 7, 8]
    (r,) = _column_masks(ColumnJob(v, (f,), pool))
    assert np.flatnonzero(r.mask).tolist() == [1, 2, 4, 5, 7, 8]
    assert r.tie_cuts == [{"value": 0.0, "rows": 13, "inside": 6}]
    assert (r.n_valued, r.n_nan_selected, r.n_nan_pass) == (20, 0, 0)


def test_filter_mask_value_filters_see_every_row_and_inclusive_bounds():
    """A facecast ``value`` filter [2, 8] keeps 2 <= v <= 8 on every row, pool or not
    (rows 0 1 2 3 4 5 6 7 8 9 = 5 1 4 2 3 0 7 6 9 8 -> rows 0, 2, 3, 4, 6, 7, 9); a
    ``class`` filter 9 keeps row 8 (out of the pool)."""
    v, pool = _ranked_inputs()
    f = AttributeFilter("x", "value", 2, 8)
    assert np.flatnonzero(_filter_mask(v, f, pool, np.argsort)).tolist() == \
        [0, 2, 3, 4, 6, 7, 9]
    c = AttributeFilter("x", "class", value=9)
    assert np.flatnonzero(_filter_mask(v, c, pool, np.argsort)).tolist() == [8]


def test_cast_abs_and_class_tuples_compare_in_the_columns_own_type():
    """CAST compares an int64 column with the tuple's integers exactly; facecast's own
    filters go through float64, where 2**53 + 1 is 2**53. Column rows: 2**53, 2**53 + 1,
    2**53 + 2, 5.

    [x, abs, 2**53, 2**53 + 2]: strict, exact -> row 1 only (float64 would keep none).
    [x, 2**53 + 1]: exact -> row 1 only (float64 would keep rows 0 and 1)."""
    big = 2 ** 53
    v = np.array([big, big + 1, big + 2, 5], np.int64)
    pool = np.ones(4, bool)
    ab, cl = parse_cast_filters([["x", "abs", big, big + 2], ["x", big + 1]])
    assert np.flatnonzero(_filter_mask(v, ab, pool, np.argsort)).tolist() == [1]
    assert np.flatnonzero(_filter_mask(v, cl, pool, np.argsort)).tolist() == [1]
    own = AttributeFilter("x", "class", value=big + 1)
    assert np.flatnonzero(_filter_mask(v, own, pool, np.argsort)).tolist() == [0, 1]
    # float32 bounds as written: [x, abs, 0.1, 0.7] on float32 0.1, 0.3, 0.7: strict in
    # float32 -> only 0.3
    w = np.array([0.1, 0.3, 0.7], F32)
    ab32, cl32 = parse_cast_filters([["x", "abs", 0.1, 0.7], ["x", 0.7]])
    assert _filter_mask(w, ab32, np.ones(3, bool), np.argsort).tolist() == [False, True, False]
    assert _filter_mask(w, cl32, np.ones(3, bool), np.argsort).tolist() == [False, False, True]


def test_percents_are_the_tuples_as_written_or_fractions_times_100():
    """A tuple's bounds as floats; a fraction times 100 rounded to 9 decimals:
    0.07 * 100 = 7.000000000000001 -> 7.0; 0.123456789012 -> 12.345678901 (not
    12.3456789012); 0.125 -> 12.5 (not 12)."""
    t = parse_cast_filters([["x", "rank", 7, 33]])[0]
    lo, hi = _percents(t)
    assert (lo, hi) == (7.0, 33.0) and type(lo) is float and type(hi) is float
    f = AttributeFilter("x", "rank", 0.07, 0.123456789012, rank_method="cast")
    assert _percents(f) == (7.0, 12.345678901)
    h = AttributeFilter("x", "rank", 0.123456789012, 0.125, rank_method="cast")
    assert _percents(h) == (12.345678901, 12.5)
    g = AttributeFilter("x", "rank", 0.5, 1, rank_method="cast", cast_bounds=(49.5, 100))
    assert _percents(g) == (49.5, 100.0)      # the tuple wins over the fractions


# ------------------------------------------------------------------ _column_masks


def _tie_job_inputs():
    # rows:   0    1    2    3    4    5    6    7
    v = np.array([2, NAN, 1, 2, NAN, 0, 2, 3], F32)
    pool = np.array([1, 0, 1, 1, 1, 1, 0, 1], bool)
    # sorted positions: 0: 0 (row 5), 1: 1 (row 2), 2-4: 2 (rows 0, 3, 6), 5: 3 (row 7),
    # 6-7: NaN (rows 1, 4; row order: 1 first)
    return v, pool


def test_column_masks_count_nan_rows_and_cut_ties(monkeypatch):
    """N = 8, two NaN rows (n_valued 6). Per filter:

    A [x, rank, 25, 100], row_order: positions 2 .. 6 -> rows 0, 3, 6, 7 and NaN row 1
      (row order): the NaN tie (rows 1, 4) is cut, 1 inside; NaN row 1 is not in the pool.
    B [x, rank, 25, 50], argsort: position 2 only -> one of the 2s: the tie of 2 (3 rows)
      is cut, 1 inside.
    C [x, rank, 0, 50], argsort: positions 0 .. 2 -> rows 5, 2 and the same 2 as B (one
      argsort serves both): the tie of 2 cut again, 1 inside.
    D facecast rank [0, 1]: every valued pool row -> rows 0, 2, 3, 5, 7; no tie report.
    E [x, rank, 0, 25], argsort: position 0 -> row 5; no tie at its ends, no sort.
    F value [2, 3]: rows 0, 3, 6, 7."""
    v, pool = _tie_job_inputs()
    sorts = []
    real = np.argsort

    def counted(*a, **k):      # CAST's argsorts (default kind); facecast's ranks: mergesort
        if "kind" not in k:
            sorts.append(1)
        return real(*a, **k)

    monkeypatch.setattr(np, "argsort", counted)
    a = parse_cast_filters([["x", "rank", 25, 100]], ties="row_order")[0]
    b, c, e = parse_cast_filters([["x", "rank", 25, 50], ["x", "rank", 0, 50],
                                  ["x", "rank", 0, 25]])
    d = AttributeFilter("x", "rank", 0, 1)
    f = AttributeFilter("x", "value", 2, 3)
    ra, rb, rc, rd, re, rf = _column_masks(ColumnJob(v, (a, b, c, d, e, f), pool))
    assert len(sorts) == 1                            # B and C share one default argsort
    assert np.flatnonzero(ra.mask).tolist() == [0, 1, 3, 6, 7]
    assert (ra.n_valued, ra.n_nan_selected, ra.n_nan_pass) == (6, 1, 0)
    assert ra.tie_cuts == [{"value": "NaN", "rows": 2, "inside": 1}]
    (two,) = np.flatnonzero(rb.mask).tolist()
    assert two in (0, 3, 6)
    assert (rb.n_valued, rb.n_nan_selected, rb.n_nan_pass) == (6, 0, 0)
    assert rb.tie_cuts == [{"value": 2.0, "rows": 3, "inside": 1}]
    assert np.flatnonzero(rc.mask).tolist() == sorted([2, 5, two])
    assert rc.tie_cuts == [{"value": 2.0, "rows": 3, "inside": 1}]
    assert np.flatnonzero(rd.mask).tolist() == [0, 2, 3, 5, 7] and rd.tie_cuts == []
    assert (rd.n_valued, rd.n_nan_selected, rd.n_nan_pass) == (6, 0, 0)
    assert np.flatnonzero(re.mask).tolist() == [5] and re.tie_cuts == []
    assert np.flatnonzero(rf.mask).tolist() == [0, 3, 6, 7] and rf.tie_cuts == []
    assert type(ra.n_nan_selected) is int and type(ra.n_nan_pass) is int


def test_column_masks_nan_rows_in_and_out_of_the_pool():
    """The same column, the pool flipped on the NaN rows (row 1 in, row 4 out). Row order
    cuts the NaN tie at NaN row 1: [x, rank, 25, 100] (positions 2 .. 6) and [x, rank, 0,
    100] (positions 0 .. 6: every valued row and row 1) take 1 NaN row, 1 in the pool.
    [x, rank, 0, 90] (stop round(7.2) - 1 = 6: positions 0 .. 5, the valued rows) takes
    none and cuts no tie (3 at position 5, NaN at 6)."""
    v, _ = _tie_job_inputs()
    pool = np.array([1, 1, 1, 1, 0, 1, 1, 1], bool)
    a, b = parse_cast_filters([["x", "rank", 25, 100], ["x", "rank", 0, 100]],
                              ties="row_order")
    c = parse_cast_filters([["x", "rank", 0, 90]])[0]
    ra, rb, rc = _column_masks(ColumnJob(v, (a, b, c), pool))
    assert (ra.n_nan_selected, ra.n_nan_pass) == (1, 1)
    assert (rb.n_nan_selected, rb.n_nan_pass) == (1, 1)
    assert np.flatnonzero(rb.mask).tolist() == [0, 1, 2, 3, 5, 6, 7]
    assert rb.tie_cuts == [{"value": "NaN", "rows": 2, "inside": 1}]
    assert (rc.n_nan_selected, rc.n_nan_pass) == (0, 0) and rc.tie_cuts == []
    assert np.flatnonzero(rc.mask).tolist() == [0, 2, 3, 5, 6, 7]


def test_only_cast_slices_report_cut_ties_whatever_their_ties():
    """A value filter [0, 1] and a facecast rank filter [0, 1] marked ``ties: row_order``
    on 0 0 1 1 keep every row and report no tie (a CAST slice of the same percents,
    positions 0 .. 2, would cut the tie of 1: 2 rows, 1 inside)."""
    v = np.array([0, 0, 1, 1], F32)
    val = AttributeFilter("x", "value", 0, 1, ties="row_order")
    own = AttributeFilter("x", "rank", 0, 1, ties="row_order")
    cast = AttributeFilter("x", "rank", 0, 1, rank_method="cast", ties="row_order")
    rv, ro, rc = _column_masks(ColumnJob(v, (val, own, cast), np.ones(4, bool)))
    assert rv.mask.all() and ro.mask.all() and rv.tie_cuts == [] == ro.tie_cuts
    assert rc.mask.tolist() == [True, True, True, False]
    assert rc.tie_cuts == [{"value": 1.0, "rows": 2, "inside": 1}]


def test_column_masks_of_columns_without_nan():
    """An int column and a float column without NaN: every row valued, no NaN selected;
    an argsort tuple cutting the tie of 1 in [1, 1, 1, 0] ([x, rank, 0, 75]: positions
    0 .. 1 -> row 3 and one of the 1s) reports it."""
    f = parse_cast_filters([["x", "rank", 0, 75]])[0]
    for v in (np.array([1, 1, 1, 0], np.int64), np.array([1, 1, 1, 0], F32)):
        (r,) = _column_masks(ColumnJob(v, (f,), np.array([1, 0, 1, 1], bool)))
        assert (r.n_valued, r.n_nan_selected, r.n_nan_pass) == (4, 0, 0)
        assert r.mask.sum() == 2 and r.mask[3]
        assert r.tie_cuts == [{"value": 1, "rows": 3, "inside": 1}]


def test_a_cut_tie_reports_the_value_casts_argsort_puts_at_the_cut(caplog):
    """0.0 and -0.0 are one tie (30 rows: 0.0 at even rows 10 .. 38, -0.0 at odd rows
    11 .. 39; 1.0 at rows 0 .. 9). [x, rank, 0, 25] keeps positions 0 .. 8: nine of the
    zeros, the tie cut (30 rows, 9 inside). The value reported (and logged) is the zero
    at position 8 of CAST's argsort, with its sign, not another sort's."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    v = np.where(np.arange(40) % 2 == 1, F32(-0.0), F32(0.0)).astype(F32)
    v[:10] = 1
    f = parse_cast_filters([["x", "rank", 0, 25]])[0]
    (r,) = _column_masks(ColumnJob(v, (f,), np.ones(40, bool)))
    at_cut = v[np.argsort(v)[8]].item()                   # CAST's order decides the sign
    assert r.tie_cuts == [{"value": 0.0, "rows": 30, "inside": 9}]
    assert math.copysign(1.0, r.tie_cuts[0]["value"]) == math.copysign(1.0, at_cut)
    assert r.mask.sum() == 9 and not r.mask[:10].any()
    _log_filter(f, r)
    assert _messages(caplog) == [
        f"attribute: x lower_quartile: 0.0 upper_quartile: 25: 30 rows tied at {at_cut} "
        f"straddle a cut: 9 inside, 21 outside; {TIES_HINT}"]


# --------------------------------------------------------------- refused classes


def test_string_classes_of_cast_tuples_are_refused_with_each_named():
    """A CAST class tuple with a string class: the numeric array never equals it. Each
    such tuple is named, ``; ``-joined; a facecast class filter with a string value and
    numeric tuples pass."""
    bad = parse_cast_filters([["a", "x"], ["b", 1], ["c", "1"]])
    with pytest.raises(FilterError) as exc:
        _check_classes(bad)
    tail = ("the class is a string but the attribute array is numeric, so CAST's == "
            "selects no row; write the number")
    assert str(exc.value) == f"cast_filters [a, 'x']: {tail}; cast_filters [c, '1']: {tail}"
    _check_classes([bad[1], AttributeFilter("a", "class", value="x"),
                    AttributeFilter("a", "rank", 0, 1, cast_bounds=("0", "1"))])


# ------------------------------------------------------------ log and report texts


def test_log_lines_of_nan_rows_and_cut_ties(caplog):
    """The exact lines: NaN rows taken, each cut tie (argsort: the hint; row_order: row
    order decides), and "no tie" for a CAST slice that cut none; nothing for a facecast
    filter with nothing to say."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    arg = parse_cast_filters([["yaw", "rank", 50, 100]])[0]
    row = parse_cast_filters([["yaw", "rank", 50, 100]], ties="row_order")[0]
    m = np.zeros(3, bool)
    cuts = [{"value": 2.5, "rows": 5, "inside": 2}, {"value": "NaN", "rows": 4, "inside": 3}]
    _log_filter(arg, FilterResult(m, 7, 3, 1, cuts))
    what = "attribute: yaw lower_quartile: 50 upper_quartile: 100"
    assert _messages(caplog) == [
        f"{what}: 3 rows with a NaN yaw fell inside the range (np.argsort sorts NaN last; "
        "CAST keeps them), 1 of them in the pool",
        f"{what}: 5 rows tied at 2.5 straddle a cut: 2 inside, 3 outside; {TIES_HINT}",
        f"{what}: 4 rows tied at NaN straddle a cut: 3 inside, 1 outside; {TIES_HINT}"]
    caplog.clear()
    _log_filter(row, FilterResult(m, 7, 0, 0, cuts[:1]))
    assert _messages(caplog) == [
        f"{what}: 5 rows tied at 2.5 straddle a cut: 2 inside, 3 outside; cast_ties: "
        "row_order (row order decides, the same on every machine)"]
    caplog.clear()
    _log_filter(arg, FilterResult(m, 7))
    _log_filter(AttributeFilter("yaw", "rank", 0.5, 1.0, rank_method="cast"),
                FilterResult(m, 7))
    _log_filter(AttributeFilter("yaw", "rank", 0.5, 1.0), FilterResult(m, 7))
    _log_filter(AttributeFilter("yaw", "value", 1, 2), FilterResult(m, 7, 2, 0))
    assert _messages(caplog) == [
        f"{what}: no tie straddles a cut",
        "attribute: yaw lower_quartile: 0.5 upper_quartile: 1: no tie straddles a cut",
        "attribute: yaw lower_quartile: 1 upper_quartile: 2: 2 rows with a NaN yaw fell "
        "inside the range (np.argsort sorts NaN last; CAST keeps them), 0 of them in the "
        "pool"]


def test_filter_report_entries():
    """Counts over all rows and in the pool; a rank tuple reports rank_method cast and its
    percents, a facecast filter its own method and fractions."""
    mask = np.array([1, 1, 0, 1, 0], bool)
    pool = np.array([0, 1, 1, 1, 1], bool)
    cuts = [{"value": 1.0, "rows": 2, "inside": 1}]
    r = FilterResult(mask, 4, 2, 1, cuts)
    tup, ab = parse_cast_filters([["q", "rank", 10, 90], ["q", "abs", 0.5, 2]])
    assert _filter_report(tup, r, pool) == {
        "attribute": "q", "mode": "rank", "rank_method": "cast", "bounds": [10, 90],
        "n_valued": 4, "n_pass_all_rows": 3, "n_pass": 2, "n_nan_selected": 2,
        "n_nan_pass": 1, "tie_cuts": cuts}
    assert _filter_report(ab, r, pool)["rank_method"] == "facecast"
    assert _filter_report(ab, r, pool)["bounds"] == [0.5, 2]
    own = AttributeFilter("q", "rank", 0.25, 0.75)
    rep = _filter_report(own, FilterResult(mask, 5), pool)
    assert rep == {"attribute": "q", "mode": "rank", "rank_method": "facecast",
                   "bounds": [0.25, 0.75], "n_valued": 5, "n_pass_all_rows": 3,
                   "n_pass": 2, "n_nan_selected": 0, "n_nan_pass": 0, "tie_cuts": []}
    cast = AttributeFilter("q", "rank", 0.25, 0.75, rank_method="cast")
    assert _filter_report(cast, FilterResult(mask, 5), pool)["rank_method"] == "cast"
    cls = AttributeFilter("g", "class", value=1, rank_method="cast", cast_bounds=(1, 1))
    assert _filter_report(cls, FilterResult(mask, 5), pool)["rank_method"] == "cast"
    # a rank filter with CAST bounds is CAST's slice whatever its rank_method says
    odd = AttributeFilter("q", "rank", 0.1, 0.9, cast_bounds=(10, 90))
    assert _filter_report(odd, FilterResult(mask, 5), pool)["rank_method"] == "cast"
    assert _filter_report(odd, FilterResult(mask, 5), pool)["bounds"] == [10, 90]
    assert type(rep["n_pass"]) is int and type(rep["n_pass_all_rows"]) is int


def test_nan_report_counts_and_its_log_line(caplog):
    """nan_attribute rows 1, 3, 4: in the pool 1, 4; in the subset 4 -> 3, 2, 1."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    nan_rows = np.array([0, 1, 0, 1, 1, 0], bool)
    pool = np.array([1, 1, 0, 0, 1, 1], bool)
    mask = np.array([1, 0, 0, 0, 1, 0], bool)
    out = _nan_report("cast", pool, nan_rows, mask)
    assert out == {"mode": "cast", "n_rows": 3, "n_pool": 2, "n_subset": 1}
    assert all(type(out[k]) is int for k in ("n_rows", "n_pool", "n_subset"))
    assert _nan_report("drop", pool & ~nan_rows, nan_rows, mask & ~nan_rows) == \
        {"mode": "drop", "n_rows": 3, "n_pool": 0, "n_subset": 0}
    head = ("rows (not excluded) have a NaN or infinite attribute cell (status "
            "nan_attribute):")
    assert _messages(caplog) == [
        f"cast_nan: cast - 3 {head} 2 in the pool, 1 in the subset (as CAST: each filter "
        "decides on its own column)",
        f"cast_nan: drop - 3 {head} 0 in the pool, 0 in the subset (kept out of every "
        "benchmark)"]
    caplog.clear()
    none = np.zeros(6, bool)
    assert _nan_report("cast", pool, none, mask) == \
        {"mode": "cast", "n_rows": 0, "n_pool": 0, "n_subset": 0}
    assert _messages(caplog) == []


# ------------------------------------------------------------ select_from_arrays


def _abc_arrays(tmp_path):
    # rows:      0    1    2    3    4    5
    a = [0.5, 0.1, 0.9, 0.3, 0.7, NAN]
    b = [1, 0, 1, 1, 0, 1]
    c = [4, 3, 2, 1, 0, 5]
    attrs = np.array([a, b, c], F32).T.copy()
    paths = [f"p{i // 2}/{i}.jpg" for i in range(6)]
    return _spec(tmp_path / "a", attrs, paths, ["a", "b", "c"]), attrs


def test_select_from_arrays_masks_report_and_values(tmp_path, caplog):
    """Columns a = 0.5 0.1 0.9 0.3 0.7 NaN, b = 1 0 1 1 0 1, c = 4 3 2 1 0 5; pool rows
    0 .. 4 (row 5 out). Filters, columns interleaved: [b, 1] -> rows 0, 2, 3, 5;
    [a, rank, 50, 100] -> positions 3 .. 4 of 0.1 0.3 0.5 0.7 0.9 NaN -> rows 4, 2;
    [b, abs, -1, 0.5] -> rows 1, 4. Pool AND all: no row. Without the last: rows 2."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    spec, attrs = _abc_arrays(tmp_path)
    arrays = open_cast_arrays(spec)
    pool = [True] * 5 + [False]
    filters = parse_cast_filters([["b", 1], ["a", "rank", 50, 100], ["b", "abs", -1, 0.5]])
    for workers in (1, 2):
        values: dict[str, np.ndarray] = {}
        mask, report = select_from_arrays(arrays, spec["attributes"], filters, pool,
                                          workers=workers, values=values)
        assert mask.tolist() == [False] * 6
        assert list(values) == ["b", "a"]
        np.testing.assert_array_equal(values["a"], attrs[:, 0])
        np.testing.assert_array_equal(values["b"], attrs[:, 1])
        assert values["a"].dtype == np.float32
        assert report == {
            "n_rows": 6, "n_pool": 5, "n_subset": 0, "filters": [
                {"attribute": "b", "mode": "class", "rank_method": "facecast",
                 "bounds": [1, 1], "n_valued": 6, "n_pass_all_rows": 4, "n_pass": 3,
                 "n_nan_selected": 0, "n_nan_pass": 0, "tie_cuts": []},
                {"attribute": "a", "mode": "rank", "rank_method": "cast",
                 "bounds": [50, 100], "n_valued": 5, "n_pass_all_rows": 2, "n_pass": 2,
                 "n_nan_selected": 0, "n_nan_pass": 0, "tie_cuts": []},
                {"attribute": "b", "mode": "abs", "rank_method": "facecast",
                 "bounds": [-1, 0.5], "n_valued": 6, "n_pass_all_rows": 2, "n_pass": 2,
                 "n_nan_selected": 0, "n_nan_pass": 0, "tie_cuts": []}]}
    assert _messages(caplog) == ["attribute: a lower_quartile: 50 upper_quartile: 100: "
                                 "no tie straddles a cut"] * 2
    mask, report = select_from_arrays(arrays, spec["attributes"], filters[:2],
                                      np.array(pool), workers=3)
    assert mask.tolist() == [False, False, True, False, False, False]
    assert (report["n_pool"], report["n_subset"]) == (5, 1)
    # no filter: the pool itself; the pool given as 0/1 numbers
    mask, report = select_from_arrays(arrays, spec["attributes"], [], [1, 1, 0, 0, 1, 0])
    assert mask.tolist() == [True, True, False, False, True, False] and mask.dtype == bool
    assert report == {"n_rows": 6, "n_pool": 3, "filters": [], "n_subset": 3}


def test_select_from_arrays_threads_give_each_column_its_own_filters(tmp_path):
    """Three columns in three threads; each filter's result lands at its own index: a
    [c, rank, 0, 50] (positions 0 .. 1 of c = 4 3 2 1 0 5 -> rows 4, 3), [a, abs, 0.2, 1]
    (rows 0, 2, 3, 4), [b, 0] (rows 1, 4), [c, 5] (row 5)."""
    spec, _ = _abc_arrays(tmp_path)
    arrays = open_cast_arrays(spec)
    filters = parse_cast_filters([["c", "rank", 0, 50], ["a", "abs", 0.2, 1], ["b", 0],
                                  ["c", 5]])
    pool = np.ones(6, bool)
    for workers in (1, 2, 4):
        mask, report = select_from_arrays(arrays, spec["attributes"], filters, pool,
                                          workers=workers)
        assert [r["n_pass_all_rows"] for r in report["filters"]] == [2, 4, 2, 1]
        assert [r["attribute"] for r in report["filters"]] == ["c", "a", "b", "c"]
        assert [r["n_valued"] for r in report["filters"]] == [6, 5, 6, 6]
        assert not mask.any() and report["n_subset"] == 0
    mask, report = select_from_arrays(arrays, spec["attributes"], filters[:3], pool,
                                      workers=2)
    assert mask.tolist() == [False, False, False, False, True, False]  # 4 in all three


def test_select_from_arrays_threads_only_when_asked_and_useful(tmp_path, monkeypatch):
    """One column per thread, at most ``workers`` threads, none for one worker (the
    default) or one column."""
    spec, _ = _abc_arrays(tmp_path)
    arrays = open_cast_arrays(spec)
    pools = []
    real = cf.ThreadPoolExecutor

    def counted(max_workers):
        pools.append(max_workers)
        return real(max_workers=max_workers)

    monkeypatch.setattr(cf, "ThreadPoolExecutor", counted)
    three = parse_cast_filters([["c", 5], ["a", "abs", 0, 1], ["b", 0], ["c", 4]])
    pool = np.ones(6, bool)
    select_from_arrays(arrays, spec["attributes"], three, pool)
    select_from_arrays(arrays, spec["attributes"], three, pool, workers=1)
    select_from_arrays(arrays, spec["attributes"], three[::3], pool, workers=4)  # one column
    assert pools == []
    for workers in (2, 3, 8):
        mask, _ = select_from_arrays(arrays, spec["attributes"], three, pool, workers=workers)
        assert not mask.any()
    mask, _ = select_from_arrays(arrays, spec["attributes"], three[:2], pool, workers=5)
    assert pools == [2, 3, 3, 2] and mask.tolist() == [False] * 6


def test_select_from_arrays_refuses_unknown_and_key_named_columns(tmp_path):
    spec, _ = _abc_arrays(tmp_path)
    arrays = open_cast_arrays(spec)
    filters = parse_cast_filters([["zz", 1], ["a", 1], ["yy", "abs", 0, 1]])
    with pytest.raises(FilterError) as exc:
        select_from_arrays(arrays, spec["attributes"], filters, np.ones(6, bool))
    assert str(exc.value) == ("attribute column(s) ['zz', 'yy'] not in columns.csv; "
                              "available: ['a', 'b', 'c']")
    keyed = _spec(tmp_path / "k", np.zeros((2, 3), F32), ["x/0.jpg", "x/1.jpg"],
                  ["row", "path", "q"])
    arrays = open_cast_arrays(keyed)
    filters = parse_cast_filters([["row", 1], ["q", 1], ["path", 0], ["row", 0]])
    with pytest.raises(FilterError) as exc:
        select_from_arrays(arrays, keyed["attributes"], filters, np.ones(2, bool))
    assert str(exc.value) == (
        "attribute column(s) ['path', 'row'] of columns.csv have the name of a subset key "
        "column ['image_id', 'path', 'identity', 'split', 'row']: rename them in "
        "columns.csv")
    with pytest.raises(FilterError, match=r"^cast_filters \[q, '1'\]: the class is a str"):
        select_from_arrays(arrays, keyed["attributes"], parse_cast_filters([["q", "1"]]),
                           np.ones(2, bool))


# ---------------------------------------------------------------- the subset file


def _subset_arrays(tmp_path):
    # rows:   0          1          2          3          4          5
    paths = ["a/0.jpg", "a/1.jpg", "b/0.jpg", "b/1.jpg", "c/0.jpg", "d/0.jpg"]
    q = [0.1, 0.7, 0.3, NAN, 0.5, 0.2]
    g = [1, 0, 1, 1, 0, 1]
    attrs = np.array([q, g], F32).T.copy()
    return _spec(tmp_path / "a", attrs, paths, ["q", "g"]), attrs


def test_written_subset_read_back_cell_by_cell(tmp_path):
    """Rows 1, 3, 5 (NaN row 3 flagged): ids a/1.jpg, b/1.jpg//row4 (1-based), d/0.jpg;
    paths as in paths.npy; identities a, b, d (3); split all; q as float32 -> float64
    (0.7 -> 0.699999988079071), g 0, 1, 1; the report, provenance and description."""
    spec, _ = _subset_arrays(tmp_path)
    arrays = open_cast_arrays(spec)
    filters = parse_cast_filters([["q", "rank", 0, 100], ["g", "abs", -1, 2]])
    mask = np.array([0, 1, 0, 1, 0, 1], bool)
    nan_rows = np.array([0, 0, 0, 1, 0, 0], bool)
    report = {"n_subset": np.int64(3), "filters": []}
    out = tmp_path / "s.parquet"
    got = write_array_subset(arrays, spec["attributes"], spec["paths"], mask, filters,
                             report, out, tmp_path / "d.txt", provenance={"x": 1,
                                                                          "stage": "old"},
                             nan_rows=nan_rows)
    assert got is report and report["n_identities"] == 3
    t = pq.read_table(out)
    assert t.column_names == ["image_id", "path", "identity", "split", "row", "q", "g"]
    assert t.column("image_id").to_pylist() == ["a/1.jpg", "b/1.jpg//row4", "d/0.jpg"]
    assert t.column("path").to_pylist() == ["a/1.jpg", "b/1.jpg", "d/0.jpg"]
    assert t.column("identity").to_pylist() == ["a", "b", "d"]
    assert t.column("split").to_pylist() == ["all"] * 3
    assert t.column("row").to_pylist() == [1, 3, 5]
    q = t.column("q").to_pylist()
    assert q[0] == float(F32(0.7)) == 0.699999988079071 and q[2] == float(F32(0.2))
    assert np.isnan(q[1])
    assert t.column("g").to_pylist() == [0.0, 1.0, 1.0]
    assert t.schema.field("row").type == pa.int64()
    assert t.schema.field("q").type == pa.float64() == t.schema.field("g").type
    assert t.schema.field("split").type == pa.dictionary(pa.int8(), pa.string())
    for name in ("image_id", "path", "identity"):
        assert t.schema.field(name).type == pa.string()
    meta = read_metadata(out)
    assert json.loads(meta["facecast.subset_report"]) == {
        "n_subset": "3", "filters": [], "n_identities": 3}
    prov = read_provenance(out)
    assert prov["x"] == 1 and prov["stage"] == "benchmark_subset"
    assert prov["source"] == "cast_arrays" and prov["argsort_platform"] == argsort_platform()
    assert prov["filters"] == [
        {"attribute": "q", "mode": "rank", "low": 0.0, "high": 1.0, "value": None,
         "rank_method": "cast", "cast_bounds": [0, 100], "ties": "argsort"},
        {"attribute": "g", "mode": "abs", "low": -1, "high": 2, "value": None,
         "rank_method": "facecast", "cast_bounds": [-1, 2], "ties": "argsort"}]
    assert (tmp_path / "d.txt").read_text() == (
        "attribute: q lower_quartile: 0.0 upper_quartile: 100\n"
        "attribute: g lower_quartile: -1 upper_quartile: 2\n" + CAST_RANK_NOTE)
    # the Parquet settings: row delta-coded, attributes byte-split, a dictionary only for
    # split, no statistics for the three string columns
    md = pq.ParquetFile(out).metadata.row_group(0)
    col = {md.column(i).path_in_schema: md.column(i) for i in range(md.num_columns)}
    assert "DELTA_BINARY_PACKED" in col["row"].encodings
    assert "BYTE_STREAM_SPLIT" in col["q"].encodings
    assert "BYTE_STREAM_SPLIT" in col["g"].encodings
    assert col["split"].has_dictionary_page
    assert [n for n, c in col.items() if c.has_dictionary_page] == ["split"]
    assert {n for n, c in col.items() if not c.is_stats_set} == {"image_id", "path",
                                                                 "identity"}


def test_subset_values_come_from_values_when_given(tmp_path):
    """``values`` given for q: its cells are written (here 10 + row), g read from the file;
    one filter per attribute even when two filters share it; no provenance given."""
    spec, attrs = _subset_arrays(tmp_path)
    arrays = open_cast_arrays(spec)
    filters = parse_cast_filters([["g", 1], ["q", "abs", 0, 1], ["g", "abs", 0, 2]])
    mask = np.array([1, 0, 1, 0, 0, 1], bool)
    fake = np.arange(10, 16, dtype=F32)
    report = write_array_subset(arrays, spec["attributes"], spec["paths"], mask, filters,
                                {}, tmp_path / "s.parquet", tmp_path / "d.txt",
                                values={"q": fake})
    t = pq.read_table(tmp_path / "s.parquet")
    assert t.column_names == ["image_id", "path", "identity", "split", "row", "g", "q"]
    assert t.column("q").to_pylist() == [10.0, 12.0, 15.0]
    assert t.column("g").to_pylist() == [1.0, 1.0, 1.0]
    assert t.column("image_id").to_pylist() == ["a/0.jpg", "b/0.jpg", "d/0.jpg"]
    assert report == {"n_identities": 3}
    prov = read_provenance(tmp_path / "s.parquet")
    assert prov["stage"] == "benchmark_subset" and "x" not in prov
    assert (tmp_path / "d.txt").read_text() == (
        "attribute: g lower_quartile: 1 upper_quartile: 1\n"
        "attribute: q lower_quartile: 0.0 upper_quartile: 1\n"
        "attribute: g lower_quartile: 0.0 upper_quartile: 2\n")
    # values for every column: the attribute file is not read (a missing one does not
    # matter)
    write_array_subset(arrays, tmp_path / "missing.npy", spec["paths"], mask, filters[:2], {},
                       tmp_path / "v.parquet", tmp_path / "v.txt",
                       values={"q": fake, "g": attrs[:, 1] + 1})
    assert pq.read_table(tmp_path / "v.parquet").column("g").to_pylist() == [2.0, 2.0, 2.0]


def test_empty_subset_and_no_flagged_row(tmp_path):
    """No selected row: an empty file of the same columns, 0 identities; a flag on a row
    not selected changes no id."""
    spec, _ = _subset_arrays(tmp_path)
    arrays = open_cast_arrays(spec)
    filters = parse_cast_filters([["g", 1]])
    report = write_array_subset(arrays, spec["attributes"], spec["paths"], np.zeros(6, bool),
                                filters, {}, tmp_path / "e.parquet", tmp_path / "e.txt",
                                nan_rows=np.ones(6, bool))
    t = pq.read_table(tmp_path / "e.parquet")
    assert t.num_rows == 0 and report == {"n_identities": 0}
    assert t.column_names == ["image_id", "path", "identity", "split", "row", "g"]
    mask = np.array([1, 1, 0, 0, 0, 0], bool)
    write_array_subset(arrays, spec["attributes"], spec["paths"], mask, filters, {},
                       tmp_path / "s.parquet", tmp_path / "s.txt",
                       nan_rows=np.array([0, 0, 1, 1, 1, 1], bool))
    t = pq.read_table(tmp_path / "s.parquet")
    assert t.column("image_id").to_pylist() == ["a/0.jpg", "a/1.jpg"]
    assert write_array_subset(arrays, spec["attributes"], spec["paths"], mask, filters, {},
                              tmp_path / "s.parquet", tmp_path / "s.txt") == \
        {"n_identities": 1}


def test_flagged_ids_follow_their_rows_across_path_blocks(tmp_path, monkeypatch):
    """Paths read in blocks of 3 rows: selected rows 0, 2, 3, 4, 6, 7, 9 come in spans
    (0, 2), (3, 4), (6, 7), (9); flagged rows 2, 4, 9 get ``//row3``, ``//row5``,
    ``//row10`` wherever they fall; identities k0 .. k4 (rows 2i, 2i + 1) -> 5."""
    n = 10
    paths = [f"k{i // 2}/{i}.jpg" for i in range(n)]
    spec = _spec(tmp_path / "a", np.arange(n, dtype=F32)[:, None], paths, ["v"])
    arrays = open_cast_arrays(spec)
    real = cf.read_path_blocks
    monkeypatch.setattr(cf, "read_path_blocks", lambda p, rows: real(p, rows, block=3))
    mask = np.zeros(n, bool)
    mask[[0, 2, 3, 4, 6, 7, 9]] = True
    flagged = np.zeros(n, bool)
    flagged[[2, 4, 9, 5]] = True
    report = write_array_subset(arrays, spec["attributes"], spec["paths"], mask,
                                parse_cast_filters([["v", "abs", -1, 99]]), {},
                                tmp_path / "s.parquet", tmp_path / "d.txt", nan_rows=flagged)
    t = pq.read_table(tmp_path / "s.parquet")
    assert t.column("image_id").to_pylist() == [
        "k0/0.jpg", "k1/2.jpg//row3", "k1/3.jpg", "k2/4.jpg//row5", "k3/6.jpg", "k3/7.jpg",
        "k4/9.jpg//row10"]
    assert t.column("path").to_pylist() == [paths[r] for r in (0, 2, 3, 4, 6, 7, 9)]
    assert t.column("identity").to_pylist() == ["k0", "k1", "k1", "k2", "k3", "k3", "k4"]
    assert t.column("v").to_pylist() == [0.0, 2.0, 3.0, 4.0, 6.0, 7.0, 9.0]
    assert report == {"n_identities": 5}


def test_manifest_ids_only_for_flagged_rows():
    """Rows 4, 7, 8 of a block; flagged (over all rows) 7 -> ``//row8``."""
    ids = pa.array(["x/4.jpg", "y/7.jpg", "y/8.jpg"])
    flagged = np.zeros(10, bool)
    flagged[[7, 9]] = True
    got = _manifest_ids(ids, np.array([4, 7, 8]), flagged)
    assert got.to_pylist() == ["x/4.jpg", "y/7.jpg//row8", "y/8.jpg"]
    assert got.type == pa.string()
    flagged[:] = False
    assert _manifest_ids(ids, np.array([4, 7, 8]), flagged) is ids
    flagged[[4, 8]] = True
    assert _manifest_ids(ids, np.array([4, 7, 8]), flagged).to_pylist() == \
        ["x/4.jpg//row5", "y/7.jpg", "y/8.jpg//row9"]


# --------------------------------------------------------------------- the pool


def _manifest(path: Path, status, exclude, rows, row_group_size: int = 3) -> Path:
    t = pa.table({"image_id": [f"i{r}" for r in rows],
                  "status": pa.array(status, pa.string()),
                  "exclude": pa.array(exclude, pa.bool_()),
                  "row": pa.array(rows, pa.int64())})
    pq.write_table(t, path, row_group_size=row_group_size)
    return path


def test_array_pool_reads_statuses_exclusions_and_row_order(tmp_path):
    """Manifest rows listed out of row order, in row groups of 3 (each its own
    dictionary, in its own order), a null status (never in the pool) and a null exclude
    (not excluded):

        listed  row  status          exclude
        0       5    ok              False
        1       0    duplicate       False
        2       3    nan_attribute   False
        3       1    nan_attribute   True
        4       4    None            False
        5       2    ok              None
        6       6    fallback        False
        7       7    nan_attribute   None

    cast_nan cast, statuses [ok]: pool rows 2, 3, 5, 7; NaN rows 3, 7 (row 1 excluded).
    drop: pool rows 2, 5. statuses [fallback] (no ok: NaN rows stay out): row 6."""
    status = ["ok", "duplicate", "nan_attribute", "nan_attribute", None, "ok", "fallback",
              "nan_attribute"]
    exclude = [False, False, False, True, False, None, False, None]
    rows = [5, 0, 3, 1, 4, 2, 6, 7]
    m = _manifest(tmp_path / "m.parquet", status, exclude, rows)
    assert pq.ParquetFile(m).num_row_groups == 3
    pool, nan = array_pool(m, ["ok"])
    assert np.flatnonzero(pool).tolist() == [2, 3, 5, 7]
    assert np.flatnonzero(nan).tolist() == [3, 7]
    assert pool.dtype == bool and nan.dtype == bool and len(pool) == len(nan) == 8
    pool, nan = array_pool(m, ["ok"], cast_nan="drop")
    assert np.flatnonzero(pool).tolist() == [2, 5]
    assert np.flatnonzero(nan).tolist() == [3, 7]
    pool, nan = array_pool(m, ["fallback"])
    assert np.flatnonzero(pool).tolist() == [6] and np.flatnonzero(nan).tolist() == [3, 7]
    pool, _ = array_pool(m, ["ok", "duplicate", "fallback"], cast_nan="cast")
    assert np.flatnonzero(pool).tolist() == [0, 2, 3, 5, 6, 7]
    one = _manifest(tmp_path / "one.parquet", status, exclude, rows, row_group_size=8)
    for a, b in zip(array_pool(one, ["ok"]), array_pool(m, ["ok"]), strict=True):
        np.testing.assert_array_equal(a, b)


def test_array_pool_reads_three_columns_only(tmp_path, monkeypatch):
    """The manifest's status, exclude and row columns are all it reads (the docstring's
    promise: a 42M-row manifest's ids and messages stay on disk)."""
    m = _manifest(tmp_path / "m.parquet", ["ok", "nan_attribute"], [False, False], [1, 0])
    asked = []
    real = pq.read_table

    def recorded(path, columns=None, **kw):
        asked.append(columns)
        return real(path, columns=columns, **kw)

    monkeypatch.setattr(pq, "read_table", recorded)
    pool, nan = array_pool(m, ["ok"])
    assert asked == [["status", "exclude", "row"]]
    assert pool.tolist() == [True, True] and nan.tolist() == [True, False]


# ---------------------------------------------------------------- build_array_subset


def _bench_arrays(tmp_path):
    # rows:  0        1        2        3        4        5        6        7
    paths = ["a/0.jpg", "a/1.jpg", "b/0.jpg", "b/1.jpg", "c/0.jpg", "c/1.jpg", "d/0.jpg",
             "d/1.jpg"]
    q = [0.1, 0.7, 0.3, NAN, 0.5, 0.7, 0.2, 0.9]
    g = [1, 1, 1, 0, 1, 0, 1, 1]
    attrs = np.array([q, g], F32).T.copy()
    spec = _spec(tmp_path / "a", attrs, paths, ["q", "g"], exclude=[True] + [False] * 7)
    build_cast_manifest(spec, tmp_path / "m.parquet")       # row 3: nan_attribute
    return spec


def test_build_array_subset_report_and_file(tmp_path, caplog):
    """q = 0.1 0.7 0.3 NaN 0.5 0.7 0.2 0.9, g = 1 1 1 0 1 0 1 1, row 0 excluded, row 3
    nan_attribute: pool (cast) rows 1 .. 7.

    filters [q, rank 0.5 .. 1] with the benchmark's rank_method cast: CAST's slice of all
    8 rows, positions 4 .. 6 of 0.1 0.2 0.3 0.5 0.7 0.7 0.9 NaN -> rows 1, 5, 7 (the 0.7
    tie is wholly inside); cast_filters [g, 1] -> rows 0, 1, 2, 4, 6, 7 (5 in the pool).
    Subset rows 1, 7: ids a/1.jpg, d/1.jpg, identities a, d."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    spec = _bench_arrays(tmp_path)
    bench = {"filters": [{"attribute": "q", "low": 0.5, "high": 1}], "rank_method": "cast",
             "cast_filters": [["g", 1]]}
    report = build_array_subset(spec, tmp_path / "m.parquet", bench, tmp_path / "s.parquet",
                                tmp_path / "d.txt", bench="b", statuses=["ok"],
                                provenance={"rule": "r"})
    assert report == {
        "n_rows": 8, "n_pool": 7, "n_subset": 2, "n_identities": 2,
        "cast_nan": {"mode": "cast", "n_rows": 1, "n_pool": 1, "n_subset": 0},
        "filters": [
            {"attribute": "q", "mode": "rank", "rank_method": "cast", "bounds": [0.5, 1],
             "n_valued": 7, "n_pass_all_rows": 3, "n_pass": 3, "n_nan_selected": 0,
             "n_nan_pass": 0, "tie_cuts": []},
            {"attribute": "g", "mode": "class", "rank_method": "facecast", "bounds": [1, 1],
             "n_valued": 8, "n_pass_all_rows": 6, "n_pass": 5, "n_nan_selected": 0,
             "n_nan_pass": 0, "tie_cuts": []}]}
    t = pq.read_table(tmp_path / "s.parquet")
    assert t.column("row").to_pylist() == [1, 7]
    assert t.column("image_id").to_pylist() == ["a/1.jpg", "d/1.jpg"]
    assert t.column("identity").to_pylist() == ["a", "d"]
    assert t.column("q").to_pylist() == [float(F32(0.7)), float(F32(0.9))]
    assert t.column("g").to_pylist() == [1.0, 1.0]
    prov = read_provenance(tmp_path / "s.parquet")
    assert prov["rule"] == "r" and prov["cast_nan"] == "cast"
    assert [f["rank_method"] for f in prov["filters"]] == ["cast", "facecast"]
    assert json.loads(read_metadata(tmp_path / "s.parquet")["facecast.subset_report"]) == \
        report
    assert (tmp_path / "d.txt").read_text() == (
        "attribute: q lower_quartile: 0.5 upper_quartile: 1\n"
        "attribute: g lower_quartile: 1 upper_quartile: 1\n")
    assert "cast_nan: cast - 1 rows (not excluded) have a NaN or infinite attribute cell " \
           "(status nan_attribute): 1 in the pool, 0 in the subset (as CAST: each filter " \
           "decides on its own column)" in _messages(caplog)


def test_build_array_subset_nan_rows_cast_and_drop(tmp_path):
    """[g, 0] -> rows 3 (nan_attribute, id b/1.jpg//row4) and 5. cast_nan drop: row 5
    only; no filter list at all: the pool. A facecast rank filter without rank_method
    ranks over the pool: [q, 0, 0.2] of the 6 valued pool rows 0.7 0.3 0.5 0.7 0.2 0.9
    (rows 1 2 4 5 6 7; ranks (r - 1) / 5: 0.2 -> 0, 0.3 -> 0.2) -> rows 2, 6."""
    spec = _bench_arrays(tmp_path)
    m = tmp_path / "m.parquet"
    report = build_array_subset(spec, m, {"cast_filters": [["g", 0]]}, tmp_path / "s.parquet",
                                tmp_path / "d.txt", bench="b", statuses=["ok"])
    t = pq.read_table(tmp_path / "s.parquet")
    assert t.column("image_id").to_pylist() == ["b/1.jpg//row4", "c/1.jpg"]
    assert t.column("path").to_pylist() == ["b/1.jpg", "c/1.jpg"]
    assert report["cast_nan"] == {"mode": "cast", "n_rows": 1, "n_pool": 1, "n_subset": 1}
    assert (report["n_pool"], report["n_subset"], report["n_identities"]) == (7, 2, 2)
    report = build_array_subset(spec, m, {"cast_filters": [["g", 0]], "cast_nan": "drop"},
                                tmp_path / "t.parquet", tmp_path / "t.txt", bench="b",
                                statuses=["ok"])
    assert pq.read_table(tmp_path / "t.parquet").column("image_id").to_pylist() == \
        ["c/1.jpg"]
    assert report["cast_nan"] == {"mode": "drop", "n_rows": 1, "n_pool": 0, "n_subset": 0}
    assert read_provenance(tmp_path / "t.parquet")["cast_nan"] == "drop"
    report = build_array_subset(spec, m, {}, tmp_path / "u.parquet", tmp_path / "u.txt",
                                bench="b", statuses=["ok"])
    assert pq.read_table(tmp_path / "u.parquet").column("row").to_pylist() == \
        [1, 2, 3, 4, 5, 6, 7]
    assert (tmp_path / "u.txt").read_text().startswith("attribute: Eyeglasses")
    report = build_array_subset(spec, m, {"filters": [{"attribute": "q", "low": 0,
                                                       "high": 0.2}]},
                                tmp_path / "v.parquet", tmp_path / "v.txt", bench="b",
                                statuses=["ok"], workers=2)
    assert pq.read_table(tmp_path / "v.parquet").column("row").to_pylist() == [2, 6]
    assert report["filters"][0]["rank_method"] == "facecast"


def test_build_array_subset_cast_ties_and_a_bad_cast_nan(tmp_path):
    """cast_ties row_order: [q, rank, 50, 75] -> positions 4 .. 4: the first 0.7 in row
    order, row 1 (the 0.7 tie of rows 1, 5 cut: 1 inside). A cast_nan outside cast/drop
    is refused, naming the benchmark."""
    spec = _bench_arrays(tmp_path)
    m = tmp_path / "m.parquet"
    report = build_array_subset(spec, m, {"cast_filters": [["q", "rank", 50, 75]],
                                          "cast_ties": "row_order"},
                                tmp_path / "s.parquet", tmp_path / "d.txt", bench="b",
                                statuses=["ok"])
    assert pq.read_table(tmp_path / "s.parquet").column("row").to_pylist() == [1]
    assert report["filters"][0]["tie_cuts"] == [{"value": float(F32(0.7)), "rows": 2,
                                                 "inside": 1}]
    with pytest.raises(FilterError) as exc:
        build_array_subset(spec, m, {"cast_nan": "keep"}, tmp_path / "x.parquet",
                           tmp_path / "x.txt", bench="web", statuses=["ok"])
    assert str(exc.value) == "benchmarks.web.cast_nan: 'keep' must be one of ['cast', 'drop']"
    assert not (tmp_path / "x.parquet").exists()


def test_build_array_subset_cast_ties_threads_and_one_read(tmp_path, caplog, monkeypatch):
    """20 rows, v = 1 at rows 0, 3, .., 18, else 0; w = row number. [v, rank, 0, 35]
    (positions 0 .. 5) cuts the tie of the 13 zeros, 6 inside: with cast_ties row_order
    the first six zero rows 1, 2, 4, 5, 7, 8; by default numpy's argsort decides (CAST's
    slice, written out) and the log gives the hint. [w, abs, 3, 17] -> rows 4 .. 16.
    The columns are read once (the subset's values come from that read); two columns run
    in two threads only when ``workers`` says so."""
    caplog.set_level(logging.INFO, logger=LOGGER)
    v = (np.arange(20) % 3 == 0).astype(F32)
    attrs = np.c_[v, np.arange(20, dtype=F32)]
    spec = _spec(tmp_path / "a", attrs, [f"p{i}/x.jpg" for i in range(20)], ["v", "w"])
    m = tmp_path / "m.parquet"
    build_cast_manifest(spec, m)
    pools = []
    real_pool = cf.ThreadPoolExecutor

    def counted(max_workers):
        pools.append(max_workers)
        return real_pool(max_workers=max_workers)

    def no_second_read(*a, **k):
        raise AssertionError("a filtered column was read twice")

    monkeypatch.setattr(cf, "ThreadPoolExecutor", counted)
    monkeypatch.setattr(cf, "read_column", no_second_read)
    tuples = [["v", "rank", 0, 35], ["w", "abs", 3, 17]]
    what = "attribute: v lower_quartile: 0.0 upper_quartile: 35"
    cut = "13 rows tied at 0.0 straddle a cut: 6 inside, 7 outside"
    report = build_array_subset(spec, m, {"cast_filters": tuples, "cast_ties": "row_order"},
                                tmp_path / "r.parquet", tmp_path / "r.txt", bench="b",
                                statuses=["ok"])
    assert pq.read_table(tmp_path / "r.parquet").column("row").to_pylist() == [4, 5, 7, 8]
    assert report["filters"][0]["tie_cuts"] == [{"value": 0.0, "rows": 13, "inside": 6}]
    assert [f["ties"] for f in read_provenance(tmp_path / "r.parquet")["filters"]] == \
        ["row_order", "argsort"]
    assert f"{what}: {cut}; cast_ties: row_order (row order decides, the same on every " \
           "machine)" in _messages(caplog)
    assert pools == []
    caplog.clear()
    report = build_array_subset(spec, m, {"cast_filters": tuples}, tmp_path / "s.parquet",
                                tmp_path / "s.txt", bench="b", statuses=["ok"], workers=2)
    cast = np.zeros(20, bool)
    cast[np.argsort(v)[0:6]] = True                          # CAST's slice
    want = np.flatnonzero(cast & (np.arange(20) > 3) & (np.arange(20) < 17)).tolist()
    assert pq.read_table(tmp_path / "s.parquet").column("row").to_pylist() == want
    assert report["filters"][0]["tie_cuts"] == [{"value": 0.0, "rows": 13, "inside": 6}]
    assert [f["ties"] for f in read_provenance(tmp_path / "s.parquet")["filters"]] == \
        ["argsort", "argsort"]
    assert f"{what}: {cut}; {TIES_HINT}" in _messages(caplog)
    assert pools == [2]


def test_build_array_subset_errors_name_the_benchmark(tmp_path):
    spec = _bench_arrays(tmp_path)
    m = tmp_path / "m.parquet"
    with pytest.raises(FilterError) as exc:
        build_array_subset(spec, m, {"filters": [{"attribute": "q", "mode": "x"}]},
                           tmp_path / "s.parquet", tmp_path / "d.txt", bench="web",
                           statuses=["ok"])
    assert str(exc.value) == ("benchmark 'web': filter {'attribute': 'q', 'mode': 'x'}: "
                              "mode must be rank, value or class")
    with pytest.raises(FilterError) as exc:
        build_array_subset(spec, m, {"cast_filters": [["q", "up", 1, 2]]},
                           tmp_path / "s.parquet", tmp_path / "d.txt", bench="web",
                           statuses=["ok"])
    assert str(exc.value) == "benchmarks.web.cast_filters[0]: style 'up' must be rank or abs"
