"""CSV or Parquet manifest: columns ``path``, ``identity``, optional ``split``,
``exclude`` and label columns (any other column becomes ``label_<name>``).

CSV files are read as UTF-8 (a byte-order mark is allowed). ``exclude`` is parsed
strictly (true/false, yes/no, 1/0 in any case; empty = false); any other value stops the
ingest naming the file and line. Each row remembers its line, so that row problems found
later (empty path, unreadable file ...) name it in the row's message.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pandas as pd

from facecast.datasets.manifest import DatasetError, parse_bool

RESERVED = {"path", "identity", "split", "exclude", "status", "message"}


def _csv_lines(df: pd.DataFrame) -> np.ndarray:
    """First line of each data row (the header is line 1; quoted newlines counted)."""
    extra = np.zeros(len(df), dtype=np.int64)
    for col in df.columns:
        if df[col].dtype == object or pd.api.types.is_string_dtype(df[col]):
            try:
                counts = df[col].str.count("\n").fillna(0)
            except AttributeError:  # not a string column
                continue
            extra += counts.to_numpy(dtype=np.int64)
    starts = 2 + np.arange(len(df), dtype=np.int64)
    starts[1:] += np.cumsum(extra)[:-1]
    return starts


def read_table_manifest(path: str | os.PathLike) -> pd.DataFrame:
    """Read a user manifest; errors name the file (and line) and what is wrong with it."""
    path = Path(path)
    if not path.is_file():
        raise DatasetError(f"manifest file {path} does not exist")
    is_parquet = path.suffix.lower() in (".parquet", ".pq")
    try:
        if is_parquet:
            df = pd.read_parquet(path)
        else:
            df = pd.read_csv(path, dtype={"path": str, "identity": str, "split": str,
                                          "exclude": str},
                             keep_default_na=False, na_values=[""], encoding="utf-8-sig")
    except Exception as exc:  # pandas raises many types for malformed files
        raise DatasetError(f"cannot read manifest {path}: {exc}") from exc
    missing = [c for c in ("path", "identity") if c not in df.columns]
    if missing:
        raise DatasetError(f"manifest {path} lacks required column(s) {missing}; "
                           f"it has {list(df.columns)}")
    df = df.copy()
    if is_parquet:
        def where(i: int) -> str:
            return f"{path}: row {i + 1}"
    else:
        df["source_line"] = _csv_lines(df)
        lines = df["source_line"].to_numpy()

        def where(i: int) -> str:
            return f"{path}:{int(lines[i])}"
    if "exclude" in df and df["exclude"].dtype != bool:
        df["exclude"] = parse_bool(df["exclude"].tolist(), where)
    df["path"] = df["path"].map(lambda v: v if v is None or isinstance(v, str)
                                else (None if pd.isna(v) else str(v)))
    renames = {c: f"label_{c}" for c in df.columns
               if c not in RESERVED | {"source_line"} and not str(c).startswith("label_")}
    df = df.rename(columns=renames)
    df.attrs["source"] = str(path)
    return df
