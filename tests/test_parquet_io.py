"""The Parquet helper: provenance in every file, atomic writes, streamed writes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from facecast import __version__
from facecast.io.inspect import describe
from facecast.io.parquet_io import (
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
    assert [f.name for f in p1.parent.iterdir() if f.is_file()] == ["t.parquet"]  # no temp file left
    assert not (p1.parent / ".tmp").exists()


def test_failed_write_leaves_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "t.parquet"
    write_parquet(pd.DataFrame({"x": [1]}), target)
    before = target.read_bytes()
    bad_schema = pa.schema([("x", pa.list_(pa.int64()))])
    with pytest.raises((pa.ArrowException, TypeError, ValueError)):
        write_parquet(pd.DataFrame({"x": ["not a list"]}), target, schema=bad_schema)
    assert target.read_bytes() == before
    assert sorted(f.name for f in tmp_path.iterdir() if f.is_file()) == ["t.parquet"]
    assert not (tmp_path / ".tmp").exists()


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
    assert sorted(f.name for f in tmp_path.iterdir() if f.is_file()) == ["s.parquet"]
    assert not (tmp_path / ".tmp").exists()


def test_stream_writer_leaves_named_columns_uncompressed(tmp_path: Path) -> None:
    """Already compressed bytes (PNG crops) skip zstd; every other leaf, lists included,
    keeps it."""
    schema = pa.schema([("blob", pa.binary()), ("box", pa.list_(pa.float32())),
                        ("n", pa.int32())])
    target = tmp_path / "u.parquet"
    with ParquetStreamWriter(target, schema, uncompressed=["blob"]) as w:
        w.write(pa.table({"blob": [b"x" * 100] * 50, "box": [[1.0, 2.0]] * 50,
                          "n": list(range(50))}, schema=schema))
    rg = pq.ParquetFile(target).metadata.row_group(0)
    codecs = {rg.column(i).path_in_schema: rg.column(i).compression
              for i in range(rg.num_columns)}
    assert codecs == {"blob": "UNCOMPRESSED", "box.list.element": "ZSTD", "n": "ZSTD"}
    assert pd.read_parquet(target)["blob"].tolist() == [b"x" * 100] * 50


def test_page_encodings_change_the_file_not_the_values(tmp_path: Path) -> None:
    """Delta-coded counters and non-dictionary strings read back as written."""
    table = pa.table({"row": list(range(1000)), "s": [f"p{i % 7}" for i in range(1000)],
                      "x": [i / 3 for i in range(1000)]})
    with ParquetStreamWriter(tmp_path / "s.parquet", table.schema,
                             column_encoding={"row": "DELTA_BINARY_PACKED"}) as w:
        w.write(table)
    write_parquet(table, tmp_path / "w.parquet", use_dictionary=["s"],
                  column_encoding={"row": "DELTA_BINARY_PACKED", "x": "BYTE_STREAM_SPLIT"},
                  write_statistics=["row"])
    for name in ("s.parquet", "w.parquet"):
        assert read_parquet(tmp_path / name).equals(table.to_pandas())
        col = pq.ParquetFile(tmp_path / name).metadata.row_group(0).column(0)
        assert "DELTA_BINARY_PACKED" in col.encodings


def test_inspect_directory_of_shards(tmp_path: Path) -> None:
    for i in range(3):
        write_parquet(pd.DataFrame({"image_id": [f"{i}a", f"{i}b"], "crop": [b"x" * 10, None],
                                    "score": [0.5, 1.5], "status": ["ok", "no_face"]}),
                      tmp_path / "faces" / f"{i:05d}.parquet", provenance={"seed": 1})
    text = describe(tmp_path / "faces")
    assert "files: 3" in text and "rows: 6" in text
    assert "<10 bytes>" in text and "binary, 3 values" in text
    assert "min 0.5" in text and "no_face=3" in text


_KILLED_WRITER = """
import os, sys
import pandas as pd, pyarrow as pa
from facecast.io.parquet_io import ParquetStreamWriter, write_parquet
from facecast.io.atomic import atomic_path
folder = sys.argv[1]
w = ParquetStreamWriter(folder + "/00001.parquet", pa.schema([("image_id", pa.string())]))
w.write(pd.DataFrame({"image_id": ["a"]}))
cm = atomic_path(folder + "/00002.parquet")
tmp = cm.__enter__()
open(tmp, "wb").write(b"PAR1")
os._exit(9)  # killed mid-write: no cleanup runs
"""


def test_killed_writers_leave_nothing_a_shard_glob_sees(tmp_path: Path) -> None:
    """Temporaries live in .tmp/ (no `faces/*.parquet` glob sees them) and the next write
    of the same target removes the stale ones (issue 16.5)."""
    import fnmatch
    import os
    import subprocess
    import sys

    def shard_glob() -> list[str]:  # DuckDB's '*.parquet': hidden names match too
        return sorted(fnmatch.filter(os.listdir(folder), "*.parquet"))

    folder = tmp_path / "faces"
    write_parquet(pd.DataFrame({"image_id": ["z"]}), folder / "00000.parquet")
    # a leftover of the old layout (beside the shard) and two killed writers of today's
    (folder / ".00003.tmp-4242-deadbeef.parquet").write_bytes(b"PAR1")
    proc = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(folder)])
    assert proc.returncode == 9
    stale = sorted(p.name for p in (folder / ".tmp").iterdir())
    assert len(stale) == 2
    assert all(n.startswith((".00001.parquet.tmp-", ".00002.parquet.tmp-")) for n in stale)
    # the killed writers' temporaries are invisible to the glob; the old-layout one is not
    assert shard_glob() == [".00003.tmp-4242-deadbeef.parquet", "00000.parquet"]
    assert len(pq.read_table(folder)) == 1  # pyarrow skips hidden files and folders
    # the rerun of each job writes its shard and removes its own stale temporaries
    for shard in ("00001", "00002", "00003"):
        write_parquet(pd.DataFrame({"image_id": [shard]}), folder / f"{shard}.parquet")
    assert not (folder / ".tmp").exists()  # emptied, then removed
    assert sorted(p.name for p in folder.iterdir() if p.is_file()) == [
        "00000.parquet", "00001.parquet", "00002.parquet", "00003.parquet"]
    assert shard_glob() == ["00000.parquet", "00001.parquet", "00002.parquet", "00003.parquet"]
    assert len(pq.read_table(folder)) == 4  # pyarrow's dataset reader agrees
