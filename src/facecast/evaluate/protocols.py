"""Verification protocols: the pair lists an embedder is scored on.

Three sources, one shape (``fold``, ``image_a``, ``image_b``, ``identity_a``,
``identity_b``, ``label``, ``status``, ``message``; images are manifest ``image_id``\\ s):

* a mined benchmark's ``pairs.parquet`` (:mod:`facecast.analysis.mining`);
* an LFW view-2 ``pairs.txt`` (parsed at ingest into ``results/<ds>/protocols/pairs.parquet``);
* a folder of CAST ``.list`` files from elsewhere (``0.list``..``9.list``, ``val.list``;
  lines ``path_a path_b label``), imported with :func:`import_cast_lists`; the fold is the
  file's stem. Paths are taken relative to the dataset root (``strip_prefix`` removes a
  leading part first) and looked up in the manifest by path.

Pairs whose images are missing from the manifest, or are not ``ok`` there, are kept with
that status; evaluation skips them and counts them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from facecast.datasets.lfw import read_lfw_pairs
from facecast.manifest import DatasetError
from facecast.parquet_io import read_parquet, write_parquet

PROTOCOL_COLUMNS = ["fold", "image_a", "image_b", "identity_a", "identity_b", "label",
                    "status", "message"]


def _fold_key(name: str) -> tuple[int, int | str]:
    return (0, int(name)) if name.isdigit() else (1, name)


def read_cast_lists(folder: str | os.PathLike) -> pd.DataFrame:
    """Parse every ``*.list`` in ``folder`` into ``fold``, ``path_a``, ``path_b``, ``label``."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DatasetError(f"CAST list folder {folder} does not exist")
    files = sorted(folder.glob("*.list"), key=lambda p: _fold_key(p.stem))
    if not files:
        raise DatasetError(f"{folder}: no .list files")
    rows = []
    for f in files:
        for lineno, line in enumerate(f.read_text().splitlines(), 1):
            if not line.strip():
                continue
            parts = line.split()
            if len(parts) != 3 or parts[2] not in ("0", "1"):
                raise DatasetError(f"{f}:{lineno}: expected 'path_a path_b 0|1', got {line!r}")
            rows.append((f.stem, parts[0], parts[1], int(parts[2])))
    return pd.DataFrame(rows, columns=["fold", "path_a", "path_b", "label"])


def _strip(path: str, prefix: str) -> str:
    if prefix and path.startswith(prefix):
        path = path[len(prefix):]
    return path.lstrip("/")


def attach_manifest(pairs: pd.DataFrame, manifest: pd.DataFrame, *, strip_prefix: str = ""
                    ) -> pd.DataFrame:
    """Map ``path_a``/``path_b`` to manifest images; add identities, status and message."""
    by_path = manifest.set_index("path")
    pa_ = pairs["path_a"].map(lambda p: _strip(p, strip_prefix))
    pb_ = pairs["path_b"].map(lambda p: _strip(p, strip_prefix))
    out = pd.DataFrame({"fold": pairs["fold"].astype(str)})
    for side, paths in (("a", pa_), ("b", pb_)):
        out[f"image_{side}"] = paths.map(by_path["image_id"]).fillna(paths).astype(str)
        out[f"identity_{side}"] = paths.map(by_path["identity"]).fillna(
            paths.map(lambda p: p.rsplit("/", 1)[0] if "/" in p else "")).astype(str)
        out[f"_st_{side}"] = paths.map(by_path["status"]).fillna("not_in_manifest").astype(str)
    out["label"] = pairs["label"].astype(np.int8).to_numpy()
    ok = (out["_st_a"] == "ok") & (out["_st_b"] == "ok")
    out["status"] = np.where(ok, "ok", np.where(out["_st_a"] != "ok", out["_st_a"], out["_st_b"]))
    out["message"] = np.where(ok, "", "image_a: " + out["_st_a"] + "; image_b: " + out["_st_b"])
    return out[PROTOCOL_COLUMNS]


def import_cast_lists(folder: str | os.PathLike, manifest_path: str | os.PathLike,
                      out_path: str | os.PathLike, *, strip_prefix: str = "",
                      provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Import a CAST ``.list`` folder as a protocol Parquet checked against the manifest."""
    manifest = read_parquet(manifest_path, columns=["image_id", "path", "identity", "status"])
    pairs = attach_manifest(read_cast_lists(folder), manifest, strip_prefix=strip_prefix)
    prov = dict(provenance or {})
    prov.update({"stage": "protocol", "protocol": "cast_lists", "source": str(folder)})
    write_parquet(pairs, out_path, provenance=prov)
    return pairs


def import_lfw_pairs(pairs_file: str | os.PathLike, manifest_path: str | os.PathLike,
                     out_path: str | os.PathLike, *, strip_prefix: str = "",
                     provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Import an LFW ``pairs.txt`` (LFW file naming) as a protocol Parquet."""
    raw = read_lfw_pairs(pairs_file).rename(columns={"image_a": "path_a", "image_b": "path_b"})
    manifest = read_parquet(manifest_path, columns=["image_id", "path", "identity", "status"])
    pairs = attach_manifest(raw, manifest, strip_prefix=strip_prefix)
    prov = dict(provenance or {})
    prov.update({"stage": "protocol", "protocol": "lfw_pairs", "source": str(pairs_file)})
    write_parquet(pairs, out_path, provenance=prov)
    return pairs


def import_protocol(spec: Mapping[str, Any], manifest_path: str | os.PathLike,
                    out_path: str | os.PathLike, *,
                    provenance: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Import one configured protocol (``evaluate.imports.<name>``)."""
    fmt = spec.get("format", "cast_lists")
    kw = {"strip_prefix": spec.get("strip_prefix", ""), "provenance": provenance}
    if fmt == "cast_lists":
        return import_cast_lists(spec["path"], manifest_path, out_path, **kw)
    if fmt == "lfw_pairs":
        return import_lfw_pairs(spec["path"], manifest_path, out_path, **kw)
    raise DatasetError(f"unknown protocol format {fmt!r} (cast_lists | lfw_pairs)")


def load_protocol(path: str | os.PathLike) -> pd.DataFrame:
    """Read a protocol or mined-pairs Parquet into :data:`PROTOCOL_COLUMNS` (+ extras kept)."""
    df = read_parquet(path)
    missing = [c for c in ("fold", "image_a", "image_b", "label") if c not in df]
    if missing:
        raise DatasetError(f"{path}: not a pair protocol (missing columns {missing})")
    if "status" not in df:
        df["status"] = "ok"
    if "message" not in df:
        df["message"] = ""
    for side in ("a", "b"):
        if f"identity_{side}" not in df:
            df[f"identity_{side}"] = ""
    df["fold"] = df["fold"].astype(str)
    df["label"] = df["label"].astype(np.int8)
    extra = [c for c in df.columns if c not in PROTOCOL_COLUMNS]
    return df[PROTOCOL_COLUMNS + extra]
