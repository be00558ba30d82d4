"""CAST filtering: percentile ranks with ties and NaNs, masks, description.txt, subsets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from facecast.analysis.filtering import (
    CAST_NO_OP_DESCRIPTION,
    AttributeFilter,
    FilterError,
    build_subset,
    describe_filters,
    filter_mask,
    parse_filters,
    percentile_ranks,
    select_subset,
)
from facecast.io.parquet_io import read_parquet, write_parquet


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
    # CAST writes 1, not 1.0 (YAML's `high: 1.0` is a float)
    assert describe_filters(g) == (
        "attribute: fairface_black lower_quartile: 0.9 upper_quartile: 1\n"
        "attribute: label_glasses lower_quartile: 1 upper_quartile: 1\n")
    # a benchmark without filters (random) gets CAST's published no-op file
    assert describe_filters([]) == cast == CAST_NO_OP_DESCRIPTION


@pytest.mark.parametrize("spec, msg", [
    ({"mode": "rank", "low": 0, "high": 1}, "no 'attribute'"),
    ({"attribute": "x", "mode": "rank", "low": 0.5, "high": 1.5}, "fractions"),
    ({"attribute": "x", "mode": "value", "low": 2, "high": 1}, "low > high"),
    ({"attribute": "x", "mode": "class"}, "needs 'value'"),
    ({"attribute": "x", "mode": "median"}, "rank, value or class"),
    ({"attribute": "x", "mode": "rank", "low": 0, "high": 1, "rank_method": "dense"},
     "rank_method"),
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
        "attribute: blur lower_quartile: 0.75 upper_quartile: 1\n"
    with pytest.raises(FilterError, match="not in"):
        build_subset(src, parse_filters([{"attribute": "nope", "low": 0, "high": 1}]),
                     tmp_path / "c/subset.parquet", tmp_path / "c/description.txt")


def _cast_reference(values, lo_pct, hi_pct):
    """CAST's filter.py rank selection, written out independently of facecast's code."""
    ranked = np.argsort(values)
    n = values.shape[0]
    return set(ranked[round(n * lo_pct / 100):round(n * hi_pct / 100) - 1].tolist())


def test_rank_method_cast_reproduces_casts_positional_slice():
    rng = np.random.default_rng(3)
    # a 70/30 binary attribute: facecast keeps ties together (top 10 % is empty), CAST
    # cuts the tie by position
    v = np.r_[np.zeros(700), np.ones(300)][rng.permutation(1000)]
    pool = np.ones(1000, bool)
    ours = filter_mask(v, pool, AttributeFilter("x", "rank", 0.9, 1.0))
    assert ours.sum() == 0
    cast = filter_mask(v, pool, AttributeFilter("x", "rank", 0.9, 1.0, rank_method="cast"))
    assert set(np.flatnonzero(cast)) == _cast_reference(v, 90, 100)
    assert cast.sum() == 99                       # CAST's slice drops its last position
    # continuous values with NaNs (sorted last by argsort: a top slice reaches into them)
    w = rng.normal(size=500)
    w[rng.choice(500, 30, replace=False)] = np.nan
    for lo, hi in [(0.9, 1.0), (0.0, 0.2), (0.67, 1.0), (0.35, 0.65)]:
        got = filter_mask(w, np.ones(500, bool),
                          AttributeFilter("x", "rank", lo, hi, rank_method="cast"))
        assert set(np.flatnonzero(got)) == _cast_reference(w, round(lo * 100), round(hi * 100))
    top = filter_mask(w, np.ones(500, bool), AttributeFilter("x", "rank", 0.9, 1.0,
                                                            rank_method="cast"))
    assert np.isnan(w[top]).sum() == 29


def test_rank_method_cast_ranks_over_the_whole_table_then_ands_the_pool():
    v = np.arange(20, dtype=float)
    pool = np.zeros(20, bool)
    pool[:15] = True                               # the 5 highest rows are not in the pool
    cast = filter_mask(v, pool, AttributeFilter("x", "rank", 0.5, 1.0, rank_method="cast"))
    # CAST's slice over all 20 rows: positions 10..18; the pool keeps 10..14
    np.testing.assert_array_equal(np.flatnonzero(cast), np.arange(10, 15))


def test_benchmark_rank_method_is_the_filters_default_and_a_filter_may_override():
    specs = [{"attribute": "a", "mode": "rank", "low": 0.9, "high": 1.0},
             {"attribute": "b", "mode": "rank", "low": 0.0, "high": 0.5,
              "rank_method": "facecast"},
             {"attribute": "c", "mode": "class", "value": 1}]
    f = parse_filters(specs, "bench", "cast")
    assert [x.rank_method for x in f] == ["cast", "facecast", "facecast"]
    assert [x.rank_method for x in parse_filters(specs[:1])] == ["facecast"]


def test_statuses_decide_which_faces_enter_the_pool(tmp_path):
    df = pd.DataFrame({"image_id": list("abcd"), "identity": list("aabb"), "split": "test",
                       "exclude": False, "status": ["ok", "fallback", "ok", "no_face"],
                       "q": [1.0, 2.0, 3.0, 4.0]})
    mask, report = select_subset(df, [])
    np.testing.assert_array_equal(mask, [True, False, True, False])     # default [ok]
    mask, report = select_subset(df, [], statuses=["ok", "fallback"])
    np.testing.assert_array_equal(mask, [True, True, True, False])
    assert report["statuses"] == ["ok", "fallback"]
    src = write_parquet(df, tmp_path / "attributes.parquet")
    rep = build_subset(src, [], tmp_path / "s/subset.parquet", tmp_path / "s/description.txt",
                       statuses=["ok", "fallback"])
    assert rep["n_subset"] == 3
    assert sorted(read_parquet(tmp_path / "s/subset.parquet")["image_id"]) == ["a", "b", "c"]


def test_cast11_config_matches_casts_published_definitions():
    cfg = yaml.safe_load((Path(__file__).parents[1] / "config/cast11.yaml").read_text())
    b = cfg["benchmarks"]
    # CAST's published female/male descriptions: the top 33 % of FairFace gender scores
    for name, col in (("female", "fairface_female"), ("male", "fairface_male")):
        (f,) = parse_filters(b[name]["filters"], name, b[name].get("rank_method", "facecast"))
        assert (f.attribute, f.low, f.high, f.rank_method) == (col, 0.67, 1, "cast")
    assert describe_filters(parse_filters(b["random"]["filters"])) == CAST_NO_OP_DESCRIPTION
    assert len(b) == 11
