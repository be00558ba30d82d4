"""CAST's fixed-width paths (``paths.npy``) as Arrow strings: the paths, their identity
folders and a count of distinct identities, without a Python object per row.

ASCII paths (WebFace42M's) are turned into one byte per character with numpy and wrapped
as Arrow string arrays from offset and data buffers; paths with other characters go
through their UTF-32 code points and one codec call. When every path's folder has the same
width (8 to 16 characters, as WebFace42M's ``0_0_<id7>``), each folder is also keyed by
two 64-bit integers (big-endian views of its first and last eight bytes: equal keys, equal
folders; key order, byte order), so identity runs and the number of distinct identities
come from integer compares instead of string hashing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from facecast.datasets.cast_arrays import as_str, read_spans
from facecast.datasets.manifest import DatasetError

#: folder widths keyed by two overlapping 8-byte words
KEY_WIDTHS = range(8, 17)


def _ascii_codes(paths: np.ndarray) -> np.ndarray | None:
    """The fixed-width paths as an ``(n, width)`` uint8 matrix of ASCII codes (NUL-padded
    at the end, as numpy pads), or None when a path has a non-ASCII character."""
    p = np.ascontiguousarray(paths)
    unit = 1 if p.dtype.kind == "S" else 4
    width = p.dtype.itemsize // unit
    if not width or not len(p):
        return np.zeros((len(p), width), np.uint8)
    codes = p.view(np.uint8 if unit == 1 else np.uint32).reshape(len(p), width)
    if int(codes.max()) >= 128:
        return None
    return codes if unit == 1 else codes.astype(np.uint8)


def _end_of_last(hit: np.ndarray) -> np.ndarray:
    """Per row of a bool matrix: 1 + the column of its last True (0 when none)."""
    n, w = hit.shape
    if not w:
        return np.zeros(n, np.int64)
    back = np.argmax(hit[:, ::-1], axis=1)
    found = hit[np.arange(n), w - 1 - back]
    return np.where(found, w - back, 0)


def _strings(codes: np.ndarray, lengths: np.ndarray | int) -> Any:
    """A pyarrow string array of the first ``lengths[i]`` ASCII codes (uint8) of each row
    (``lengths`` an int: the same for every row); equal lengths take a contiguous slice (no
    copy when it is all of a contiguous ``codes``), no per-row mask."""
    n, w = codes.shape
    same = isinstance(lengths, (int, np.integer))
    if same or (n and int(lengths.min()) == int(lengths.max())):
        width = int(lengths) if same else int(lengths[0])
        data = np.ascontiguousarray(codes[:, :width]).reshape(-1)
        off = np.int32 if data.size < 2**31 else np.int64
        offsets = np.arange(0, (n + 1) * width, width, dtype=off) if width else \
            np.zeros(n + 1, off)
    else:
        data = codes[np.arange(w)[None, :] < lengths[:, None]]
        offsets = np.zeros(n + 1, np.int32 if data.size < 2**31 else np.int64)
        np.cumsum(lengths, dtype=offsets.dtype, out=offsets[1:])
    kind = pa.string() if offsets.dtype == np.int32 else pa.large_string()
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _fixed_folder(codes: np.ndarray) -> int | None:
    """The column of the last ``/`` when it is the same in every row (WebFace42M's
    fixed-width identity folders), else None."""
    slashes = np.flatnonzero(codes[0] == ord("/")) if len(codes) else []
    if not len(slashes):
        return None
    k = int(slashes[-1])
    if (codes[:, k] == ord("/")).all() and not (codes[:, k + 1:] == ord("/")).any():
        return k
    return None


def _rows_differ(keys: np.ndarray) -> np.ndarray:
    """``keys[i] != keys[i - 1]`` for i >= 1, rows of a C-contiguous uint8 matrix compared
    as raw bytes."""
    v = keys.view(np.dtype((np.void, keys.shape[1]))).reshape(-1)
    return v[1:] != v[:-1]


def folder_keys(folders: np.ndarray, ordered: bool = True) -> np.ndarray | None:
    """``(2, n)`` uint64 keys of the rows of a C-contiguous ``(n, k)`` uint8 matrix of
    folder bytes, 8 <= k <= 16: row 0 the first eight bytes, row 1 the last eight. Two rows
    are equal iff their keys are; with ``ordered`` the words are read big-endian, so keys
    also compare as the bytes do (lexicographically, row 0 first); without, they are read
    as the machine's words (a plain copy, ~3x faster: for equality only; ``.byteswap()``
    on a little-endian machine makes them ``ordered``). None for other widths."""
    n, k = folders.shape
    if k not in KEY_WIDTHS:
        return None
    keys = np.empty((2, n), np.uint64)
    if n:
        word = ">u8" if ordered else "=u8"
        for i, at in enumerate((0, k - 8)):
            keys[i] = np.ndarray((n,), word, folders, at, (k,))
    return keys


def distinct_keys(keys: np.ndarray) -> int:
    """The number of distinct columns of :func:`folder_keys`' ``(2, n)`` array: its changes
    when the columns are in order (runs), else those of a lexicographic sort."""
    a, b = keys
    if len(a) < 2:
        return len(a)
    same_a = a[1:] == a[:-1]
    down = (a[1:] < a[:-1]) | (same_a & (b[1:] < b[:-1]))
    if down.any():
        order = np.lexsort((b, a))
        a, b = a[order], b[order]
        same_a = a[1:] == a[:-1]
    return 1 + int(np.count_nonzero(~(same_a & (b[1:] == b[:-1]))))


def _ascii_columns(codes: np.ndarray) -> tuple[Any, Any, np.ndarray, np.ndarray | None]:
    """``(paths, identities, heads, head_keys)`` of ASCII code rows (uint8, NUL-padded at
    the end); ``heads`` marks the rows whose identity differs from the previous row's (row
    0 too), ``head_keys`` their :func:`folder_keys` (None unless every folder has one
    width in :data:`KEY_WIDTHS`)."""
    n, w = codes.shape
    full = (bool(codes[:, -1].all()) if n else False) if w else True
    lengths = w if full else _end_of_last(codes != 0)
    heads = np.ones(n, bool)
    k = _fixed_folder(codes) if w else None
    if k is not None:                       # one folder width: a contiguous slice
        folders = np.ascontiguousarray(codes[:, :k])
        keys = folder_keys(folders, ordered=False)
        if n > 1 and keys is not None:
            heads[1:] = (keys[0, 1:] != keys[0, :-1]) | (keys[1, 1:] != keys[1, :-1])
        elif n > 1:
            heads[1:] = _rows_differ(folders) if k else False
        if keys is not None:                # word order to byte order: the heads only
            keys = keys[:, heads].byteswap() if np.little_endian else keys[:, heads]
        return _strings(codes, lengths), _strings(folders, k), heads, keys
    folder = np.maximum(_end_of_last(codes == ord("/")) - 1, 0)
    if n > 1 and w:
        # each row's folder bytes, zero beyond, compared with the previous row's
        kept = np.where(np.arange(w)[None, :] < folder[:, None], codes, 0)
        heads[1:] = _rows_differ(np.ascontiguousarray(kept)) | (folder[1:] != folder[:-1])
    elif n > 1:
        heads[1:] = False
    return _strings(codes, lengths), _strings(codes, folder), heads, None


def path_arrays(paths: np.ndarray) -> tuple[Any, Any]:
    """``(paths, identities)`` of a block of fixed-width paths as pyarrow string arrays; the
    identity is the folder (``os.path.dirname``, as CAST's ``make_id_array``; '' for a
    path without one). ASCII paths are converted from their code units with numpy (one
    uint8 matrix, no Python object per row); others through pyarrow."""
    codes = _ascii_codes(np.asarray(paths))
    if codes is not None:
        return _ascii_columns(codes)[:2]
    return _unicode_columns(paths)


def _utf8_strings(codes: np.ndarray, lengths: np.ndarray) -> Any:
    """A pyarrow string array of the first ``lengths[i]`` UTF-32 code points of each row:
    the kept code points are encoded to UTF-8 in one codec call, the offsets counted from
    each code point's UTF-8 width (no Python object per row)."""
    n, w = codes.shape
    cps = np.ascontiguousarray(codes[np.arange(w)[None, :] < lengths[:, None]])
    try:
        data = cps.tobytes().decode("utf-32-le").encode("utf-8")
    except (UnicodeDecodeError, UnicodeEncodeError) as exc:
        raise DatasetError(f"path array holds a code point that is not valid Unicode "
                           f"({exc})") from exc
    width = (1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000))
    cum = np.zeros(len(cps) + 1, np.int64)
    np.cumsum(width, out=cum[1:])
    ends = np.zeros(n + 1, np.int64)
    np.cumsum(lengths, out=ends[1:])
    offsets = cum[ends]
    if len(data) < 2**31:
        return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(
            offsets.astype(np.int32)), pa.py_buffer(data)])
    return pa.Array.from_buffers(pa.large_string(), n,
                                 [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _unicode_columns(paths: np.ndarray) -> tuple[Any, Any]:
    """:func:`path_arrays` of paths with non-ASCII characters, from their UTF-32 code
    points (numpy's own layout; ``S`` paths are decoded as UTF-8 first)."""
    p = np.ascontiguousarray(as_str(np.asarray(paths)))
    codes = p.view(np.uint32).reshape(len(p), p.dtype.itemsize // 4)
    lengths = _end_of_last(codes != 0)
    folder = np.maximum(_end_of_last(codes == ord("/")) - 1, 0)
    return _utf8_strings(codes, lengths), _utf8_strings(codes, folder)


def read_path_blocks(path: str | os.PathLike, rows: np.ndarray, block: int = 1 << 18
                     ) -> Iterator[tuple[Any, Any, np.ndarray, np.ndarray | None]]:
    """``(paths, identities, heads, head_keys)`` (:func:`path_arrays`; ``heads``: rows whose
    identity differs from the previous row's in the block; ``head_keys``: their
    :func:`folder_keys`, or None) of the rows ``rows`` (ascending) of a fixed-width path
    ``.npy`` file, block by block (:func:`facecast.datasets.cast_arrays.read_spans`). ASCII paths are cast to one byte per
    character, before their rows are picked when at least half the rows of the span are,
    after when fewer are (then only the picked rows' pages are cast: measured faster up to
    about half at 42M rows)."""
    for data, picked in read_spans(path, rows, block):
        unit = 1 if data.dtype.kind == "S" else 4
        width = data.dtype.itemsize // unit
        if width:
            codes = data.view(np.uint8 if unit == 1 else np.uint32).reshape(len(data), width)
            sparse = 2 * len(picked) < len(codes)       # under half: pick them, then cast
            if sparse:
                codes = np.take(codes, picked, axis=0)
            if int(codes.max()) < 128:
                small = codes.astype(np.uint8, copy=False)
                yield _ascii_columns(small if sparse else np.take(small, picked, axis=0))
                continue
        ids, folders = path_arrays(data[picked])
        yield ids, folders, np.ones(len(picked), bool), None


def count_identities(blocks: Sequence[tuple[Any, np.ndarray, np.ndarray | None]]) -> int:
    """The number of distinct identities of :func:`read_path_blocks`' ``(identities, heads,
    head_keys)``: from the head keys when every block has them, else from the head rows'
    identity strings (``pyarrow.compute.unique``)."""
    if not blocks:
        return 0
    if all(keys is not None for _, _, keys in blocks):
        return distinct_keys(np.concatenate([keys for _, _, keys in blocks], axis=1))
    heads = [folders.filter(pa.array(first)) for folders, first, _ in blocks]
    return len(pc.unique(pa.chunked_array(heads, type=pa.string())))


def identities(paths: np.ndarray) -> Any:
    """The folder of each path as a pyarrow string array (:func:`path_arrays`)."""
    return path_arrays(paths)[1]
