"""insightface / MXNet RecordIO: byte layout, manifest rows, exclusions, faces decoding."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from PIL import Image

from facecast.datasets.manifest import DatasetError
from facecast.datasets.recordio import (
    MAGIC,
    RecordError,
    RecordIOReader,
    encode_record,
    pack,
    read_recordio,
    unpack,
    write_recordio,
)
from facecast.datasets.stage import build_manifest
from facecast.faces.crops import decode_png
from facecast.faces.stage import run_faces_shard
from facecast.io.parquet_io import read_provenance


def _jpeg(seed: int, size: int = 112) -> tuple[bytes, np.ndarray]:
    rng = np.random.default_rng(seed)
    arr = np.kron(rng.integers(0, 255, (size // 8, size // 8, 3), dtype=np.uint8),
                  np.ones((8, 8, 1), np.uint8))
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "JPEG", quality=95)
    data = buf.getvalue()
    return data, np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))


def test_record_bytes_match_mxnet_layout():
    """magic, lrecord = cflag << 29 | length, IRHeader 'IfQQ' (24 bytes), 4-byte padding."""
    payload = pack(5.0, b"abc", id=7, id2=0)
    assert payload == struct.pack("<IfQQ", 0, 5.0, 7, 0) + b"abc"
    assert len(struct.pack("IfQQ", 0, 5.0, 7, 0)) == 24  # mxnet's native 'IfQQ' has no padding
    rec = encode_record(payload)
    assert rec == (struct.pack("<II", MAGIC, len(payload)) + payload + b"\0")  # 27 -> 28
    # a label vector goes after the header, flag = its length, header label 0
    multi = pack([3.0, 9.0], b"")
    assert multi == struct.pack("<IfQQ", 2, 0.0, 0, 0) + struct.pack("<2f", 3.0, 9.0)
    head, rest = unpack(multi)
    assert head.flag == 2 and head.label.tolist() == [3.0, 9.0] and rest == b""


def test_payload_containing_the_magic_is_split_and_joined(tmp_path):
    magic = struct.pack("<I", MAGIC)
    image = b"\x01\x02\x03\x04" + magic + b"abcd" + magic + b"tail!"
    payload = pack(1.0, image)  # 24-byte header keeps the magic words 4-byte aligned
    raw = encode_record(payload)
    # three parts: cflag 1 (start), 2 (middle), 3 (end)
    flags = []
    pos = 0
    while pos < len(raw):
        m, lrec = struct.unpack_from("<II", raw, pos)
        assert m == MAGIC
        flags.append(lrec >> 29)
        length = lrec & ((1 << 29) - 1)
        pos += 8 + length + (-length) % 4
    assert flags == [1, 2, 3]
    write_recordio(tmp_path / "s.rec", tmp_path / "s.idx", [(0, payload), (1, pack(2.0, b"x"))])
    reader = RecordIOReader(tmp_path / "s.rec", tmp_path / "s.idx")
    assert reader.record(0)[1] == image
    assert reader.header(0).label.tolist() == [1.0]
    assert reader.record(1)[1] == b"x"


def write_insightface_set(folder: Path, n_ids: int = 3, per_id: int = 4, seed: int = 0
                          ) -> dict:
    """An insightface-style set: header record 0, image records, identity records, plus a
    record with a bad magic, a truncated last image and an image id missing from the index."""
    folder.mkdir(parents=True, exist_ok=True)
    n_img = n_ids * per_id
    first_id_rec = n_img + 1
    records = [(0, pack([first_id_rec, first_id_rec + n_ids], b""))]
    arrays = {}
    for k in range(n_img):
        data, arr = _jpeg(seed * 1000 + k)
        label = 100 + k // per_id
        records.append((k + 1, pack(float(label), data, id=k + 1)))
        arrays[k + 1] = arr
    for j in range(n_ids):  # identity records: (start, end) of that identity's images
        records.append((first_id_rec + j, pack([1 + j * per_id, 1 + (j + 1) * per_id], b"")))
    rec, idx = folder / "train.rec", folder / "train.idx"
    offsets = write_recordio(rec, idx, records)
    blob = bytearray(rec.read_bytes())
    bad_magic = 2
    blob[offsets[bad_magic]:offsets[bad_magic] + 4] = b"\xde\xad\xbe\xef"
    rec.write_bytes(bytes(blob))
    missing = 3  # drop from the index
    lines = [ln for ln in idx.read_text().splitlines() if not ln.startswith(f"{missing}\t")]
    # truncated: point the last image record past the end of the file
    truncated = n_img
    lines = [f"{truncated}\t{len(blob) - 6}" if ln.startswith(f"{truncated}\t") else ln
             for ln in lines]
    idx.write_text("\n".join(lines) + "\n")
    return {"rec": rec, "idx": idx, "arrays": arrays, "bad": {bad_magic: "decode_error",
            missing: "missing", truncated: "decode_error"}, "n_img": n_img, "per_id": per_id}


@pytest.fixture(scope="module")
def rset(tmp_path_factory):
    return write_insightface_set(tmp_path_factory.mktemp("rec") / "data")


def test_read_recordio_rows(rset):
    df = read_recordio(rset["rec"], rset["idx"])
    assert len(df) == rset["n_img"]  # header and identity records are not images
    assert df["path"].tolist() == [f"train.rec#{k}" for k in range(1, rset["n_img"] + 1)]
    assert df.attrs["header"] == (rset["n_img"] + 1, rset["n_img"] + 4)
    for rid, status in rset["bad"].items():
        row = df[df["record_id"] == rid].iloc[0]
        assert row["status"] == status, row["message"]
        assert f"record {rid}" in row["message"]
    ok = df[df["status"] == "ok"]
    expect = [str(100 + (r - 1) // rset["per_id"]) for r in ok["record_id"]]
    assert ok["identity"].tolist() == expect
    assert "bad magic" in df.loc[df["record_id"] == 2, "message"].iloc[0]
    assert "truncated" in df.loc[df["record_id"] == rset["n_img"], "message"].iloc[0]


def test_set_without_header_record_lists_every_record(tmp_path):
    data, _ = _jpeg(1)
    write_recordio(tmp_path / "a.rec", tmp_path / "a.idx",
                   [(5, pack(1.0, data)), (9, pack(2.0, data))])
    df = read_recordio(tmp_path / "a.rec")  # idx defaults to the .rec path with .idx
    assert df["path"].tolist() == ["a.rec#5", "a.rec#9"]
    assert df["identity"].tolist() == ["1", "2"] and df.attrs["header"] is None


def test_bad_index_is_a_clear_error(tmp_path):
    (tmp_path / "b.rec").write_bytes(b"")
    (tmp_path / "b.idx").write_text("0\t0\nnot a line\n")
    with pytest.raises(DatasetError, match="b.idx"):
        read_recordio(tmp_path / "b.rec", tmp_path / "b.idx")
    with pytest.raises(DatasetError, match="does not exist"):
        read_recordio(tmp_path / "nope.rec", tmp_path / "b.idx")


def test_reader_errors_are_record_errors(rset):
    reader = RecordIOReader(rset["rec"], rset["idx"])
    with pytest.raises(RecordError, match="bad magic"):
        reader.record(2)
    with pytest.raises(RecordError, match="not in the index"):
        reader.record(3)
    with pytest.raises(RecordError, match="truncated"):
        reader.record(rset["n_img"])


def _manifest(rset, tmp_path, **extra):
    spec = {"kind": "recordio", "rec": str(rset["rec"]), "idx": str(rset["idx"]),
            "shard_size": 5, **extra}
    out = tmp_path / "manifest.parquet"
    return build_manifest(spec, tmp_path / "dataset", out), out


def test_manifest_and_exclusions(rset, tmp_path):
    m, path = _manifest(rset, tmp_path)
    assert m["image_id"].tolist()[:2] == ["train.rec#1", "train.rec#2"]
    assert m["shard"].nunique() == 3 and not m["exclude"].any()
    assert set(m.loc[m["status"] != "ok", "image_id"]) == {f"train.rec#{r}" for r in rset["bad"]}
    prov = read_provenance(path)
    assert prov["containers"]["train.rec"]["idx"] == "train.idx"  # relative to the root
    # by record id
    (tmp_path / "ex_rec.txt").write_text("1\n5\n")
    m, _ = _manifest(rset, tmp_path, exclude=str(tmp_path / "ex_rec.txt"), exclude_by="record")
    assert m.loc[m["exclude"], "image_id"].tolist() == ["train.rec#1", "train.rec#5"]
    # by identity (the WebFace12M mask style)
    (tmp_path / "ex_id.txt").write_text("# training identities\n101\n")
    m, _ = _manifest(rset, tmp_path, exclude=str(tmp_path / "ex_id.txt"), exclude_by="identity")
    assert set(m.loc[m["exclude"], "identity"]) == {"101"}
    assert m["exclude"].sum() == (m["identity"] == "101").sum() == rset["per_id"]
    (tmp_path / "ex_bad.txt").write_text("train.rec#1\n")
    with pytest.raises(DatasetError, match="not a record id"):
        _manifest(rset, tmp_path, exclude=str(tmp_path / "ex_bad.txt"), exclude_by="record")


def test_faces_stage_reads_records_by_offset(rset, tmp_path, monkeypatch):
    m, mpath = _manifest(rset, tmp_path)

    def no_detector(*a, **k):
        raise AssertionError("detector none must not load MTCNN")

    monkeypatch.setattr("facecast.faces.stage.FaceDetector", no_detector)
    rows = []
    for shard in sorted(m["shard"].unique()):
        out = tmp_path / f"faces_{shard}.parquet"
        run_faces_shard(mpath, shard, rset["rec"].parent, out, {"detector": "none"})
        rows += pq.read_table(out).to_pylist()
    assert [r["image_id"] for r in rows] == m["image_id"].tolist()
    by_id = {r["image_id"]: r for r in rows}
    for rid, status in rset["bad"].items():
        assert by_id[f"train.rec#{rid}"]["status"] == status
        assert by_id[f"train.rec#{rid}"]["crop_arcface"] is None
    good = [r for r in rows if r["status"] == "aligned_input"]
    assert len(good) == rset["n_img"] - len(rset["bad"])
    for r in good:
        rid = int(r["image_id"].split("#")[1])
        assert np.array_equal(decode_png(r["crop_arcface"]), rset["arrays"][rid])
        assert decode_png(r["crop_facenet"]).shape == (160, 160, 3)


def test_a_record_that_is_not_an_image_is_a_decode_error(tmp_path):
    data, _ = _jpeg(3)
    write_recordio(tmp_path / "c.rec", tmp_path / "c.idx",
                   [(1, pack(1.0, data)), (2, pack(1.0, b"not an image")), (3, b"short")])
    spec = {"kind": "recordio", "rec": str(tmp_path / "c.rec")}
    m = build_manifest(spec, tmp_path / "d", tmp_path / "m.parquet")
    assert m["status"].tolist() == ["ok", "ok", "decode_error"]  # record 3: no header
    out = tmp_path / "f.parquet"
    counts = run_faces_shard(tmp_path / "m.parquet", "00000", tmp_path, out,
                             {"detector": "none"})
    assert counts == {"aligned_input": 1, "decode_error": 2}
    msgs = pq.read_table(out).column("message").to_pylist()
    assert "not a recognised image format" in msgs[1] and "too short" in msgs[2]
