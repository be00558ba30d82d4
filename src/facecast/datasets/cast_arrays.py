"""CAST's precomputed attribute arrays as a dataset (kind ``cast_arrays``).

CAST (Robbins et al., WACV 2023) ships its attributes of all 42M WebFace42M images as
three files: ``attrArr.npy`` (N x K, float32: 9 columns in the race/gender release, 67 in
the full one), ``paths.npy`` (N fixed-width unicode paths relative to the WebFace42M root,
``<identity folder>/<k>.jpg``) and ``columns.csv`` (the K column names). This module reads
them memory-mapped (``np.load(mmap_mode="r", allow_pickle=False)``: nothing is unpickled,
nothing is copied whole) and turns them into facecast's manifest and attribute table
without detecting, embedding or scoring anything.

* Identity = the path's folder (``os.path.dirname``), as CAST's ``make_id_array`` takes it.
* ``columns.csv``: every cell of every row is one name, in order (CAST's ``csv_to_list``).
  Its count must equal K; a missing file is an error (CAST's fallback of reading row 0 of
  the array as names is a bug and is not copied).
* ``exclude_mask`` (optional): a boolean ``.npy`` of N values; True rows (CAST's
  ``webface12m_idxs.npy``, the images a model was trained on) never enter a benchmark.
* Row statuses (:func:`row_statuses`; counted in the manifest's footer): ``ok``;
  ``nan_attribute`` (a NaN or infinite cell; the message names the columns);
  ``no_path`` (empty path); ``outside_root`` (absolute path or a ``..`` component);
  ``no_identity`` (a path without a folder); ``duplicate`` (the path was listed before;
  the first listing stays ``ok``). Bad rows are kept, never dropped.
* Whole-file problems (shape mismatch, non-numeric attributes, paths that are not
  strings, a mask of the wrong shape or dtype, a ``columns.csv`` of the wrong length,
  duplicate column names) raise :class:`~facecast.datasets.manifest.DatasetError`; the
  parse-time checks (:func:`array_errors`) report them before any job, reading only the
  ``.npy`` headers.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from facecast.datasets.manifest import DatasetError

#: the files a ``cast_arrays`` block names: key -> what it is
ARRAY_KEYS = {"attributes": "attribute array (attrArr.npy)",
              "paths": "path array (paths.npy)",
              "columns": "column names (columns.csv)"}
#: row status codes (uint8) and their names, in code order
STATUSES = ("ok", "nan_attribute", "no_path", "outside_root", "no_identity", "duplicate")
OK, NAN, NO_PATH, OUTSIDE, NO_IDENTITY, DUPLICATE = range(len(STATUSES))
#: rows processed per block when scanning the arrays
CHUNK_ROWS = 1 << 20


@dataclass(frozen=True)
class CastArrays:
    """The memory-mapped arrays of one ``cast_arrays`` dataset."""

    attributes: np.ndarray
    paths: np.ndarray
    columns: list[str]
    exclude: np.ndarray | None = None

    @property
    def n_rows(self) -> int:
        """N, the number of images."""
        return int(self.paths.shape[0])

    def column(self, name: str) -> np.ndarray:
        """Column ``name`` of the attribute array (a strided view of the mapped file)."""
        try:
            j = self.columns.index(name)
        except ValueError:
            raise DatasetError(f"no attribute column {name!r}; columns.csv names "
                               f"{self.columns}") from None
        return self.attributes[:, j]

    def exclude_mask(self) -> np.ndarray:
        """The exclusion mask as a bool array (all False without ``exclude_mask``)."""
        if self.exclude is None:
            return np.zeros(self.n_rows, dtype=bool)
        return np.asarray(self.exclude, dtype=bool)


def read_columns(path: str | os.PathLike) -> list[str]:
    """The names in ``columns.csv``: every cell of every row, in order (CAST's layout)."""
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"columns file {p} does not exist; cast_arrays needs the column "
                           "names (columns.csv), they are never guessed from the array")
    with open(p, newline="", encoding="utf-8-sig") as fh:
        names = [cell.strip() for row in csv.reader(fh) for cell in row if cell.strip()]
    if not names:
        raise DatasetError(f"columns file {p} names no column")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise DatasetError(f"columns file {p} names {dup} more than once")
    return names


def _load(path: str | os.PathLike, what: str) -> np.ndarray:
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"{what} {p} does not exist")
    try:
        return np.load(p, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:  # object arrays need pickle: refused
        raise DatasetError(f"{what} {p} cannot be read without unpickling ({exc}); save it "
                           "as a plain numeric / fixed-width unicode array") from exc
    except OSError as exc:
        raise DatasetError(f"{what} {p} is not a readable .npy file: {exc}") from exc


def open_cast_arrays(spec: Mapping[str, Any]) -> CastArrays:
    """Map the arrays of dataset block ``spec`` and check their shapes, dtypes and names.

    Raises :class:`DatasetError` naming the file and what is wrong; reads no row.
    """
    for key, what in ARRAY_KEYS.items():
        if not spec.get(key):
            raise DatasetError(f"dataset kind cast_arrays needs '{key}' ({what})")
    attrs = _load(spec["attributes"], ARRAY_KEYS["attributes"])
    paths = _load(spec["paths"], ARRAY_KEYS["paths"])
    columns = read_columns(spec["columns"])
    if attrs.ndim != 2:
        raise DatasetError(f"attribute array {spec['attributes']} has shape {attrs.shape}; "
                           "it must be N x K")
    if attrs.dtype.kind not in "fiu":
        raise DatasetError(f"attribute array {spec['attributes']} has dtype {attrs.dtype}; "
                           "it must be numeric (float32 as CAST ships it)")
    if paths.ndim != 1 or paths.dtype.kind not in "US":
        raise DatasetError(f"path array {spec['paths']} has shape {paths.shape} and dtype "
                           f"{paths.dtype}; it must be N fixed-width strings")
    if paths.shape[0] != attrs.shape[0]:
        raise DatasetError(f"path array {spec['paths']} has {paths.shape[0]} rows but the "
                           f"attribute array {spec['attributes']} {attrs.shape[0]}")
    if len(columns) != attrs.shape[1]:
        raise DatasetError(f"columns file {spec['columns']} names {len(columns)} columns but "
                           f"the attribute array has {attrs.shape[1]}")
    exclude = None
    if spec.get("exclude_mask"):
        exclude = _load(spec["exclude_mask"], "exclude mask")
        if exclude.dtype != np.bool_ or exclude.shape != (attrs.shape[0],):
            raise DatasetError(f"exclude mask {spec['exclude_mask']} has shape "
                               f"{exclude.shape} and dtype {exclude.dtype}; it must be "
                               f"{attrs.shape[0]} booleans (True = never in a benchmark)")
    return CastArrays(attrs, paths, columns, exclude)


def array_errors(ds: str, spec: Mapping[str, Any]) -> list[str]:
    """Parse-time check of a ``cast_arrays`` block: one message per problem, starting with
    the key path (reads the ``.npy`` headers and ``columns.csv`` only)."""
    key = f"datasets.{ds}"
    errors = [f"{key}.{k}: dataset kind cast_arrays needs {what}"
              for k, what in ARRAY_KEYS.items() if not spec.get(k)]
    if errors:
        return errors
    try:
        open_cast_arrays(spec)
    except DatasetError as exc:
        text = str(exc)
        at = next((k for k in ("columns", "exclude_mask", "paths", "attributes")
                   if spec.get(k) and str(spec[k]) in text), "attributes")
        errors.append(f"{key}.{at}: {text}")
    if spec.get("root") and not Path(str(spec["root"])).is_dir():
        errors.append(f"{key}.root: directory {spec['root']!r} does not exist")
    return errors


def _as_str(paths: np.ndarray) -> np.ndarray:
    """Fixed-width ``S`` paths decoded as UTF-8 (``U`` arrays are returned as they are)."""
    return paths if paths.dtype.kind == "U" else np.char.decode(paths, "utf-8")


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


def _strings(codes: np.ndarray, lengths: np.ndarray) -> Any:
    """A pyarrow string array of the first ``lengths[i]`` ASCII codes (uint8) of each row;
    equal lengths take a contiguous slice, no per-row mask."""
    import pyarrow as pa

    n, w = codes.shape
    if n and int(lengths.min()) == int(lengths.max()):
        data = np.ascontiguousarray(codes[:, :int(lengths[0])]).reshape(-1)
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


def _ascii_columns(codes: np.ndarray) -> tuple[Any, Any, np.ndarray]:
    """``(paths, identities, heads)`` of ASCII code rows (uint8, NUL-padded at the end);
    ``heads`` marks the rows whose identity differs from the previous row's (row 0 too)."""
    n, w = codes.shape
    full = (bool(codes[:, -1].all()) if n else False) if w else True
    lengths = np.full(n, w, np.int64) if full else _end_of_last(codes != 0)
    heads = np.ones(n, bool)
    k = _fixed_folder(codes) if w else None
    if k is not None:                       # one folder width: a contiguous slice
        folder = np.full(n, k, np.int64)
        if n > 1 and k:
            heads[1:] = _rows_differ(np.ascontiguousarray(codes[:, :k]))
        elif n > 1:
            heads[1:] = False
    else:
        folder = np.maximum(_end_of_last(codes == ord("/")) - 1, 0)
        if n > 1 and w:
            # each row's folder bytes, zero beyond, compared with the previous row's
            kept = np.where(np.arange(w)[None, :] < folder[:, None], codes, 0)
            heads[1:] = _rows_differ(np.ascontiguousarray(kept)) \
                | (folder[1:] != folder[:-1])
        elif n > 1:
            heads[1:] = False
    return _strings(codes, lengths), _strings(codes, folder), heads


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
    import pyarrow as pa

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
    p = np.ascontiguousarray(_as_str(np.asarray(paths)))
    codes = p.view(np.uint32).reshape(len(p), p.dtype.itemsize // 4)
    lengths = _end_of_last(codes != 0)
    folder = np.maximum(_end_of_last(codes == ord("/")) - 1, 0)
    return _utf8_strings(codes, lengths), _utf8_strings(codes, folder)


def read_path_blocks(path: str | os.PathLike, rows: np.ndarray, block: int = 1 << 18
                     ) -> Iterator[tuple[Any, Any, np.ndarray]]:
    """``(paths, identities, heads)`` (:func:`path_arrays`; ``heads``: rows whose identity
    differs from the previous row's in the block) of the rows ``rows`` (ascending) of a
    fixed-width path ``.npy`` file, block by block (:func:`read_rows`). ASCII paths are cast
    to one byte per character, before their rows are picked when most rows of the span
    are (numpy's gather of wide unicode items is slow), after when few are."""
    for data, picked in _read_spans(path, rows, block):
        unit = 1 if data.dtype.kind == "S" else 4
        width = data.dtype.itemsize // unit
        if width:
            codes = data.view(np.uint8 if unit == 1 else np.uint32).reshape(len(data), width)
            sparse = 4 * len(picked) < len(codes)       # few rows: pick them, then cast
            if sparse:
                codes = np.take(codes, picked, axis=0)
            if int(codes.max()) < 128:                  # (fresh arrays: buf is reused)
                small = codes.astype(np.uint8, copy=False)
                yield _ascii_columns(small if sparse else np.take(small, picked, axis=0))
                continue
        ids, folders = path_arrays(data[picked])
        yield ids, folders, np.ones(len(picked), bool)


def identities(paths: np.ndarray) -> Any:
    """The folder of each path as a pyarrow string array (:func:`path_arrays`)."""
    return path_arrays(paths)[1]


def _path_hash(paths: np.ndarray) -> np.ndarray:
    """A 64-bit polynomial hash per fixed-width path (equal paths, equal hashes)."""
    p = _as_str(np.ascontiguousarray(paths))
    codes = p.view(np.uint32).reshape(len(p), -1) if p.dtype.itemsize else \
        np.zeros((len(p), 0), np.uint32)
    h = np.full(len(p), 1469598103934665603, dtype=np.uint64)
    mult = np.uint64(1099511628211)
    with np.errstate(over="ignore"):
        for j in range(codes.shape[1]):
            h = (h ^ codes[:, j].astype(np.uint64)) * mult
    return h


def duplicate_rows(paths: np.ndarray) -> np.ndarray:
    """Bool mask of the rows whose path equals an earlier row's (the first stays False).

    Hashes the paths block by block, sorts the hashes and compares the strings of equal
    hashes only, so N paths cost one N-long uint64 sort, never a copy of the strings.
    """
    n = len(paths)
    h = np.empty(n, np.uint64)
    for lo in range(0, n, CHUNK_ROWS):
        h[lo:lo + CHUNK_ROWS] = _path_hash(np.asarray(paths[lo:lo + CHUNK_ROWS]))
    order = np.argsort(h, kind="stable")
    hs = h[order]
    same = np.flatnonzero(hs[1:] == hs[:-1])
    dup = np.zeros(n, bool)
    if not len(same):
        return dup
    rows = np.unique(np.r_[order[same], order[same + 1]])
    first: dict[str, int] = {}
    for r in rows:                          # ascending row order: earlier rows win
        key = str(paths[r])
        if key in first:
            dup[r] = True
        else:
            first[key] = int(r)
    return dup


def _path_status(paths: np.ndarray) -> np.ndarray:
    """Status codes of one block from its paths alone (empty, absolute, ``..``, no folder)."""
    p = _as_str(np.asarray(paths))
    code = np.zeros(len(p), np.uint8)
    slashed = np.char.add(np.char.add("/", np.char.replace(p, "\\", "/")), "/")
    bad = (np.char.startswith(p, "/") | np.char.startswith(p, "\\")
           | (np.char.find(slashed, "/../") >= 0) | (np.char.find(p, ":") == 1))
    code[np.char.find(p, "/") < 0] = NO_IDENTITY
    code[bad] = OUTSIDE
    code[np.char.str_len(p) == 0] = NO_PATH
    return code


def row_statuses(arrays: CastArrays) -> tuple[np.ndarray, dict[int, str]]:
    """Status code per row (:data:`STATUSES`) and a message per bad row (row -> text).

    A row keeps the first problem found: path problems, then NaN cells, then duplicates.
    """
    n = arrays.n_rows
    code = np.zeros(n, np.uint8)
    messages: dict[int, str] = {}
    float_attrs = arrays.attributes.dtype.kind == "f"
    for lo in range(0, n, CHUNK_ROWS):
        hi = min(n, lo + CHUNK_ROWS)
        block = _path_status(arrays.paths[lo:hi])
        if float_attrs:
            bad_cells = ~np.isfinite(np.asarray(arrays.attributes[lo:hi]))
            nan_rows = np.flatnonzero(bad_cells.any(axis=1) & (block == OK))
            block[nan_rows] = NAN
            for r in nan_rows:
                cols = [arrays.columns[j] for j in np.flatnonzero(bad_cells[r])]
                messages[lo + int(r)] = f"row {lo + int(r)}: NaN or infinite value in {cols}"
        code[lo:hi] = block
    dup = duplicate_rows(arrays.paths) & (code == OK)
    code[dup] = DUPLICATE
    for r in np.flatnonzero(code):
        if int(r) in messages:
            continue
        why = {NO_PATH: "empty path", NO_IDENTITY: "path has no identity folder",
               OUTSIDE: "absolute path or '..' component: escapes the dataset root",
               DUPLICATE: "path listed before; first kept"}[int(code[r])]
        messages[int(r)] = f"row {int(r)}: {why}"
    return code, messages


def npy_layout(path: str | os.PathLike) -> tuple[tuple[int, ...], np.dtype, int]:
    """``(shape, dtype, data offset)`` of a C-order ``.npy`` file (header only; object and
    Fortran-order arrays are refused)."""
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                       else np.lib.format.read_array_header_2_0)
        shape, fortran, dtype = read_header(fh)
        offset = fh.tell()
    if dtype.hasobject or fortran:
        raise DatasetError(f"{path}: object or Fortran-order arrays are not read (nothing is "
                           "unpickled); save a C-order numeric or fixed-width string array")
    return tuple(shape), dtype, offset


def fill_from(fh: BinaryIO, view: memoryview) -> int:
    """Fill ``view`` from the unbuffered file ``fh`` (``readinto`` until full or the end of
    the file); the number of bytes read (less than ``len(view)`` only at the end)."""
    done = 0
    while done < len(view):
        got = fh.readinto(view[done:])
        if not got:
            break
        done += got
    return done


def _read_spans(path: str | os.PathLike, rows: np.ndarray, block: int
                ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(span, picked)`` per block: ``span`` the file rows from the block's first selected
    row on (at most ``block`` rows, one plain read into a buffer reused for every block:
    valid until the next block), ``picked`` the selected rows' positions in it. File spans
    holding no selected row are skipped."""
    shape, dtype, offset = npy_layout(path)
    inner = int(np.prod(shape[1:], dtype=np.int64))
    row_bytes = dtype.itemsize * inner
    rows = np.asarray(rows, np.int64)
    if not len(rows):
        return
    if not row_bytes:
        for lo in range(0, len(rows), block):
            want = rows[lo:lo + block]
            yield np.zeros((int(want[-1] - want[0]) + 1, *shape[1:]), dtype), want - want[0]
        return
    buf = np.empty(min(block, int(rows[-1] - rows[0]) + 1) * row_bytes, np.uint8)
    with open(path, "rb", buffering=0) as fh:
        i = 0
        while i < len(rows):
            first = int(rows[i])
            j = int(np.searchsorted(rows, first + block, side="left"))
            count = int(rows[j - 1]) + 1 - first
            fh.seek(offset + first * row_bytes)
            if fill_from(fh, memoryview(buf)[:count * row_bytes]) < count * row_bytes:
                raise DatasetError(f"{path}: file ends before row {first + count - 1}")
            yield buf[:count * row_bytes].view(dtype).reshape(count, *shape[1:]), \
                rows[i:j] - first
            i = j


def read_rows(path: str | os.PathLike, rows: np.ndarray, block: int = 1 << 18
              ) -> Iterator[np.ndarray]:
    """The rows ``rows`` (ascending) of a ``.npy`` file, in blocks: each block holds the
    selected rows of at most ``block`` consecutive file rows, read with one plain file read
    into a buffer reused for every block (unlike a memory map, nothing stays resident;
    unlike fresh reads, no new pages per block)."""
    for data, picked in _read_spans(path, rows, block):
        yield data[picked]


def iter_blocks(n: int, size: int) -> Iterator[tuple[int, int]]:
    """``(lo, hi)`` row blocks of at most ``size`` rows covering ``0 .. n``."""
    for lo in range(0, n, max(1, size)):
        yield lo, min(n, lo + size)
