"""Shard indexes: counts per shard, paths resolved beside the index, clear errors."""

from __future__ import annotations

import shutil

import pandas as pd
import pytest

from facecast.io.parquet_io import read_provenance, write_parquet
from facecast.io.shard_index import shard_files, write_shard_index


def _shards(folder):
    write_parquet(pd.DataFrame({"image_id": ["a", "b", "c"], "status": ["ok", "no_face", "ok"]}),
                  folder / "00001.parquet")
    write_parquet(pd.DataFrame({"image_id": ["d"], "status": ["ok"]}), folder / "00000.parquet")
    write_parquet(pd.DataFrame({"image_id": ["e", "f"], "x": [1.0, 2.0]}),
                  folder / "00002.parquet")
    return [folder / f"0000{i}.parquet" for i in (1, 0, 2)]


def test_index_counts_rows_and_ok_statuses_in_shard_order(tmp_path):
    index = write_shard_index(_shards(tmp_path), tmp_path / "index/faces.parquet",
                              provenance={"rule": "faces_index"})
    assert index["shard"].tolist() == ["00000", "00001", "00002"]
    assert index["n_rows"].tolist() == [1, 3, 2]
    assert index["n_ok"].tolist()[:2] == [1, 2] and pd.isna(index["n_ok"].iloc[2])
    assert index["file"].tolist()[0] == "../00000.parquet"
    prov = read_provenance(tmp_path / "index/faces.parquet")
    assert prov["n_shards"] == 3 and prov["n_rows"] == 6 and prov["rule"] == "faces_index"
    assert shard_files(tmp_path / "index/faces.parquet") == [
        str(tmp_path / f"0000{i}.parquet") for i in range(3)]


def test_index_survives_moving_the_results_folder(tmp_path):
    (tmp_path / "a/faces").mkdir(parents=True)
    write_shard_index(_shards(tmp_path / "a/faces"), tmp_path / "a/index/faces.parquet")
    shutil.move(tmp_path / "a", tmp_path / "b")
    files = shard_files(tmp_path / "b/index/faces.parquet")
    assert files[0] == str(tmp_path / "b/faces/00000.parquet")


def test_a_missing_shard_is_a_clear_error(tmp_path):
    write_shard_index(_shards(tmp_path), tmp_path / "index.parquet")
    (tmp_path / "00002.parquet").unlink()
    with pytest.raises(FileNotFoundError, match=r"1 shard\(s\) listed in .*index.parquet"):
        shard_files(tmp_path / "index.parquet")
