"""CAST filtering: percentile ranks with ties and NaNs, masks, description.txt, subsets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from facecast.analysis.filtering import (
    AttributeFilter,
    FilterError,
    build_subset,
    describe_filters,
    filter_mask,
    parse_filters,
    percentile_ranks,
    select_subset,
)
from facecast.parquet_io import read_parquet, write_parquet


def test_percentile_ranks_exact_with_ties_and_nans():
    v = np.array([10.0, np.nan, 30.0, 20.0, 20.0, 40.0])
    # valued: 10, 20, 20, 30, 40 -> average ranks 1, 2.5, 2.5, 4, 5 -> (r-1)/4
    np.testing.assert_array_equal(percentile_ranks(v),
                                  [0.0, np.nan, 0.75, 0.375, 0.375, 1.0])
    np.testing.assert_array_equal(percentile_ranks(np.array([np.nan, 3.0])), [np.nan, 0.5])
    assert np.isnan(percentile_ranks(np.array([np.nan]))).all()


def test_rank_filter_top_and_bottom_fraction_on_distinct_values():
    v = np.arange(100, dtype=float)[::-1]          # 99 .. 0
    pool = np.ones(100, bool)
    top = filter_mask(v, pool, AttributeFilter("x", "rank", 0.9, 1.0))
    bottom = filter_mask(v, pool, AttributeFilter("x", "rank", 0.0, 0.2))
    assert set(v[top]) == set(range(90, 100))       # top 10 %
    assert set(v[bottom]) == set(range(0, 20))      # bottom 20 %


def test_rank_filter_never_splits_ties_and_ranks_over_the_pool_only():
    v = np.array([1.0, 2.0, 2.0, 2.0, 3.0, np.nan, 100.0])
    pool = np.array([True, True, True, True, True, True, False])  # 100 is not in the pool
    # pool ranks: 1 -> 0, 2 (x3) -> 0.5, 3 -> 1, NaN never selected
    m = filter_mask(v, pool, AttributeFilter("x", "rank", 0.4, 1.0))
    np.testing.assert_array_equal(m, [False, True, True, True, True, False, False])
    m = filter_mask(v, pool, AttributeFilter("x", "rank", 0.6, 1.0))
    np.testing.assert_array_equal(m, [False, False, False, False, True, False, False])


def test_value_and_class_filters_and_and():
    df = pd.DataFrame({
        "image_id": list("abcdef"), "identity": list("aabbcc"), "split": "test",
        "exclude": [False, False, False, False, True, False],
        "status": ["ok", "ok", "ok", "no_face", "ok", "ok"],
        "age": [20.0, 35.0, 50.0, 60.0, 70.0, np.nan],
        "glasses": [1.0, 1.0, 0.0, 1.0, 1.0, 1.0],
    })
    filters = parse_filters([{"attribute": "age", "mode": "value", "low": 30, "high": 80},
                             {"attribute": "glasses", "mode": "class", "value": 1}], "t")
    mask, report = select_subset(df, filters)
    # pool: a, b, c, f (d not ok, e excluded); age 30..80: b, c; glasses == 1: b
    np.testing.assert_array_equal(mask, [False, True, False, False, False, False])
    assert report["n_pool"] == 4 and report["n_subset"] == 1
    assert [f["n_pass"] for f in report["filters"]] == [2, 3]


def test_description_txt_is_byte_exact_in_cast_format():
    # CAST's published CC11/random/description.txt, byte for byte
    cast = ("attribute: Eyeglasses lower_quartile: 0.0 upper_quartile: 1\n"
            "attribute: Eyeglasses lower_quartile: 0.0 upper_quartile: 1\n")
    f = parse_filters([{"attribute": "Eyeglasses", "mode": "rank", "low": 0.0, "high": 1}] * 2)
    assert describe_filters(f) == cast
    g = parse_filters([{"attribute": "fairface_black", "mode": "rank", "low": 0.9, "high": 1.0},
                       {"attribute": "label_glasses", "mode": "class", "value": 1}])
    assert describe_filters(g) == (
        "attribute: fairface_black lower_quartile: 0.9 upper_quartile: 1.0\n"
        "attribute: label_glasses lower_quartile: 1 upper_quartile: 1\n")
    assert describe_filters([]) == ""


@pytest.mark.parametrize("spec, msg", [
    ({"mode": "rank", "low": 0, "high": 1}, "no 'attribute'"),
    ({"attribute": "x", "mode": "rank", "low": 0.5, "high": 1.5}, "fractions"),
    ({"attribute": "x", "mode": "value", "low": 2, "high": 1}, "low > high"),
    ({"attribute": "x", "mode": "class"}, "needs 'value'"),
    ({"attribute": "x", "mode": "median"}, "rank, value or class"),
])
def test_malformed_filters_are_refused(spec, msg):
    with pytest.raises(FilterError, match=msg):
        AttributeFilter.from_config(spec, "bench")


def test_build_subset_writes_subset_and_description(tmp_path):
    n = 40
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"image_id": [f"i{k}" for k in range(n)],
                       "identity": [f"p{k // 4}" for k in range(n)], "split": "test",
                       "exclude": np.zeros(n, bool), "status": "ok",
                       "blur": rng.uniform(0, 5, n)})
    src = write_parquet(df, tmp_path / "attributes.parquet")
    filters = parse_filters([{"attribute": "blur", "mode": "rank", "low": 0.75, "high": 1.0}])
    report = build_subset(src, filters, tmp_path / "b/subset.parquet",
                          tmp_path / "b/description.txt")
    sub = read_parquet(tmp_path / "b/subset.parquet")
    assert report["n_subset"] == len(sub) == 10
    assert sub["blur"].min() >= np.quantile(df["blur"], 0.75)
    assert (tmp_path / "b/description.txt").read_text() == \
        "attribute: blur lower_quartile: 0.75 upper_quartile: 1.0\n"
    with pytest.raises(FilterError, match="not in"):
        build_subset(src, parse_filters([{"attribute": "nope", "low": 0, "high": 1}]),
                     tmp_path / "c/subset.parquet", tmp_path / "c/description.txt")
