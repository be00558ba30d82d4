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
    build_subset,
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


# ------------------------------------------------------------- build_subset: what it writes


def _attributes(tmp_path, level=None):
    """Seven images of four identities: statuses, an exclude with a null, a float age with
    a NaN, a 0/1 ``Male``, a column no filter reads."""
    from facecast.io.parquet_io import write_parquet

    key = "template_id" if level == "template" else "image_id"
    df = pd.DataFrame({
        key: list("abcdefg"), "identity": list("aabbccd"), "split": ["test"] * 6 + ["val"],
        "exclude": [False, False, None, False, True, False, False],
        "status": ["ok", "ok", "ok", "no_face", "ok", "aligned_input", "ok"],
        "age": [20.0, 35.0, np.nan, 60.0, 70.0, 40.0, 50.0],
        "Male": [1, 0, 1, 0, 0, 0, 1], "junk": np.arange(7.0)})
    if level == "template":
        df["n_images"] = [2, 1, 1, 3, 1, 1, 2]
    prov = {"level": level} if level else None
    return write_parquet(df, tmp_path / "attributes.parquet", provenance=prov)


def test_build_subset_writes_the_rows_columns_report_provenance_and_description(tmp_path):
    """Pool a, b, c, f, g (no_face d and excluded e out); age in [30, 60]: b, f, g; Male 0:
    b, f. The subset keeps the keys and each filtered attribute once, in filter order; its
    report is select_subset's with the level and the identities (b: a, f: c)."""
    import json

    from facecast.io.parquet_io import read_metadata, read_parquet, read_provenance

    src = _attributes(tmp_path)
    filters = [AttributeFilter("age", "value", 30, 60), AttributeFilter("Male", "class",
                                                                        value=0),
               AttributeFilter("age", "value", 0, 100), AttributeFilter("split", "class",
                                                                        value="test")]
    out = tmp_path / "bench" / "subset.parquet"
    report = build_subset(src, filters, out, tmp_path / "bench" / "description.txt",
                          provenance={"config_hash": "h"})
    sub = read_parquet(out)
    assert sub.columns.tolist() == ["image_id", "identity", "split", "age", "Male"]
    assert sub["image_id"].tolist() == ["b", "f"] and sub["age"].tolist() == [35.0, 40.0]
    assert sub["Male"].tolist() == [0, 0] and sub["identity"].tolist() == ["a", "c"]
    want = {"n_rows": 7, "n_pool": 5, "statuses": ["ok", "aligned_input"],
            "filters": [{"attribute": "age", "mode": "value", "rank_method": "facecast",
                         "n_valued": 4, "n_pass": 3},
                        {"attribute": "Male", "mode": "class", "rank_method": "facecast",
                         "n_valued": 5, "n_pass": 2},
                        {"attribute": "age", "mode": "value", "rank_method": "facecast",
                         "n_valued": 4, "n_pass": 4},
                        {"attribute": "split", "mode": "class", "rank_method": "facecast",
                         "n_valued": 5, "n_pass": 4}],
            "n_subset": 2, "level": "image", "n_identities": 2}
    assert report == want
    assert json.loads(read_metadata(out)["facecast.subset_report"]) == want
    prov = read_provenance(out)
    assert prov["stage"] == "benchmark_subset" and prov["config_hash"] == "h"
    assert prov["statuses"] == ["ok", "aligned_input"] and prov["level"] == "image"
    assert prov["filters"] == [json.loads(json.dumps(vars(f))) for f in filters]
    assert (tmp_path / "bench" / "description.txt").read_text() == describe_filters(filters)
    # the statuses given reach the pool, the report and the provenance
    report = build_subset(src, [], tmp_path / "s2" / "subset.parquet",
                          tmp_path / "s2" / "description.txt", statuses=("no_face",))
    assert (report["n_pool"], report["n_subset"], report["n_identities"]) == (1, 1, 1)
    assert read_provenance(tmp_path / "s2" / "subset.parquet")["statuses"] == ["no_face"]
    assert read_parquet(tmp_path / "s2" / "subset.parquet").columns.tolist() == \
        ["image_id", "identity", "split"]


def test_build_subset_of_templates_keeps_template_keys_and_the_ok_pool(tmp_path):
    """A template-level table: template_id and n_images kept, the pool is status ``ok``
    whatever statuses are asked (f, aligned_input at image level, is out)."""
    from facecast.io.parquet_io import read_parquet, read_provenance

    src = _attributes(tmp_path, level="template")
    out = tmp_path / "t" / "subset.parquet"
    report = build_subset(src, [AttributeFilter("age", "value", 30, 60)], out,
                          tmp_path / "t" / "description.txt",
                          statuses=("ok", "aligned_input"))
    sub = read_parquet(out)
    assert sub.columns.tolist() == ["template_id", "identity", "split", "n_images", "age"]
    assert sub["template_id"].tolist() == ["b", "g"] and sub["n_images"].tolist() == [1, 2]
    assert report["level"] == "template" and report["statuses"] == ["ok"]
    assert (report["n_pool"], report["n_subset"], report["n_identities"]) == (4, 2, 2)
    prov = read_provenance(out)
    assert prov["level"] == "template" and prov["statuses"] == ["ok"]


def test_build_subset_names_a_missing_attribute_and_warns_on_an_empty_pool(tmp_path, caplog):
    """A filter on a column the table lacks: the error names it and the table's
    non-key columns; a pool without a row: the warning says so, the subset is empty with
    no identity."""
    import logging

    from facecast.io.parquet_io import read_parquet

    src = _attributes(tmp_path)
    with pytest.raises(FilterError) as exc:
        build_subset(src, [AttributeFilter("height", "value", 0, 1),
                           AttributeFilter("age", "value", 0, 1)],
                     tmp_path / "x" / "subset.parquet", tmp_path / "x" / "description.txt")
    assert str(exc.value) == (
        f"attribute column(s) ['height'] not in {src}; available: "
        "['Male', 'age', 'exclude', 'junk', 'status']")
    assert not (tmp_path / "x").exists()
    with caplog.at_level(logging.WARNING, logger="facecast.analysis.filtering"):
        report = build_subset(src, [], tmp_path / "e" / "subset.parquet",
                              tmp_path / "e" / "description.txt", statuses=("gone",))
    assert (report["n_pool"], report["n_subset"], report["n_identities"]) == (0, 0, 0)
    assert len(read_parquet(tmp_path / "e" / "subset.parquet")) == 0
    assert [r.name for r in caplog.records] == ["facecast.analysis.filtering"]
    assert [r.getMessage() for r in caplog.records] == [
        f"EMPTY BENCHMARK POOL: none of the 7 rows of {src} may enter a benchmark (status "
        "and exclude); every benchmark of this dataset is empty (check the manifest's "
        "exclude column and statuses)"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="facecast.analysis.filtering"):
        build_subset(src, [], tmp_path / "f" / "subset.parquet",
                     tmp_path / "f" / "description.txt")
    assert caplog.records == []


def test_row_order_reaches_casts_rank_slice_through_every_caller():
    """``ties: row_order`` cuts a tie in row order (numpy's stable sort), through
    cast_rank_mask and filter_mask alike: 300 values of 0/1, the slice [50 %, 100 %) cut
    inside the ones."""
    from facecast.analysis.filtering import cast_rank_mask

    rng = np.random.default_rng(0)
    v = (rng.random(300) < 0.5).astype(np.float64)
    n = len(v)
    start, stop = round(n * 50 / 100), round(n * 100 / 100) - 1
    want = np.zeros(n, bool)
    want[np.argsort(v, kind="stable")[start:stop]] = True
    np.testing.assert_array_equal(cast_rank_mask(v, 0.5, 1.0, "row_order"), want)
    f = AttributeFilter("x", "rank", 0.5, 1.0, rank_method="cast", ties="row_order")
    np.testing.assert_array_equal(filter_mask(v, np.ones(n, bool), f), want)
    # the default: CAST's own np.argsort
    cast = np.zeros(n, bool)
    cast[np.argsort(v)[start:stop]] = True
    np.testing.assert_array_equal(cast_rank_mask(v, 0.5, 1.0), cast)


def test_value_bounds_on_an_integer_column_compare_as_floats():
    """An integer column compares in float64: [0.5, 1] keeps the ones only (in the
    column's own integer type 0.5 would be 0)."""
    v = np.array([0, 1, 1, 0, 2], np.int64)
    f = AttributeFilter("Male", "value", 0.5, 1)
    assert filter_mask(v, np.ones(5, bool), f).tolist() == [False, True, True, False, False]


def test_a_missing_text_is_the_empty_class_and_no_class_named_none():
    """A class filter on text: a missing value is read as the empty text - a filter on
    ``""`` selects it, one on ``"None"`` does not; a class filter counts every pool row as
    valued, even where a numeric column is NaN."""
    df = pd.DataFrame({"image_id": list("abcd"), "identity": list("abcd"), "split": "test",
                       "exclude": False, "status": "ok", "hair": ["x", None, "", "None"],
                       "Male": [1.0, np.nan, 0.0, 1.0]})
    mask, rep = select_subset(df, [AttributeFilter("hair", "class", value="")])
    assert mask.tolist() == [False, True, True, False]
    mask, rep = select_subset(df, [AttributeFilter("hair", "class", value="None")])
    assert mask.tolist() == [False, False, False, True]
    mask, rep = select_subset(df, [AttributeFilter("Male", "class", value=1)])
    assert mask.tolist() == [True, False, False, True]
    assert rep["filters"][0]["n_valued"] == 4 and rep["filters"][0]["n_pass"] == 2


def test_rank_bounds_above_one_and_the_default_benchmark_name():
    """A rank filter's low above 1 is refused; without a benchmark name the error says
    ``benchmark ''``."""
    with pytest.raises(FilterError, match=r"^benchmark '': filter "):
        AttributeFilter.from_config({"attribute": "x", "low": 1.5, "high": 1.0})
    with pytest.raises(FilterError, match=r"^benchmark '': filter "):
        parse_filters([{"attribute": "x", "mode": "rank", "low": 0.2, "high": 1.5}])


def test_an_empty_column_and_a_frame_with_its_own_index():
    """CAST's slice of no value is empty (no sort of nothing); a DataFrame's index (here
    image names) adds no column: the error lists the frame's own columns."""
    assert cast_rank_select(np.array([]), 0.0, 100.0).tolist() == []
    assert cast_rank_select(np.array([], np.float32), 0.0, 100.0).tolist() == []
    df = pd.DataFrame({"image_id": list("abc"), "identity": list("abc"), "split": "test",
                       "exclude": False, "status": "ok", "age": [1.0, 2.0, 3.0]})
    with pytest.raises(FilterError) as exc:
        select_subset(df.set_index(pd.Index(list("xyz"))),
                      [AttributeFilter("height", "value", 0, 1)])
    assert str(exc.value).endswith("available: ['age', 'exclude', 'identity', 'image_id', "
                                   "'split', 'status']")
