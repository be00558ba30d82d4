"""CSV or Parquet manifest: columns ``path``, ``identity``, optional ``split``,
``exclude`` and label columns (any other column becomes ``label_<name>``)."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from facecast.manifest import DatasetError

RESERVED = {"path", "identity", "split", "exclude", "status", "message"}


def read_table_manifest(path: str | os.PathLike) -> pd.DataFrame:
    """Read a user manifest; errors name the file and what is wrong with it."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"manifest file {path} does not exist")
    try:
        if path.suffix.lower() in (".parquet", ".pq"):
            df = pd.read_parquet(path)
        else:
            df = pd.read_csv(path, dtype={"path": str, "identity": str}, keep_default_na=False,
                             na_values=[""])
    except Exception as exc:  # pandas raises many types for malformed files
        raise DatasetError(f"cannot read manifest {path}: {exc}") from exc
    missing = [c for c in ("path", "identity") if c not in df.columns]
    if missing:
        raise DatasetError(f"manifest {path} lacks required column(s) {missing}; "
                           f"it has {list(df.columns)}")
    df = df.copy()
    df["path"] = df["path"].astype(str)
    renames = {c: f"label_{c}" for c in df.columns
               if c not in RESERVED and not str(c).startswith("label_")}
    return df.rename(columns=renames)
