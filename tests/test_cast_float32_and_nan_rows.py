"""cast_arrays datasets (issue 39 item 7): facecast's own ``value`` / ``class`` filters
compare in a float32 column's own type, ``subset.parquet`` names each row's path, and a
row with a NaN attribute cell that enters a benchmark gets its image processed (so it can
be embedded and mined)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
from PIL import Image
from reference.cast_inputs import hostile_arrays
from test_cast_arrays import make_arrays

from facecast.analysis.cast_filters import build_array_subset
from facecast.analysis.filtering import parse_filters, select_subset
from facecast.datasets.cast_manifest import (
    NAN_POOL_NOTE,
    build_cast_manifest,
    write_pool_manifest,
)
from facecast.faces.stage import run_faces_shard
from facecast.io.parquet_io import read_provenance

F07, F01, F03 = np.float32(0.7), np.float32(0.1), np.float32(0.3)


def test_facecast_value_and_class_filters_compare_in_float32(tmp_path):
    """``value: 0.7`` is the stored float32(0.7) (0.69999998...): a float64 comparison
    selects none of those rows; bounds round to float32 too, on the arrays and on an
    attribute table whose column is float32."""
    spec = hostile_arrays(tmp_path / "a", 2000, seed=2)
    build_cast_manifest(spec, tmp_path / "m.parquet")
    q = np.load(spec["attributes"])[:, 0]
    pool = ~np.load(spec["exclude_mask"])
    cases = [({"attribute": "quality", "mode": "class", "value": 0.7}, q == F07),
             ({"attribute": "quality", "mode": "value", "low": 0.7, "high": 0.7}, q == F07),
             ({"attribute": "quality", "mode": "value", "low": 0.1, "high": 0.3},
              (q >= F01) & (q <= F03)),
             ({"attribute": "quality", "mode": "value", "low": -1e300, "high": 1e300},
              np.isfinite(q))]
    assert (q[pool].astype(np.float64) == 0.7).sum() == 0 < (q[pool] == F07).sum()
    assert ((q == F03) & (q.astype(np.float64) > 0.3)).any()       # float32(0.3) > 0.3
    table = pa.table({"image_id": [str(i) for i in range(len(q))], "identity": ["x"] * len(q),
                      "split": ["all"] * len(q), "status": ["ok"] * len(q),
                      "exclude": ~pool, "quality": pa.array(q, pa.float32())})
    for k, (f, want) in enumerate(cases):
        build_array_subset(spec, tmp_path / "m.parquet", {"filters": [f]},
                           tmp_path / f"s{k}.parquet", tmp_path / f"d{k}.txt", bench="b",
                           statuses=["ok"])
        rows = pd.read_parquet(tmp_path / f"s{k}.parquet")["row"].to_numpy()
        np.testing.assert_array_equal(rows, np.flatnonzero(want & pool))
        mask, _ = select_subset(table, parse_filters([f]), statuses=["ok"])
        np.testing.assert_array_equal(mask, want & pool)


def _arrays_with_nan_cells(tmp_path):
    spec = make_arrays(tmp_path / "a", n_ids=6, per=3)          # rows 0-2 excluded
    attrs = np.load(spec["attributes"])
    attrs[[7, 11], 2] = [np.nan, np.inf]                        # age: NaN, inf
    np.save(spec["attributes"], attrs)
    spec["root"] = str(tmp_path / "img")
    rng = np.random.default_rng(0)
    for p in np.load(spec["paths"]).tolist():
        (tmp_path / "img" / p).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(rng.integers(0, 255, (112, 112, 3), np.uint8)).save(
            tmp_path / "img" / p)
    build_cast_manifest(spec, tmp_path / "manifest.parquet")
    return spec


def test_subset_names_paths_and_nan_rows_are_processed_in_the_pool(tmp_path):
    spec = _arrays_with_nan_cells(tmp_path)
    build_array_subset(spec, tmp_path / "manifest.parquet",
                       {"cast_filters": [["Heavy_Makeup", "abs", -1, 2]]},
                       tmp_path / "s.parquet", tmp_path / "d.txt", bench="b",
                       statuses=["ok"])
    sub = pd.read_parquet(tmp_path / "s.parquet")
    assert list(sub.columns[:5]) == ["image_id", "path", "identity", "split", "row"]
    paths = np.load(spec["paths"])
    assert sub["path"].tolist() == paths[sub["row"]].tolist() and len(sub) == 15
    nan_ids = {f"{paths[r]}//row{r + 1}" for r in (7, 11)}
    assert set(sub["image_id"]) - set(sub["path"]) == nan_ids   # CAST's paths, our ids
    n = write_pool_manifest(tmp_path / "manifest.parquet", [str(tmp_path / "s.parquet")],
                            tmp_path / "pool.parquet", shard_size=100)
    pool = pd.read_parquet(tmp_path / "pool.parquet").set_index("image_id")
    assert n == 15 and (pool["status"] == "ok").all()
    assert pool.loc[sorted(nan_ids), "message"].str.startswith(NAN_POOL_NOTE).all()
    assert "age" in pool.loc[sorted(nan_ids)[0], "message"]
    assert read_provenance(tmp_path / "pool.parquet")["n_nan_attribute"] == 2
    # the faces stage processes them like any image (embeddable status, a crop)
    run_faces_shard(tmp_path / "pool.parquet", "00000", spec["root"],
                    tmp_path / "faces.parquet", {"detector": "none"})
    faces = pd.read_parquet(tmp_path / "faces.parquet").set_index("image_id")
    assert (faces.loc[sorted(nan_ids), "status"] == "aligned_input").all()
    crop = [c for c in faces.columns if c.startswith("crop")][0]
    assert faces.loc[sorted(nan_ids), crop].map(len).gt(0).all()
