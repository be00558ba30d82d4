"""facecast inspect: says which rows it summarises; --random draws them truly at random."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from facecast.io.inspect import _random_sample, describe


def _shards(tmp_path: Path) -> Path:
    folder = tmp_path / "shards"
    folder.mkdir()
    for k in range(3):  # 3 files x 4 row groups x 25 rows, values 0..299 in order
        values = pa.table({"v": list(range(100 * k, 100 * k + 100))})
        pq.write_table(values, folder / f"{k:05d}.parquet", row_group_size=25)
    return folder


def test_first_rows_are_called_first_rows(tmp_path: Path) -> None:
    text = describe(_shards(tmp_path), sample_rows=10)
    assert "the first 10 of 300 rows" in text and "sampled" not in text


def test_random_rows_cover_every_file_and_are_seeded(tmp_path: Path) -> None:
    folder = _shards(tmp_path)
    files = sorted(folder.glob("*.parquet"))
    a = _random_sample(files, 60, seed=1).column("v").to_pylist()
    assert a == _random_sample(files, 60, seed=1).column("v").to_pylist()
    assert a != _random_sample(files, 60, seed=2).column("v").to_pylist()
    assert len(set(a)) == 60 and a == sorted(a)  # without replacement, in file order
    assert {v // 100 for v in a} == {0, 1, 2}  # rows from every file, not just the first
    assert max(a) > 250 and min(a) < 50
    assert sorted(_random_sample(files, 1000, seed=3).column("v").to_pylist()) == list(range(300))
    text = describe(folder, sample_rows=20, random_seed=7)
    assert "20 of 300 rows drawn at random (seed 7)" in text


def test_random_sample_of_empty_table(tmp_path: Path) -> None:
    path = tmp_path / "empty.parquet"
    pd.DataFrame({"v": pd.Series([], dtype="int64")}).to_parquet(path)
    assert _random_sample([path], 5, seed=0).num_rows == 0
