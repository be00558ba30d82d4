"""The manifest: one row per input image, with a status, a stable id and a shard.

Adapters (``facecast.datasets``) turn a dataset layout into raw rows (``path`` as given,
``identity``, optional ``split``, ``exclude`` and ``label_*`` columns).
:func:`finalize_manifest` checks every row against the dataset root, gives each a status,
a stable ``image_id`` and a shard; :func:`write_manifest` writes it with one Parquet row
group per shard and the shard list in the footer, so that per-shard jobs read only their
rows and building the DAG reads no rows at all.

Statuses: ``ok``; ``missing`` (no such file); ``unreadable`` (exists but cannot be read:
no permission, not a regular file (FIFO, socket, device), a name the file system refuses
(component over 255 bytes), a name that is not valid UTF-8); ``outside_root`` (path escapes
the dataset root, also through a symlink anywhere on the way); ``duplicate`` (path already
listed; the first occurrence keeps ``ok``); ``no_identity`` (no identity given);
``no_path`` (empty path cell). Rows with a status other than ``ok`` are kept and flow
through every later stage with that status. Messages of table manifests name the file
and line.

``image_id`` is the normalised path (relative to the root; for paths outside the root the
normalised path as given). Ids the manifest has to invent contain ``//``, which no
normalised path contains, so they can never equal a real file's id: a duplicate path gets
``<path>//dup<k>``, an empty path ``(no path)//row<n>`` (``n`` = 1-based row), a name that
is not valid UTF-8 ``<name with \\x escapes>//not-utf8``.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from facecast.io.parquet_io import read_metadata, write_parquet

MANIFEST_COLUMNS = [
    "image_id", "path", "identity", "split", "shard", "exclude",
    "status", "message", "single_image",
]
#: optional columns: five landmarks (x1 y1 ... x5 y5, image pixels) and a detector score the
#: dataset gives (IJB's ``*_name_5pts_score.txt``); the faces stage aligns with them
GIVEN_COLUMNS = ("given_landmarks", "given_score")
SHARD_DIGITS = 5
#: separator of generated ids; never part of a normalised path (see the module docstring)
ID_SEP = "//"
_TRUE = frozenset({"true", "1", "yes"})
_FALSE = frozenset({"false", "0", "no"})


class DatasetError(ValueError):
    """A dataset cannot be read; the message names the file (and line) at fault."""


#: ``shard_size: auto``: images per shard up to :data:`AUTO_MAX_SHARDS` shards, ...
AUTO_SHARD_SIZE = 10_000
#: ... and above it (more than 10M images) shards grow, in steps of
#: :data:`AUTO_SHARD_STEP`, so that a dataset has at most this many (42M images: 1,000
#: shards of 42,000, where 10,000 would make 4,200 and every per-shard rule 4,200 jobs)
AUTO_MAX_SHARDS = 1_000
AUTO_SHARD_STEP = 1_000


def resolve_shard_size(value: int | str | None, n_images: int) -> int:
    """Images per shard for a dataset of ``n_images`` rows: ``value`` itself when it is a
    number, else (``auto``, or unset) :data:`AUTO_SHARD_SIZE` while that gives at most
    :data:`AUTO_MAX_SHARDS` shards, and above that the smallest multiple of
    :data:`AUTO_SHARD_STEP` that does (docs/SCALE.md: the job count against the time a
    job takes)."""
    if value is not None and value != "auto":
        size = int(value)
        if size < 1:
            raise DatasetError(f"shard_size must be at least 1 or auto, not {value!r}")
        return size
    need = -(-max(int(n_images), 0) // AUTO_MAX_SHARDS)
    return max(AUTO_SHARD_SIZE, -(-need // AUTO_SHARD_STEP) * AUTO_SHARD_STEP)


def shard_name(index: int) -> str:
    """Shard id string for shard number ``index`` (zero-padded, sortable)."""
    return f"{index:0{SHARD_DIGITS}d}"


def _is_blank(value: Any) -> bool:
    """True for a missing path cell: None, NaN or the empty string."""
    if value is None:
        return True
    if isinstance(value, float) and np.isnan(value):
        return True
    return isinstance(value, str) and value == ""


def parse_bool(values: Iterable[Any], where: Callable[[int], str],
               column: str = "exclude") -> np.ndarray:
    """Strict booleans: True/False, 1/0, or the strings true/false, yes/no, 1/0 (any case).

    Missing values (None, NaN, empty string) are False. Anything else raises
    :class:`DatasetError` naming the value and its place (``where(i)``: the label of value
    ``i``, e.g. ``m.csv:7``).
    """
    vals = list(values)
    out = np.zeros(len(vals), dtype=bool)
    for i, v in enumerate(vals):
        if _is_blank(v) or v is pd.NA:
            continue
        if isinstance(v, (bool, np.bool_)):
            out[i] = bool(v)
            continue
        if isinstance(v, (int, np.integer, float, np.floating)) and v in (0, 1):
            out[i] = bool(v)
            continue
        text = str(v).strip().lower() if isinstance(v, str) else None
        if text in _TRUE:
            out[i] = True
        elif text in _FALSE or text == "":
            out[i] = False
        else:
            raise DatasetError(f"{where(i)}: {column} value {v!r} is not a boolean; use true/false, "
                               f"yes/no or 1/0 (any case; empty = false)")
    return out


def _normalise(root: Path, raw: str) -> tuple[str, str, str | None]:
    """(path column, id base, error) for ``raw``: relative posix path inside ``root``.

    Lexical only (no file system access). Paths escaping the root keep ``raw`` as their
    path and their normalised form as id base.
    """
    p = Path(raw)
    full = p if p.is_absolute() else root / p
    resolved = Path(os.path.normpath(full))
    try:
        rel = resolved.relative_to(root)
    except ValueError:
        return raw, os.path.normpath(raw), f"path escapes the dataset root {root}"
    if str(rel) in ("", "."):
        return raw, os.path.normpath(raw), "path is the dataset root itself"
    rel_posix = PurePosixPath(*rel.parts).as_posix()
    return rel_posix, rel_posix, None


class _RealPaths:
    """Symlink checks against the real dataset root, caching each directory's real path."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.real_root = os.path.realpath(root)
        self._dirs: dict[str, str] = {}

    def _inside(self, real: str) -> bool:
        return real == self.real_root or real.startswith(self.real_root.rstrip(os.sep) + os.sep)

    def escape(self, rel: str) -> str | None:
        """Why ``root/rel`` leads outside the root through a symlink, or None."""
        full = os.path.join(self.root, rel)
        parent = os.path.dirname(full)
        real_parent = self._dirs.get(parent)
        if real_parent is None:
            real_parent = self._dirs[parent] = os.path.realpath(parent)
        if not self._inside(real_parent):
            return "a directory symlink on the path leads outside the dataset root"
        try:
            is_link = stat.S_ISLNK(os.lstat(full).st_mode)
        except OSError:
            return None  # missing or refused: reported by the file check
        if is_link and not self._inside(os.path.realpath(full)):
            return "symlink target escapes the dataset root"
        return None


def _file_problem(full: Path) -> tuple[str, str] | None:
    """(status, reason) when ``full`` cannot be read as a regular file, else None."""
    try:
        st = os.stat(full)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            if os.path.islink(full):
                return "missing", f"broken symlink: {full}"
            return "missing", f"file not found: {full}"
        return "unreadable", f"cannot access {full}: {exc.strerror or exc}"
    if not stat.S_ISREG(st.st_mode):
        kind = ("FIFO" if stat.S_ISFIFO(st.st_mode) else "socket" if stat.S_ISSOCK(st.st_mode)
                else "directory" if stat.S_ISDIR(st.st_mode) else "device or special file")
        return "unreadable", f"not a regular file ({kind}): {full}"
    if not os.access(full, os.R_OK):
        return "unreadable", f"file not readable: {full}"
    return None


def _row_labels(raw: pd.DataFrame) -> Callable[[int], str]:
    """Where raw row ``i`` came from: ``<file>:<line>`` when the adapter says, else ``""``.

    Adapters set ``raw.attrs["source"]`` (a file name) and a ``source_line`` column, or,
    rows of several files, a ``source_file`` column with it.
    """
    if "source_file" in raw and "source_line" in raw:
        files, at = raw["source_file"].to_numpy(), raw["source_line"].to_numpy()
        return lambda i: f"{files[i]}:{int(at[i])}"
    src = raw.attrs.get("source")
    if src and "source_line" in raw:
        lines = raw["source_line"].to_numpy()
        return lambda i: f"{src}:{int(lines[i])}"
    if src:
        return lambda i: f"{src}: row {i + 1}"
    return lambda i: ""


def finalize_manifest(
    raw: pd.DataFrame,
    root: str | os.PathLike,
    *,
    shard_size: int,
    check_files: bool = True,
    exclude_paths: Iterable[str] = (),
) -> pd.DataFrame:
    """Give every raw row a status, an ``image_id`` and a shard; keep every row.

    ``raw`` needs ``path`` and ``identity``; ``split``, ``exclude``, ``status``,
    ``message``, ``label_*`` and :data:`GIVEN_COLUMNS` are kept when present. ``image_id`` is the path
    relative to the root (posix); generated ids (duplicates, empty paths) contain ``//``
    and so never equal a path (module docstring). Shards are consecutive blocks of
    ``shard_size`` rows in the adapter's (deterministic) order. Messages of problems found
    here start with the row's place (``m.csv:7: ...``) when the adapter recorded it.
    """
    if "path" not in raw or "identity" not in raw:
        raise DatasetError("a manifest needs 'path' and 'identity' columns")
    root = Path(os.path.normpath(Path(root).absolute()))
    where = _row_labels(raw)
    df = raw.reset_index(drop=True).copy()
    rows = _RowStatus(df, where)
    rel_paths, id_base = _check_paths(df["path"].tolist(), root, rows)
    identity = _identities(df["identity"], rows)
    image_id = _unique_ids(id_base, rows)
    if check_files:
        _check_files(root, rel_paths, rows)
    out = _manifest_frame(df, image_id, rel_paths, identity, rows, shard_size)
    _refuse_shared_ids(out, where)
    _mark_excluded(out, set(exclude_paths))
    _mark_single_images(out)
    _carry_columns(df, out)
    return out


class _RowStatus:
    """Every row's status and message (from the adapter, else ``ok`` and empty); the first
    problem found for a row is the one it keeps."""

    def __init__(self, df: pd.DataFrame, where: Callable[[int], str]) -> None:
        n = len(df)
        status = (df["status"].astype(object).where(df["status"].notna(), "ok")
                  if "status" in df else pd.Series(["ok"] * n, dtype=object))
        message = (df["message"].astype(object).where(df["message"].notna(), "")
                   if "message" in df else pd.Series([""] * n, dtype=object))
        self.status = np.array(status.tolist(), dtype=object)
        self.message = np.array(message.astype(str).tolist(), dtype=object)
        self.where = where

    def flag(self, i: int, st: str, msg: str) -> None:
        """Row ``i`` gets status ``st`` and ``msg`` (after its place, when known), unless it
        already has a status other than ``ok``."""
        where = self.where
        if self.status[i] == "ok":
            self.status[i], self.message[i] = st, (f"{where(i)}: {msg}" if where(i) else msg)


def _check_paths(paths: list[Any], root: Path, rows: _RowStatus) -> tuple[np.ndarray, np.ndarray]:
    """(path column, id base) of every row; flags empty paths (``no_path``), names that are
    not valid UTF-8 or hold a NUL (``unreadable``) and paths leaving the root, lexically or
    through a symlink (``outside_root``). Touches the file system only for the symlinks."""
    n = len(paths)
    rel_paths = np.empty(n, dtype=object)
    id_base = np.empty(n, dtype=object)
    real = _RealPaths(root)
    flag = rows.flag
    for i, p in enumerate(paths):
        if _is_blank(p):
            rel_paths[i], id_base[i] = "", f"(no path){ID_SEP}row{i + 1}"
            flag(i, "no_path", "empty path")
            continue
        p = str(p)
        try:
            p.encode("utf-8")
        except UnicodeEncodeError:  # undecodable bytes from the file system (surrogateescape)
            shown = os.fsencode(p).decode("utf-8", "backslashreplace")
            rel_paths[i], id_base[i] = shown, f"{shown}{ID_SEP}not-utf8"
            flag(i, "unreadable", "file name is not valid UTF-8 (shown with \\x escapes)")
            continue
        if "\x00" in p:
            shown = p.replace("\x00", "\\x00")
            rel_paths[i], id_base[i] = shown, f"{shown}{ID_SEP}nul"
            flag(i, "unreadable", "path contains a NUL character")
            continue
        rel, base, err = _normalise(root, p)
        rel_paths[i], id_base[i] = rel, base
        if err:
            flag(i, "outside_root", err)
            continue
        if rows.status[i] == "ok":
            try:
                err = real.escape(rel)
            except (OSError, ValueError) as exc:
                flag(i, "unreadable", f"cannot resolve the path: {exc}")
                continue
            if err:
                flag(i, "outside_root", err)
    return rel_paths, id_base


def _identities(column: pd.Series, rows: _RowStatus) -> np.ndarray:
    """The stripped identity of every row as str; rows without one are flagged
    ``no_identity``."""
    identity = column.astype(object).where(column.notna(), "")
    identity = identity.astype(str).str.strip().to_numpy(dtype=object)
    for i in np.flatnonzero(identity == ""):
        rows.flag(i, "no_identity", "no identity given for this image")
    return identity


def _unique_ids(id_base: np.ndarray, rows: _RowStatus) -> np.ndarray:
    """``image_id`` of every row: its id base, and for a repeat of an earlier row's base
    ``<base>//dup<k>`` with the row flagged ``duplicate`` (the first occurrence stays)."""
    image_id = id_base.copy()
    seen: dict[str, int] = {}
    for i, p in enumerate(id_base):
        k = seen.get(p, 0)
        seen[p] = k + 1
        if k:
            image_id[i] = f"{p}{ID_SEP}dup{k}"
            rows.flag(i, "duplicate", f"path listed {k + 1} times; first kept")
    return image_id


def _check_files(root: Path, rel_paths: np.ndarray, rows: _RowStatus) -> None:
    """Flag every still-``ok`` row whose file is missing or cannot be read."""
    for i in np.flatnonzero(rows.status == "ok"):
        problem = _file_problem(root / rel_paths[i])
        if problem:
            rows.flag(i, *problem)


def _exclude_column(df: pd.DataFrame, where: Callable[[int], str]) -> np.ndarray:
    """The adapter's ``exclude`` as booleans (strict, see :func:`parse_bool`); all False
    when it gives none."""
    if "exclude" in df:
        excl = df["exclude"]
        return (excl.fillna(False).to_numpy(dtype=bool) if excl.dtype == bool
                else parse_bool(excl.tolist(), lambda i: where(i) or f"row {i + 1}"))
    return np.zeros(len(df), bool)


def _manifest_frame(df: pd.DataFrame, image_id: np.ndarray, rel_paths: np.ndarray,
                    identity: np.ndarray, rows: _RowStatus, shard_size: int) -> pd.DataFrame:
    """The manifest's fixed columns (up to ``message``): splits (``unknown`` where the
    adapter left one empty, ``all`` when it gives none) and shards of ``shard_size``
    consecutive rows."""
    n = len(df)
    exclude = _exclude_column(df, rows.where)
    split = (df["split"].astype(object).where(df["split"].notna(), "unknown").astype(str)
             if "split" in df else pd.Series(["all"] * n))
    return pd.DataFrame({
        "image_id": image_id.astype(str),
        "path": rel_paths.astype(str),
        "identity": identity.astype(str),
        "split": split.to_numpy(),
        "shard": [shard_name(i // shard_size) for i in range(n)],
        "exclude": exclude,
        "status": rows.status.astype(str),
        "message": rows.message.astype(str),
    })


def _refuse_shared_ids(out: pd.DataFrame, where: Callable[[int], str]) -> None:
    """Raise :class:`DatasetError` when two rows share an ``image_id`` (cannot happen by
    construction; an ambiguous manifest is never written)."""
    dup_ids = out["image_id"].duplicated(keep=False)
    if dup_ids.any():
        rows = np.flatnonzero(dup_ids.to_numpy())[:2]
        raise DatasetError(f"rows {rows[0] + 1} and {rows[1] + 1} ({where(rows[0])} "
                           f"{where(rows[1])}) get the same image_id "
                           f"{out['image_id'].iloc[rows[0]]!r}")


def _mark_excluded(out: pd.DataFrame, exclude_set: set[str]) -> None:
    """Also exclude the rows whose path is in ``exclude_set`` (in place)."""
    if exclude_set:
        out["exclude"] |= out["path"].isin(exclude_set).to_numpy()


def _mark_single_images(out: pd.DataFrame) -> None:
    """Add ``single_image``: the row's identity has exactly one ``ok`` image."""
    ok = out["status"] == "ok"
    counts = out.loc[ok, "identity"].value_counts()
    out["single_image"] = out["identity"].map(counts).fillna(0).to_numpy() == 1


def _carry_columns(df: pd.DataFrame, out: pd.DataFrame) -> None:
    """Copy the adapter's :data:`GIVEN_COLUMNS` (landmarks and score, for faces) and its
    ``label_*`` columns (sorted by name) onto the manifest."""
    for col in GIVEN_COLUMNS:
        if col in df:
            out[col] = df[col].to_numpy()
    for col in sorted(c for c in df.columns if c.startswith("label_")):
        out[col] = df[col].to_numpy()


def write_manifest(manifest: pd.DataFrame, path: str | os.PathLike, *,
                   shard_size: int, provenance: dict[str, Any] | None = None) -> Path:
    """Write the manifest, one row group per shard, shard ids and counts in the footer."""
    shard_ids = sorted(manifest["shard"].unique().tolist())
    status_counts = manifest["status"].value_counts().sort_index().to_dict()
    meta = {
        "facecast.shards": json.dumps(shard_ids),
        "facecast.shard_size": str(shard_size),
        "facecast.n_images": str(len(manifest)),
        "facecast.status_counts": json.dumps({k: int(v) for k, v in status_counts.items()}),
    }
    return write_parquet(manifest, path, provenance=provenance,
                         row_group_size=max(1, shard_size), metadata=meta)


def read_shard_ids(path: str | os.PathLike) -> list[str]:
    """Shard ids of a manifest, from its footer (reads no rows)."""
    meta = read_metadata(path)
    if "facecast.shards" not in meta:
        raise DatasetError(f"{path} is not a facecast manifest (no shard list in its footer)")
    return json.loads(meta["facecast.shards"])


def read_shard(path: str | os.PathLike, shard: str, columns: list[str] | None = None) -> pd.DataFrame:
    """The manifest rows of one shard (row groups of other shards are skipped)."""
    table = pq.read_table(path, columns=columns, filters=[("shard", "==", shard)])
    return table.to_pandas()
