"""A verification ``.bin`` written in bounded memory (:mod:`facecast.analysis.bins`).

A ``.bin`` is the pickle of ``(bins, issame_list)``: a list of encoded images and a list of
bools. At CC11's size (220,000 crops) the images alone are ~6 GB, so they are never held
together in memory. Two steps:

* :class:`CropSpill` reads the wanted crops from the faces shards one record batch at a
  time (row groups without a wanted ``image_id`` skipped), encodes each once and
  appends it to an anonymous temporary file beside the output; in memory stays an offset
  per image. The peak is about one row group's crop column (pyarrow reads a column chunk
  whole; the faces stage writes one row group per shard): 730 MiB for a CC11-sized
  export (``benchmarks/bin_export.py``, docs/SCALE.md).
* :func:`write_bin_stream` writes the pickle's opcode stream itself (pickle protocol 4,
  the opcodes ``pickle.dump`` uses for these types): ``PROTO 4``, an empty list filled by
  ``MARK .. APPENDS`` batches of 1,000 (``pickle``'s own batch size) of ``BINBYTES``
  items read back one at a time from the spill, then the bools as ``NEWTRUE`` /
  ``NEWFALSE`` in the same batches, ``TUPLE2``, ``STOP``. An image met again (one crop in
  several pairs) is written once and referenced through the pickle memo (``MEMOIZE`` /
  ``BINGET``), as ``pickle.dump`` does for one object seen twice. Protocol-4 framing is
  optional for a reader, so there is none. Any unpickler reads the result:
  ``pickle.load`` (insightface's ``load_bin``, recorded in
  ``tests/data/reference/insightface/``) and facecast's restricted unpickler
  (:func:`facecast.datasets.insightface_bin.load_bin`).
"""

from __future__ import annotations

import io
import os
import struct
import tempfile
from collections.abc import Callable, Iterable, Sequence
from typing import IO

import pyarrow as pa
import pyarrow.parquet as pq

from facecast.faces.crops import decode_error_text
from facecast.io.atomic import atomic_path

#: the pickle protocol written (``pickle.DEFAULT_PROTOCOL`` of Python 3.8+; CAST writes 4)
PICKLE_PROTOCOL = 4
#: items per MARK .. APPENDS batch (``pickle._BATCHSIZE``)
BATCH = 1000
#: rows per record batch when scanning the faces shards
SCAN_ROWS = 256

_PROTO, _STOP, _MARK, _APPENDS = b"\x80", b".", b"(", b"e"
_EMPTY_LIST, _TUPLE2, _TRUE, _FALSE = b"]", b"\x86", b"\x88", b"\x89"
_SHORT_BINBYTES, _BINBYTES, _BINBYTES8 = b"C", b"B", b"\x8e"
_MEMOIZE, _BINGET, _LONG_BINGET = b"\x94", b"h", b"j"


class CropSpill:
    """Encoded crops of chosen images, spilled to an anonymous temporary file.

    :meth:`fill` scans faces shards; afterwards :attr:`status` holds the faces status of
    every wanted image found (with or without a crop), :meth:`get` the encoded bytes of
    those with one. Use as a context manager (the file disappears on close)."""

    def __init__(self, folder: str | os.PathLike) -> None:
        self._fh: IO[bytes] = tempfile.TemporaryFile(dir=folder)
        self._index: dict[str, tuple[int, int]] = {}
        self.status: dict[str, str] = {}
        self.n_bytes = 0

    def __enter__(self) -> CropSpill:
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.close()

    def __contains__(self, image_id: str) -> bool:
        return image_id in self._index

    def add(self, image_id: str, data: bytes) -> None:
        """Append ``data`` as the bytes of ``image_id`` (the first time only)."""
        if image_id in self._index:
            return
        self._fh.seek(0, io.SEEK_END)
        self._index[image_id] = (self._fh.tell(), len(data))
        self._fh.write(data)
        self.n_bytes += len(data)

    def get(self, image_id: str) -> bytes:
        """The bytes stored for ``image_id`` (KeyError when it has none)."""
        offset, length = self._index[image_id]
        self._fh.seek(offset)
        return self._fh.read(length)

    def fill(self, faces_paths: Sequence[str | os.PathLike], wanted: Iterable[str],
             encode: Callable[[bytes], bytes], column: str = "crop_arcface") -> None:
        """Read the ``column`` crops of ``wanted`` images from ``faces_paths``, a record
        batch of :data:`SCAN_ROWS` rows at a time (row groups holding none of them are
        skipped on their ``image_id`` column), and store ``encode(crop)`` of each."""
        ids = set(map(str, wanted))
        for path in faces_paths:
            pf = pq.ParquetFile(path, buffer_size=1 << 20)
            for rg in range(pf.num_row_groups):
                have = pf.read_row_group(rg, columns=["image_id"]).column(0).to_pylist()
                if ids.isdisjoint(have):
                    continue
                for batch in pf.iter_batches(batch_size=SCAN_ROWS, row_groups=[rg],
                                             columns=["image_id", "status", column],
                                             use_threads=False):
                    self._take(batch, ids, encode, column)

    def _take(self, batch: pa.RecordBatch, ids: set[str], encode: Callable[[bytes], bytes],
              column: str) -> None:
        crops = batch.column(column)
        for k, (iid, status) in enumerate(zip(batch.column("image_id").to_pylist(),
                                              batch.column("status").to_pylist(),
                                              strict=True)):
            if iid not in ids:
                continue
            self.status.setdefault(iid, status)
            blob = crops[k].as_py()
            if blob is None or iid in self:
                continue
            try:
                self.add(iid, encode(blob))
            except ValueError as err:  # a crop that does not decode: named by the export
                self.status[iid] = f"crop does not decode: {decode_error_text(err)}"


def _bytes_op(n: int) -> bytes:
    if n < 256:
        return _SHORT_BINBYTES + bytes([n])
    if n < 2**32:
        return _BINBYTES + struct.pack("<I", n)
    return _BINBYTES8 + struct.pack("<Q", n)


def _get_op(index: int) -> bytes:
    return _BINGET + bytes([index]) if index < 256 else _LONG_BINGET + struct.pack("<I", index)


def _batched(fh: IO[bytes], items: Iterable[bytes]) -> None:
    """``MARK item.. APPENDS`` per :data:`BATCH` items (nothing for no item)."""
    count = 0
    for item in items:
        if count % BATCH == 0:
            fh.write(_MARK)
        fh.write(item)
        count += 1
        if count % BATCH == 0:
            fh.write(_APPENDS)
    if count % BATCH:
        fh.write(_APPENDS)


def write_bin_stream(path: str | os.PathLike, image_ids: Iterable[str],
                     issame: Sequence[bool], image: Callable[[str], bytes]) -> dict[str, int]:
    """Write the ``.bin`` whose images are ``image(i)`` for each of ``image_ids`` (two per
    pair, in order) and whose labels are ``issame``, atomically, holding one image at a
    time (module docstring). Returns ``n_images``, ``n_unique`` and ``n_bytes``."""
    memo: dict[str, int] = {}
    n_images = 0

    def items() -> Iterable[bytes]:
        nonlocal n_images
        for iid in image_ids:
            n_images += 1
            if iid in memo:
                yield _get_op(memo[iid])
                continue
            data = image(iid)
            memo[iid] = len(memo)
            yield _bytes_op(len(data)) + data + _MEMOIZE

    with atomic_path(path) as tmp, open(tmp, "wb", buffering=1 << 20) as fh:
        fh.write(_PROTO + bytes([PICKLE_PROTOCOL]) + _EMPTY_LIST)
        _batched(fh, items())
        fh.write(_EMPTY_LIST)
        _batched(fh, (_TRUE if s else _FALSE for s in issame))
        fh.write(_TUPLE2 + _STOP)
        size = fh.tell()
        if n_images != 2 * len(issame):  # the temporary file is discarded, no .bin
            raise ValueError(f"{n_images} images for {len(issame)} pairs")
    return {"n_images": n_images, "n_unique": len(memo), "n_bytes": size}
