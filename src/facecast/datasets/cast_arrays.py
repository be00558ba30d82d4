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
  the first listing stays ``ok``). Bad rows are kept, never dropped. A
  ``nan_attribute`` row enters benchmarks as CAST's code lets it (each filter decides on
  its own column) unless ``benchmarks.<bench>.cast_nan: drop``
  (:mod:`facecast.analysis.cast_filters`).
* Whole-file problems (shape mismatch, non-numeric attributes, paths that are not
  strings, a mask of the wrong shape or dtype, a ``columns.csv`` of the wrong length,
  duplicate column names) raise :class:`~facecast.datasets.manifest.DatasetError`; the
  parse-time checks (:func:`array_errors`) report them before any job, reading only the
  ``.npy`` headers.
"""

from __future__ import annotations

import csv
import mmap
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
#: the status of a row with a NaN or infinite cell (``benchmarks.<bench>.cast_nan``
#: decides whether it may enter a benchmark)
NAN_STATUS = STATUSES[NAN]
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

    def exclude_mask(self) -> np.ndarray:
        """The exclusion mask as a bool array (all False without ``exclude_mask``)."""
        if self.exclude is None:
            return np.zeros(self.n_rows, dtype=bool)
        return np.asarray(self.exclude, dtype=bool)


def read_column_names(path: str | os.PathLike) -> list[str]:
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
    columns = read_column_names(spec["columns"])
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


def as_str(paths: np.ndarray) -> np.ndarray:
    """Fixed-width ``S`` paths decoded as UTF-8 (``U`` arrays are returned as they are)."""
    return paths if paths.dtype.kind == "U" else np.char.decode(paths, "utf-8")


def _path_hash(paths: np.ndarray) -> np.ndarray:
    """A 64-bit polynomial hash per fixed-width path (equal paths, equal hashes)."""
    p = as_str(np.ascontiguousarray(paths))
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
    p = as_str(np.asarray(paths))
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


def map_span(fh: BinaryIO, start: int, nbytes: int) -> np.ndarray | None:
    """Bytes ``start .. start + nbytes - 1`` (``nbytes`` > 0) of the open file ``fh`` as a
    read-only uint8 array over a memory map of that span alone (no copy, no read of the
    pages into a buffer); the map, and the pages it keeps resident, go with the last array
    that views it. None when the file ends before the span does."""
    if start + nbytes > os.fstat(fh.fileno()).st_size:
        return None
    at = start - start % mmap.ALLOCATIONGRANULARITY
    mapped = mmap.mmap(fh.fileno(), start + nbytes - at, offset=at, access=mmap.ACCESS_READ)
    return np.frombuffer(mapped, np.uint8, nbytes, start - at)


def read_spans(path: str | os.PathLike, rows: np.ndarray, block: int
               ) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(span, picked)`` per block: ``span`` the file rows from the block's first selected
    row on (at most ``block`` rows, a read-only view of a memory map of those rows alone,
    :func:`map_span`: unmapped once the caller drops it, so at most a block's pages stay
    resident), ``picked`` the selected rows' positions in it. File spans holding no
    selected row are skipped."""
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
    with open(path, "rb", buffering=0) as fh:
        i = 0
        while i < len(rows):
            first = int(rows[i])
            j = int(np.searchsorted(rows, first + block, side="left"))
            count = int(rows[j - 1]) + 1 - first
            span = map_span(fh, offset + first * row_bytes, count * row_bytes)
            if span is None:
                raise DatasetError(f"{path}: file ends before row {first + count - 1}")
            yield span.view(dtype).reshape(count, *shape[1:]), rows[i:j] - first
            i = j
