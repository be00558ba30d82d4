"""insightface / MXNet RecordIO datasets (``train.rec`` + ``train.idx``), read natively.

No mxnet is needed. The byte layout is dmlc-core's RecordIO as written by
``mxnet.recordio.MXIndexedRecordIO``:

* ``train.idx``: one text line per record, ``<record id>\\t<byte offset>``.
* ``train.rec``: records, each one or more *parts*. A part is the magic word
  ``0xced7230a`` (uint32, little-endian), a length word ``lrecord = cflag << 29 | length``
  (``cflag``: 0 whole record, 1 first part, 2 middle part, 3 last part), ``length`` payload
  bytes, then zero padding to a multiple of 4. The writer splits a payload wherever the
  magic word occurs at a 4-byte aligned position and drops it; the reader joins the parts
  and puts the magic word back between them.
* A payload is ``mxnet.recordio.pack``'s: the IRHeader ``struct 'IfQQ'`` (``flag``
  uint32, ``label`` float32, ``id`` uint64, ``id2`` uint64; 24 bytes), then, when
  ``flag > 0``, ``flag`` float32 labels, then the encoded image.

insightface sets (MS1MV2/3, Glint360K, WebFace) start with a header record 0 whose labels
``(a, b)`` say that records ``1 .. a-1`` are images and records ``a .. b-1`` are one
identity record each (no image). The identity of an image is its (first) label.

Manifest rows use the locator ``<rec file name>#<record id>`` as path; the faces stage
reads the record by its offset (:class:`RecordIOReader`), never scanning the file.
"""

from __future__ import annotations

import os
import struct
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from facecast.datasets.manifest import DatasetError
from facecast.io.atomic import atomic_path

MAGIC = 0xCED7230A
MAGIC_BYTES = struct.pack("<I", MAGIC)
IR_FORMAT = "<IfQQ"
IR_SIZE = struct.calcsize(IR_FORMAT)  # 24
LENGTH_MASK = (1 << 29) - 1
#: Largest part length the format can express.
MAX_PART = LENGTH_MASK


class RecordError(ValueError):
    """One record cannot be read; the message says why (bad magic, truncated, ...)."""


@dataclass(frozen=True)
class IRHeader:
    """The image record header of ``mxnet.recordio`` (labels as a float32 array)."""

    flag: int
    label: np.ndarray
    id: int
    id2: int


# ---------------------------------------------------------------- writing (tests, tools)

def pack(label: float | Sequence[float], image: bytes, id: int = 0, id2: int = 0) -> bytes:
    """``mxnet.recordio.pack``: IRHeader + labels + image bytes.

    A scalar ``label`` is stored in the header (``flag = 0``); a sequence is stored after it
    (``flag = len(label)``, header label 0).
    """
    if np.ndim(label) == 0:
        return struct.pack(IR_FORMAT, 0, float(label), int(id), int(id2)) + bytes(image)
    arr = np.asarray(label, dtype="<f4").reshape(-1)
    return (struct.pack(IR_FORMAT, arr.size, 0.0, int(id), int(id2)) + arr.tobytes()
            + bytes(image))


def encode_record(payload: bytes) -> bytes:
    """The on-disk bytes of one record (dmlc ``RecordIOWriter::WriteRecord``)."""
    data = bytes(payload)
    if len(data) > MAX_PART:
        raise ValueError(f"record of {len(data)} bytes exceeds RecordIO's 2^29 limit")
    out = bytearray()
    words = np.frombuffer(data[: len(data) // 4 * 4], dtype="<u4")
    dptr = 0
    for i in (np.flatnonzero(words == MAGIC) * 4).tolist():
        out += MAGIC_BYTES + struct.pack("<I", ((1 if dptr == 0 else 2) << 29) | (i - dptr))
        out += data[dptr:i]
        dptr = i + 4
    rest = len(data) - dptr
    out += MAGIC_BYTES + struct.pack("<I", ((3 if dptr else 0) << 29) | rest)
    out += data[dptr:]
    out += b"\0" * ((-rest) % 4)
    return bytes(out)


def write_recordio(rec_path: str | os.PathLike, idx_path: str | os.PathLike,
                   records: Iterable[tuple[int, bytes]]) -> dict[int, int]:
    """Write ``(record id, payload)`` pairs as an indexed RecordIO pair; return id -> offset.

    Both files are written atomically (:func:`facecast.io.atomic.atomic_path`): an
    interrupted write leaves neither a partial ``.rec`` nor an index of one."""
    offsets: dict[int, int] = {}
    with atomic_path(rec_path) as rec_tmp, atomic_path(idx_path) as idx_tmp:
        with open(rec_tmp, "wb") as rec:
            for key, payload in records:
                offsets[int(key)] = rec.tell()
                rec.write(encode_record(payload))
        Path(idx_tmp).write_text("".join(f"{k}\t{o}\n" for k, o in offsets.items()))
    return offsets


# ---------------------------------------------------------------- reading

def read_index(idx_path: str | os.PathLike) -> tuple[np.ndarray, np.ndarray]:
    """``(record ids, byte offsets)`` (int64) of an ``.idx`` file, in file order."""
    idx_path = Path(idx_path)
    if not idx_path.is_file():
        raise DatasetError(f"RecordIO index {idx_path} does not exist")
    try:
        df = pd.read_csv(idx_path, sep="\t", header=None, names=["key", "offset"],
                         dtype={"key": np.int64, "offset": np.int64}, engine="c")
    except (ValueError, pd.errors.ParserError) as exc:
        raise DatasetError(f"{idx_path}: not a RecordIO index ('<id>\\t<offset>' lines): "
                           f"{exc}") from exc
    if df.isna().any().any():
        bad = int(np.flatnonzero(df.isna().any(axis=1).to_numpy())[0]) + 1
        raise DatasetError(f"{idx_path}:{bad}: expected '<record id>\\t<byte offset>'")
    keys, offsets = df["key"].to_numpy(np.int64), df["offset"].to_numpy(np.int64)
    if len(np.unique(keys)) != len(keys):
        dup = pd.Series(keys).duplicated().to_numpy()
        raise DatasetError(f"{idx_path}: record id {int(keys[dup][0])} listed twice")
    return keys, offsets


def read_part_at(fh, offset: int, file_size: int) -> bytes:
    """The payload of the record starting at ``offset`` (parts joined); RecordError if bad."""
    out = bytearray()
    pos = int(offset)
    first = True
    while True:
        if pos < 0 or pos + 8 > file_size:
            raise RecordError(f"truncated record: header at byte {pos} past the end of the "
                              f"file ({file_size} bytes)")
        head = os.pread(fh.fileno(), 8, pos)
        magic, lrec = struct.unpack("<II", head)
        if magic != MAGIC:
            raise RecordError(f"bad magic 0x{magic:08x} at byte {pos} (expected 0x{MAGIC:08x})")
        cflag, length = lrec >> 29, lrec & LENGTH_MASK
        if (cflag in (0, 1)) != first:
            raise RecordError(f"bad continuation flag {cflag} at byte {pos}")
        first = False
        if pos + 8 + length > file_size:
            raise RecordError(f"truncated record: {length} bytes at byte {pos + 8} run past the "
                              f"end of the file ({file_size} bytes)")
        data = os.pread(fh.fileno(), length, pos + 8)
        out += data
        pos += 8 + length + ((-length) % 4)
        if cflag in (0, 3):
            return bytes(out)
        out += MAGIC_BYTES


def unpack(payload: bytes) -> tuple[IRHeader, bytes]:
    """``mxnet.recordio.unpack``: the IRHeader and the image bytes after it."""
    if len(payload) < IR_SIZE:
        raise RecordError(f"record too short for an image header ({len(payload)} bytes)")
    flag, label, id_, id2 = struct.unpack(IR_FORMAT, payload[:IR_SIZE])
    rest = payload[IR_SIZE:]
    if flag > 0:
        if len(rest) < 4 * flag:
            raise RecordError(f"record header announces {flag} labels but the record ends")
        labels = np.frombuffer(rest[: 4 * flag], dtype="<f4").astype(np.float32)
        rest = rest[4 * flag:]
    else:
        labels = np.array([label], np.float32)
    return IRHeader(int(flag), labels, int(id_), int(id2)), rest


class RecordIOReader:
    """Random access to one indexed RecordIO file; thread-safe (``os.pread``)."""

    def __init__(self, rec_path: str | os.PathLike, idx_path: str | os.PathLike):
        self.rec_path = Path(rec_path)
        self.idx_path = Path(idx_path)
        if not self.rec_path.is_file():
            raise DatasetError(f"RecordIO file {self.rec_path} does not exist")
        keys, offsets = read_index(self.idx_path)
        self.keys = keys
        self.offsets = dict(zip(keys.tolist(), offsets.tolist(), strict=True))
        self._fh = open(self.rec_path, "rb")  # noqa: SIM115 - kept open for pread
        self.file_size = os.fstat(self._fh.fileno()).st_size

    def close(self) -> None:
        self._fh.close()

    def payload(self, record_id: int) -> bytes:
        """The payload of ``record_id``; RecordError when it is not indexed or unreadable."""
        off = self.offsets.get(int(record_id))
        if off is None:
            raise RecordError(f"record id {record_id} is not in the index {self.idx_path.name}")
        return read_part_at(self._fh, off, self.file_size)

    def record(self, record_id: int) -> tuple[IRHeader, bytes]:
        """``(header, image bytes)`` of ``record_id``."""
        return unpack(self.payload(record_id))

    def header(self, record_id: int) -> IRHeader:
        """Only the header of ``record_id``: reads at most the first 64 payload bytes."""
        off = self.offsets.get(int(record_id))
        if off is None:
            raise RecordError(f"record id {record_id} is not in the index {self.idx_path.name}")
        head = os.pread(self._fh.fileno(), 8, off) if off + 8 <= self.file_size else b""
        if len(head) < 8:
            raise RecordError(f"truncated record: header at byte {off} past the end of the "
                              f"file ({self.file_size} bytes)")
        magic, lrec = struct.unpack("<II", head)
        if magic != MAGIC:
            raise RecordError(f"bad magic 0x{magic:08x} at byte {off} (expected 0x{MAGIC:08x})")
        if lrec >> 29 not in (0, 1):
            raise RecordError(f"record starts with continuation flag {lrec >> 29}")
        length = lrec & LENGTH_MASK
        if off + 8 + length > self.file_size:
            raise RecordError(f"truncated record: {length} bytes at byte {off + 8} run past "
                              f"the end of the file ({self.file_size} bytes)")
        if lrec >> 29 == 1:  # split record: read it whole (rare)
            return unpack(self.payload(record_id))[0]
        return unpack(os.pread(self._fh.fileno(), min(length, 1024), off + 8))[0]


_READERS: dict[tuple[str, str], RecordIOReader] = {}
_LOCK = threading.Lock()


def cached_reader(rec_path: str | os.PathLike, idx_path: str | os.PathLike) -> RecordIOReader:
    """One shared :class:`RecordIOReader` per (rec, idx) in this process."""
    key = (os.path.realpath(rec_path), os.path.realpath(idx_path))
    with _LOCK:
        reader = _READERS.get(key)
        if reader is None:
            reader = _READERS[key] = RecordIOReader(*key)
        return reader


def locator(rec_name: str, record_id: int) -> str:
    """The manifest path of a record: ``<rec file name>#<record id>``."""
    return f"{rec_name}#{int(record_id)}"


def image_record_ids(reader: RecordIOReader) -> tuple[np.ndarray, tuple[int, int] | None]:
    """Record ids that hold images, and the header record's ``(a, b)`` when there is one.

    With an insightface header record 0 (``flag > 0``), images are records ``1 .. a-1``
    (whether indexed or not: ids missing from the index become status rows); otherwise
    every indexed record is an image.
    """
    keys = np.sort(reader.keys)
    if 0 in reader.offsets:
        try:
            head = reader.header(0)
        except RecordError as exc:
            raise DatasetError(f"{reader.rec_path}: record 0 (the header record) is "
                               f"unreadable: {exc}") from exc
        if head.flag > 0 and len(head.label) >= 2:
            a, b = int(head.label[0]), int(head.label[1])
            if not 1 <= a <= b:
                raise DatasetError(f"{reader.rec_path}: header record 0 has labels ({a}, {b}); "
                                   "expected 1 <= a <= b")
            return np.arange(1, a, dtype=np.int64), (a, b)
    return keys, None


def read_recordio(rec_path: str | os.PathLike, idx_path: str | os.PathLike | None = None
                  ) -> pd.DataFrame:
    """Raw manifest rows of a RecordIO set: ``path`` (locator), ``identity``, ``record_id``,
    ``status``, ``message``.

    Only record headers are read (a few bytes per record). Identity = the record's first
    label as an integer string. A record that cannot be read (bad magic, truncated, id
    missing from the index, no finite label) keeps a row with status ``decode_error``
    (``missing`` for an id absent from the index, ``no_identity`` for a bad label).
    """
    rec_path = Path(rec_path)
    idx_path = Path(idx_path) if idx_path else rec_path.with_suffix(".idx")
    reader = RecordIOReader(rec_path, idx_path)
    try:
        ids, header = image_record_ids(reader)
        rows = []
        for rid in ids.tolist():
            status, message, identity = "ok", "", ""
            try:
                head = reader.header(rid)
                lab = float(head.label[0]) if len(head.label) else float("nan")
                if not np.isfinite(lab):
                    status, message = "no_identity", f"record {rid}: label {lab} is not finite"
                else:
                    identity = str(int(lab))
            except RecordError as exc:
                missing = "not in the index" in str(exc)
                status = "missing" if missing else "decode_error"
                message = f"record {rid}: {exc}"
            rows.append((locator(rec_path.name, rid), identity, rid, status, message))
    finally:
        reader.close()
    if not rows:
        raise DatasetError(f"{rec_path}: no image records (index {idx_path})")
    df = pd.DataFrame(rows, columns=["path", "identity", "record_id", "status", "message"])
    df.attrs["header"] = header
    return df
