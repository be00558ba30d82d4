"""Correlations: streamed == in-memory == pandas; pair tables; heatmaps."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from facecast.analysis.correlations import (
    attribute_columns,
    cluster_order,
    pearson_pairwise,
    ranked_pairs,
    stream_pearson,
    stream_spearman,
    write_correlations,
)
from facecast.io.parquet_io import ParquetStreamWriter, read_parquet


def _table(n=3000, seed=0, nan_frac=0.15):
    rng = np.random.default_rng(seed)
    a = rng.normal(5, 2, n)
    df = pd.DataFrame({
        "a": a,
        "b": -0.8 * a + rng.normal(0, 1, n),
        "c": rng.normal(1e4, 1.0, n),           # large offset: cancellation check
        "d": 0.5 * a + rng.normal(0, 3, n),
        "e": (rng.random(n) < 0.3).astype(float),
    })
    for col in df:
        df.loc[rng.random(n) < nan_frac, col] = np.nan
    return df


def _write_sharded(df, path, shard=700):
    import pyarrow as pa

    meta = pd.DataFrame({"image_id": [f"i{k}" for k in range(len(df))], "identity": "x",
                         "split": "test", "exclude": False,
                         "status": np.where(np.arange(len(df)) % 50 == 7, "no_face", "ok")})
    full = pd.concat([meta, df], axis=1)
    schema = pa.Schema.from_pandas(full, preserve_index=False)
    with ParquetStreamWriter(path, schema) as w:
        for s in range(0, len(full), shard):
            w.write(full.iloc[s:s + shard])
    return full


def test_in_memory_pearson_equals_pandas_pairwise_complete():
    df = _table()
    r, n = pearson_pairwise(df)
    np.testing.assert_allclose(r, df.corr().to_numpy(), atol=1e-12)
    counts = df.notna().astype(int).T @ df.notna().astype(int)
    np.testing.assert_array_equal(n, counts.to_numpy())


def test_streamed_equals_in_memory_and_skips_non_ok_rows(tmp_path):
    df = _table()
    full = _write_sharded(df, tmp_path / "attributes.parquet")
    cols = attribute_columns(pq.read_schema(tmp_path / "attributes.parquet"))
    assert cols == list("abcde")
    ok = full[full["status"] == "ok"][cols]
    r_s, n_s = stream_pearson(tmp_path / "attributes.parquet", cols, batch_size=256)
    r_m, n_m = pearson_pairwise(ok)
    np.testing.assert_allclose(r_s, r_m, atol=1e-12)
    np.testing.assert_array_equal(n_s, n_m)
    np.testing.assert_allclose(r_s, ok.corr().to_numpy(), atol=1e-12)


def test_spearman_equals_pandas_without_missing_values(tmp_path):
    df = _table(nan_frac=0.0)
    df["e"] = np.round(df["e"])  # ties
    _write_sharded(df, tmp_path / "t.parquet")
    ok = df[np.arange(len(df)) % 50 != 7]
    r, _ = stream_spearman(tmp_path / "t.parquet", list("abcde"), batch_size=500)
    np.testing.assert_allclose(r, ok.corr(method="spearman").to_numpy(), atol=1e-12)
    with pytest.raises(ValueError, match="spearman_max_rows"):
        stream_spearman(tmp_path / "t.parquet", list("abcde"), max_rows=10)


def test_ranked_pairs_order_filter_and_constant_column():
    names = ["x", "y", "z", "k"]
    r = np.array([[1, -0.5, 0.2, np.nan], [-0.5, 1, 0.9, np.nan],
                  [0.2, 0.9, 1, np.nan], [np.nan] * 4])
    n = np.full((4, 4), 10)
    all_pairs = ranked_pairs(r, n, names)
    assert list(zip(all_pairs.attr_a, all_pairs.attr_b, strict=False))[:3] == [("x", "y"), ("x", "z"),
                                                                  ("y", "z")]
    assert len(all_pairs) == 6 and all_pairs["r"].isna().sum() == 3
    filt = ranked_pairs(r, n, names, 0.3)
    assert filt["r"].tolist() == [-0.5, 0.9]
    # a constant column has no correlation
    rr, _ = pearson_pairwise(np.c_[np.arange(5.0), np.ones(5)])
    assert np.isnan(rr[0, 1]) and np.isnan(rr[1, 1])


def test_cluster_order_puts_related_attributes_together():
    # blocks {0, 2} and {1, 3} strongly related, unrelated across
    r = np.eye(4)
    r[0, 2] = r[2, 0] = 0.9
    r[1, 3] = r[3, 1] = -0.9
    order = cluster_order(r).tolist()
    pos = {v: k for k, v in enumerate(order)}
    assert abs(pos[0] - pos[2]) == 1 and abs(pos[1] - pos[3]) == 1


def test_write_correlations_files(tmp_path):
    _write_sharded(_table(n=800), tmp_path / "attributes.parquet")
    out = tmp_path / "corr"
    res = write_correlations(tmp_path / "attributes.parquet", out,
                             {"methods": ["pearson", "spearman"], "min_abs_r": 0.3})
    filt = res["pearson"]
    assert {("a", "b"), ("a", "d")} <= set(zip(filt.attr_a, filt.attr_b, strict=False))
    assert filt["r"].is_monotonic_increasing and (filt["r"].abs() >= 0.3).all()
    for m in ("pearson", "spearman"):
        for suffix in ("_matrix.parquet", "_pairs.parquet", "_pairs.tsv",
                       "_pairs_filtered.parquet", "_pairs_filtered.tsv", "_pairs_filtered.md",
                       "_heatmap.png", "_heatmap.svg", "_heatmap_thresholded.png",
                       "_heatmap_thresholded.svg"):
            assert (out / f"{m}{suffix}").stat().st_size > 0
    mat = read_parquet(out / "pearson_matrix.parquet")
    assert mat["attribute"].tolist() == list("abcde")
    md = (out / "pearson_pairs_filtered.md").read_text()
    assert "| a | b |" in md
