"""The Parquet helper: provenance in every file, atomic writes, streamed writes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from facecast import __version__
from facecast.inspect_artifact import describe
from facecast.parquet_io import (
    ParquetStreamWriter,
    read_metadata,
    read_parquet,
    read_provenance,
    write_parquet,
)


def test_write_carries_provenance_and_is_byte_stable(tmp_path: Path) -> None:
    df = pd.DataFrame({"image_id": ["a", "b"], "x": [1.0, 2.0]})
    p1 = write_parquet(df, tmp_path / "a" / "t.parquet", provenance={"seed": 3, "model": "m"},
                       metadata={"facecast.note": "hi"})
    p2 = write_parquet(df, tmp_path / "b" / "t.parquet", provenance={"model": "m", "seed": 3},
                       metadata={"facecast.note": "hi"})
    assert p1.read_bytes() == p2.read_bytes()
    prov = read_provenance(p1)
    assert prov == {"facecast_version": __version__, "seed": 3, "model": "m"}
    assert read_metadata(p1)["facecast.note"] == "hi"
    assert b"pandas" not in (pq.read_schema(p1).metadata or {})
    pd.testing.assert_frame_equal(read_parquet(p1), df, check_dtype=False)
    assert [f.name for f in p1.parent.iterdir()] == ["t.parquet"]  # no temp file left


def test_failed_write_leaves_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "t.parquet"
    write_parquet(pd.DataFrame({"x": [1]}), target)
    before = target.read_bytes()
    bad_schema = pa.schema([("x", pa.list_(pa.int64()))])
    with pytest.raises((pa.ArrowException, TypeError, ValueError)):
        write_parquet(pd.DataFrame({"x": ["not a list"]}), target, schema=bad_schema)
    assert target.read_bytes() == before
    assert sorted(f.name for f in tmp_path.iterdir()) == ["t.parquet"]


def test_stream_writer_is_atomic(tmp_path: Path) -> None:
    schema = pa.schema([("image_id", pa.string()), ("v", pa.float32())])
    target = tmp_path / "s.parquet"
    with ParquetStreamWriter(target, schema, provenance={"stage": "x"}) as w:
        w.write(pd.DataFrame({"image_id": ["a"], "v": [1.0]}))
        assert not target.exists()  # not visible until closed
        w.write(pa.table({"image_id": ["b"], "v": pa.array([2.0], pa.float32())}))
    assert pq.ParquetFile(target).metadata.num_row_groups == 2
    assert read_provenance(target)["stage"] == "x"
    with pytest.raises(RuntimeError):
        with ParquetStreamWriter(tmp_path / "t.parquet", schema) as w:
            w.write(pd.DataFrame({"image_id": ["a"], "v": [1.0]}))
            raise RuntimeError("boom")
    assert sorted(f.name for f in tmp_path.iterdir()) == ["s.parquet"]


def test_inspect_directory_of_shards(tmp_path: Path) -> None:
    for i in range(3):
        write_parquet(pd.DataFrame({"image_id": [f"{i}a", f"{i}b"], "crop": [b"x" * 10, None],
                                    "score": [0.5, 1.5], "status": ["ok", "no_face"]}),
                      tmp_path / "faces" / f"{i:05d}.parquet", provenance={"seed": 1})
    text = describe(tmp_path / "faces")
    assert "files: 3" in text and "rows: 6" in text
    assert "<10 bytes>" in text and "binary, 3 values" in text
    assert "min 0.5" in text and "no_face=3" in text
