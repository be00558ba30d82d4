"""The manifest: one row per input image, with a status, a stable id and a shard.

Adapters (``facecast.datasets``) turn a dataset layout into raw rows (``path`` as given,
``identity``, optional ``split``, ``exclude`` and ``label_*`` columns).
:func:`finalize_manifest` checks every row against the dataset root, gives each a status,
a stable ``image_id`` and a shard; :func:`write_manifest` writes it with one Parquet row
group per shard and the shard list in the footer, so that per-shard jobs read only their
rows and building the DAG reads no rows at all.

Statuses: ``ok``; ``missing`` (no such file); ``unreadable`` (exists, cannot be opened);
``outside_root`` (path escapes the dataset root); ``duplicate`` (path already listed; the
first occurrence keeps ``ok``); ``no_identity`` (no identity given). Rows with a status
other than ``ok`` are kept and flow through every later stage with that status.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np
import pandas as pd
import pyarrow.parquet as pq

from facecast.parquet_io import read_metadata, write_parquet

MANIFEST_COLUMNS = [
    "image_id", "path", "identity", "split", "shard", "exclude",
    "status", "message", "single_image",
]
SHARD_DIGITS = 5


class DatasetError(ValueError):
    """A dataset cannot be read; the message names the file (and line) at fault."""


def shard_name(index: int) -> str:
    """Shard id string for shard number ``index`` (zero-padded, sortable)."""
    return f"{index:0{SHARD_DIGITS}d}"


def _relative_inside(root: Path, raw: str) -> tuple[str, str | None]:
    """Return (posix path relative to root, error) for ``raw``; error if it escapes root."""
    p = Path(raw)
    full = p if p.is_absolute() else root / p
    try:
        resolved = Path(os.path.normpath(full))
        rel = resolved.relative_to(root)
    except ValueError:
        return raw, f"path escapes the dataset root {root}"
    if str(rel) in ("", "."):
        return raw, "path is the dataset root itself"
    # symlinks may point outside; check the real target too
    if full.is_symlink():
        try:
            Path(os.path.realpath(full)).relative_to(os.path.realpath(root))
        except ValueError:
            return raw, "symlink target escapes the dataset root"
    return PurePosixPath(*rel.parts).as_posix(), None


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
    ``message`` and ``label_*`` columns are kept when present. ``image_id`` is the path
    relative to the root (posix); a duplicate path gets ``<path>#dup<k>``. Shards are
    consecutive blocks of ``shard_size`` rows in the adapter's (deterministic) order.
    """
    if "path" not in raw or "identity" not in raw:
        raise DatasetError("a manifest needs 'path' and 'identity' columns")
    root = Path(os.path.normpath(Path(root).absolute()))
    n = len(raw)
    df = raw.reset_index(drop=True).copy()
    status = (df["status"].astype(object).where(df["status"].notna(), "ok")
              if "status" in df else pd.Series(["ok"] * n, dtype=object))
    message = (df["message"].astype(object).where(df["message"].notna(), "")
               if "message" in df else pd.Series([""] * n, dtype=object))
    status = np.array(status.tolist(), dtype=object)
    message = np.array(message.astype(str).tolist(), dtype=object)

    rel_paths = np.empty(n, dtype=object)
    for i, p in enumerate(df["path"].astype(str).tolist()):
        rel, err = _relative_inside(root, p)
        rel_paths[i] = rel
        if err and status[i] == "ok":
            status[i], message[i] = "outside_root", err

    identity = df["identity"].astype(object).where(df["identity"].notna(), "")
    identity = identity.astype(str).str.strip().to_numpy(dtype=object)
    for i in np.flatnonzero(identity == ""):
        if status[i] == "ok":
            status[i], message[i] = "no_identity", "no identity given for this image"

    # duplicates: first occurrence stays, later ones flagged, ids made unique
    image_id = rel_paths.copy()
    seen: dict[str, int] = {}
    for i, p in enumerate(rel_paths):
        k = seen.get(p, 0)
        seen[p] = k + 1
        if k:
            image_id[i] = f"{p}#dup{k}"
            if status[i] == "ok":
                status[i], message[i] = "duplicate", f"path listed {k + 1} times; first kept"

    if check_files:
        for i in np.flatnonzero(status == "ok"):
            full = root / rel_paths[i]
            if not full.is_file():
                status[i], message[i] = "missing", f"file not found: {full}"
            elif not os.access(full, os.R_OK):
                status[i], message[i] = "unreadable", f"file not readable: {full}"

    out = pd.DataFrame({
        "image_id": image_id.astype(str),
        "path": rel_paths.astype(str),
        "identity": identity.astype(str),
        "split": (df["split"].astype(str) if "split" in df else pd.Series(["all"] * n)).to_numpy(),
        "shard": [shard_name(i // shard_size) for i in range(n)],
        "exclude": (df["exclude"].fillna(False).astype(bool) if "exclude" in df
                    else pd.Series(np.zeros(n, bool))).to_numpy(),
        "status": status.astype(str),
        "message": message.astype(str),
    })
    exclude_set = set(exclude_paths)
    if exclude_set:
        out["exclude"] |= out["path"].isin(exclude_set).to_numpy()
    ok = out["status"] == "ok"
    counts = out.loc[ok, "identity"].value_counts()
    out["single_image"] = out["identity"].map(counts).fillna(0).to_numpy() == 1
    for col in sorted(c for c in df.columns if c.startswith("label_")):
        out[col] = df[col].to_numpy()
    return out


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
