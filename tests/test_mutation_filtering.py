"""Issue 51: CAST filtering (facecast.analysis.filtering) pinned by hand-worked values and
by CAST's own selection written out here (``np.argsort(values)[start:stop]``): the
numbers of description.txt, the config errors, the rank slices with ties and NaNs in
every dtype, the modes of a mask and the counts of a subset's report, so a mutant of
`make mutate MODULES=analysis.filtering` fails here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facecast.analysis.filtering import (
    CAST_NO_OP_DESCRIPTION,
    CAST_RANK_NOTE,
    AttributeFilter,
    FilterError,
    _percent,
    as_column_number,
    cast_number,
    cast_rank_select,
    describe_filters,
    filter_mask,
    parse_filters,
    percentile_ranks,
    select_subset,
)


def test_cast_numbers_are_written_as_casts_files_write_them():
    """Whole numbers without a point, zero as ``zero``, others as Python writes them;
    text and booleans as they are."""
    cases = [(1, "1"), (1.0, "1"), (-3.0, "-3"), (np.float32(2.0), "2"), (np.int64(7), "7"),
             (0.9, "0.9"), (1.5, "1.5"), (0, "0.0"), (0.0, "0.0"), (np.int64(0), "0.0"),
             (True, "True"), (False, "False"), ("x", "x"), (None, "None")]
    assert [cast_number(x) for x in cases for x in [x[0]]] == [w for _, w in cases]
    assert cast_number(0, zero="0") == "0" and cast_number(0.0, zero="zero") == "zero"


def test_description_lines_and_the_rank_note():
    """A class filter writes its value as both bounds (zero as ``0``); CAST's tuples
    write their own bounds; a CAST rank tuple adds the note once; no filter: CAST's no-op."""
    assert describe_filters([]) == CAST_NO_OP_DESCRIPTION
    cls = AttributeFilter("Male", "class", value=0)
    assert cls.description_line() == "attribute: Male lower_quartile: 0 upper_quartile: 0\n"
    val = AttributeFilter("age", "value", 0, 30.5)
    assert val.description_line() == \
        "attribute: age lower_quartile: 0.0 upper_quartile: 30.5\n"
    rank = AttributeFilter("x", "rank", 0.9, 1.0, rank_method="cast", cast_bounds=(90, 100))
    assert rank.description_line() == "attribute: x lower_quartile: 90 upper_quartile: 100\n"
    tup = AttributeFilter("y", "value", 1.0, 2.0, cast_bounds=(0, 2.5))
    assert describe_filters([cls, val]) == cls.description_line() + val.description_line()
    assert describe_filters([tup]) == tup.description_line()           # value: no note
    assert describe_filters([rank, tup]) == (rank.description_line() + tup.description_line()
                                             + CAST_RANK_NOTE)


def _err(spec, bench="b", method="facecast"):
    with pytest.raises(FilterError) as exc:
        AttributeFilter.from_config(spec, bench, method)
    return str(exc.value)


def test_filter_config_mistakes_name_the_benchmark_and_the_filter():
    """Each mistake's message, word for word."""
    w = "benchmark 'b': filter "
    assert _err({"mode": "rank"}) == w + "{'mode': 'rank'} has no 'attribute'"
    assert _err({"attribute": "a", "mode": "abs"}) == \
        w + "{'attribute': 'a', 'mode': 'abs'}: mode must be rank, value or class"
    assert _err({"attribute": "a", "low": 0, "high": 1, "rank_method": "x"}) == \
        w + ("{'attribute': 'a', 'low': 0, 'high': 1, 'rank_method': 'x'}: rank_method must "
             "be one of ['facecast', 'cast']")
    assert _err({"attribute": "a", "mode": "class"}) == \
        w + "{'attribute': 'a', 'mode': 'class'}: a class filter needs 'value'"
    assert _err({"attribute": "a", "mode": "value", "low": 1}) == \
        w + "{'attribute': 'a', 'mode': 'value', 'low': 1}: a value filter needs 'low' and 'high'"
    assert _err({"attribute": "a", "high": 1}) == \
        w + "{'attribute': 'a', 'high': 1}: a rank filter needs 'low' and 'high'"
    assert _err({"attribute": "a", "mode": "value", "low": 2, "high": 1}) == \
        w + "{'attribute': 'a', 'mode': 'value', 'low': 2, 'high': 1}: low > high"
    for lo, hi in ((-0.1, 0.5), (0.5, 1.1), (1.2, 1.5)):
        assert _err({"attribute": "a", "low": lo, "high": hi}).endswith(
            ": rank bounds are fractions in [0, 1]")


def test_filter_config_defaults_and_rank_methods():
    """``mode`` defaults to rank; the benchmark's rank_method applies unless the filter
    names its own (None: facecast); value and class filters rank nothing (facecast)."""
    f = AttributeFilter.from_config({"attribute": 3, "low": 0, "high": 1})
    assert (f.attribute, f.mode, f.low, f.high, f.rank_method) == ("3", "rank", 0, 1,
                                                                   "facecast")
    assert AttributeFilter.from_config({"attribute": "a", "low": 0.5, "high": 0.5},
                                       rank_method="cast").rank_method == "cast"
    assert AttributeFilter.from_config({"attribute": "a", "low": 0, "high": 1,
                                        "rank_method": "facecast"},
                                       rank_method="cast").rank_method == "facecast"
    assert AttributeFilter.from_config({"attribute": "a", "low": 0, "high": 1,
                                        "rank_method": None},
                                       rank_method="cast").rank_method == "facecast"
    v = AttributeFilter.from_config({"attribute": "a", "mode": "value", "low": -5, "high": 9},
                                    rank_method="cast")
    assert (v.mode, v.low, v.high, v.rank_method) == ("value", -5, 9, "facecast")
    c = AttributeFilter.from_config({"attribute": "a", "mode": "class", "value": "x"})
    assert (c.mode, c.value, c.low, c.high) == ("class", "x", None, None)
    assert parse_filters(None) == [] and parse_filters([{"attribute": "a", "low": 0,
                                                         "high": 1}], "b", "cast")[0] \
        .rank_method == "cast"
    assert AttributeFilter.from_config({"attribute": "a", "low": 0, "high": 1}).ties == \
        "argsort"


def test_percent_bounds_without_float_noise():
    """0.07 * 100 is 7.000000000000001 in floats: CAST's bound is 7.0."""
    assert 0.07 * 100 != 7.0
    assert _percent(0.07) == 7.0 and _percent(0.9) == 90.0 and _percent(1) == 100.0
    assert _percent(0.123456789012) == 12.345678901


def _cast_slice(v, lo, hi, kind="quicksort"):
    n = len(v)
    start, stop = round(n * lo / 100), round(n * hi / 100) - 1
    m = np.zeros(n, bool)
    m[np.argsort(v, kind=kind)[start:stop]] = True
    return m


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.int16,
                                   np.uint8, np.float16])
def test_cast_rank_select_is_casts_argsort_slice(dtype):
    """Every slice of CAST's percent bounds, on values with ties (and NaNs for floats),
    is exactly ``np.argsort(v)[round(N lo/100):round(N hi/100) - 1]``; ``row_order`` is
    the stable argsort's slice."""
    rng = np.random.default_rng(int(np.dtype(dtype).itemsize))
    for n, levels in ((40, 6), (37, 40), (25, 3)):
        v = rng.integers(0, levels, n).astype(dtype)
        if np.dtype(dtype).kind == "f":
            v[rng.random(n) < 0.15] = np.nan
        for lo, hi in ((0, 100), (0, 10), (10, 20), (90, 100), (33.3, 66.7), (50, 50),
                       (0, 0), (95, 100), (2.5, 97.5)):
            got = cast_rank_select(v, lo, hi)
            want = _cast_slice(v, lo, hi)
            assert got.tolist() == want.tolist(), (n, levels, lo, hi)
            stable = cast_rank_select(v, lo, hi, "row_order")
            assert stable.tolist() == _cast_slice(v, lo, hi, "stable").tolist(), (lo, hi)
            cached = cast_rank_select(v, lo, hi, argsort=lambda v=v: np.argsort(v))
            assert cached.tolist() == want.tolist()


def test_filter_mask_modes():
    """class (text and float32 numbers), value (inclusive, in the column's float32),
    CAST's abs (strict), facecast ranks over the pool and CAST ranks over every row,
    both ANDed with the pool."""
    pool = np.array([True, True, True, True, False, True])
    f32 = np.array([0.7, 0.2, 0.7, np.nan, 0.7, 1.0], np.float32)
    m = filter_mask(f32, pool, AttributeFilter("a", "class", value=0.7))
    assert m.tolist() == [True, False, True, False, False, False]
    text = np.array(["x", "y", "x", "", "x", "x"], object)
    assert filter_mask(text, pool, AttributeFilter("a", "class", value="x")).tolist() == \
        [True, False, True, False, False, True]
    val = filter_mask(f32, pool, AttributeFilter("a", "value", 0.2, 0.7))
    assert val.tolist() == [True, True, True, False, False, False]
    big = filter_mask(f32, pool, AttributeFilter("a", "value", 0.5, 1e40))
    assert big.tolist() == [True, False, True, False, False, True]
    f64 = f32.astype(np.float64)
    strict = filter_mask(f64, pool, AttributeFilter("a", "abs", float(f32[1]), 1.0))
    assert strict.tolist() == [True, False, True, False, False, False]
    ints = np.array([5, 1, 3, 3, 9, 7])
    r = filter_mask(ints, pool, AttributeFilter("a", "rank", 0.5, 1.0))
    # pool values 5, 1, 3, 3, 7 -> ranks 0.75, 0, 0.375, 0.375, 1
    assert r.tolist() == [True, False, False, False, False, True]
    c = filter_mask(ints, pool, AttributeFilter("a", "rank", 0.5, 1.0, rank_method="cast"))
    want = _cast_slice(ints.astype(np.float64), 50, 100) & pool
    assert c.tolist() == want.tolist()
    assert as_column_number(1e40, np.dtype(np.float32)) == np.inf
    assert as_column_number(-1e40, np.dtype(np.float32)) == -np.inf
    assert as_column_number(0.7, np.dtype(np.float32)) == np.float32(0.7)
    assert as_column_number(0.7, np.dtype(np.float32)).dtype == np.float32


def test_select_subset_counts_the_pool_and_each_filter():
    """The report: rows, pool (status and exclude), statuses, per filter its attribute,
    mode, rank method, valued and passing pool rows, and the subset."""
    df = pd.DataFrame({
        "image_id": list("abcdefg"), "identity": list("aabbccd"), "split": "test",
        "exclude": [False, False, None, False, True, False, False],
        "status": ["ok", "ok", "ok", "no_face", "ok", "aligned_input", "landmarks_given"],
        "age": [20.0, 35.0, np.nan, 60.0, 70.0, 40.0, 50.0],
        "sex": ["m", "f", None, "m", "m", "f", "f"]})
    filters = [AttributeFilter("age", "value", 30, 60), AttributeFilter("sex", "class",
                                                                        value="f")]
    mask, rep = select_subset(df, filters)
    # pool: a, b, c (exclude null = False), f, g (landmarks_given counts as ok)
    assert mask.tolist() == [False, True, False, False, False, True, True]
    assert rep == {"n_rows": 7, "n_pool": 5, "statuses": ["ok", "aligned_input"],
                   "filters": [{"attribute": "age", "mode": "value",
                                "rank_method": "facecast", "n_valued": 4, "n_pass": 3},
                               {"attribute": "sex", "mode": "class",
                                "rank_method": "facecast", "n_valued": 5, "n_pass": 3}],
                   "n_subset": 3}
    mask, rep = select_subset(df, [], statuses=["no_face"])
    assert mask.tolist() == [False, False, False, True, False, False, False]
    assert rep["n_pool"] == 1 and rep["statuses"] == ["no_face"] and rep["n_subset"] == 1
    with pytest.raises(FilterError, match=r"^attribute column\(s\) \['height'\] not in the "
                                          r"attribute table; available: \['age', "):
        select_subset(df, [AttributeFilter("height", "value", 0, 1)])


@pytest.mark.parametrize("text_type", ["string", "large_string"])
def test_a_class_filter_on_text_compares_text_in_both_arrow_string_types(text_type):
    """Bug found by issue 51's tests: a class filter on a ``large_string`` column (pandas
    3's text columns become one) was cast to float64 and raised; both string types
    compare as text, a null as no value."""
    import pyarrow as pa

    table = pa.table({"image_id": ["a", "b", "c"], "identity": ["p", "q", "r"],
                      "split": ["test"] * 3, "exclude": [False] * 3, "status": ["ok"] * 3,
                      "race": pa.array(["Black", None, "White"], getattr(pa, text_type)())})
    mask, rep = select_subset(table, [AttributeFilter("race", "class", value="White")])
    assert mask.tolist() == [False, False, True] and rep["n_subset"] == 1


def test_rank_bounds_edges_class_attribute_names_and_the_benchmark_in_errors():
    """Rank bounds may be 0 and 1 themselves; a class filter's attribute is text; the
    benchmark named in a parse error is the one given."""
    for lo, hi in ((1.0, 1.0), (0, 0), (0.0, 1)):
        f = AttributeFilter.from_config({"attribute": "a", "low": lo, "high": hi})
        assert (f.low, f.high) == (lo, hi)
    c = AttributeFilter.from_config({"attribute": 5, "mode": "class", "value": 1})
    assert c.attribute == "5" and c.value == 1
    with pytest.raises(FilterError, match=r"^benchmark 'bb': filter \{'mode': 'rank'\} "):
        parse_filters([{"mode": "rank"}], "bb")


def test_percentile_ranks_of_one_two_and_integer_values():
    """One valued image ranks 0.5; two rank 0 and 1; ``(average rank - 1) / (n - 1)``."""
    assert percentile_ranks(np.array([3.0])).tolist() == [0.5]
    assert percentile_ranks(np.array([np.nan, 7.0, np.nan])).tolist()[1] == 0.5
    assert percentile_ranks(np.array([2.0, 1.0])).tolist() == [1.0, 0.0]
    assert percentile_ranks(np.array([4, 1, 2, 2])).tolist() == [1.0, 0.0, 0.5, 0.5]
    out = percentile_ranks(np.array([], np.float64))
    assert out.shape == (0,) and out.dtype == np.float64
    # inclusive lower bound: the tie at 0.5 is in
    pool = np.ones(4, bool)
    m = filter_mask(np.array([4, 1, 2, 2]), pool, AttributeFilter("a", "rank", 0.5, 0.5))
    assert m.tolist() == [False, False, True, True]
