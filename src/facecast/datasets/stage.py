"""Stage ``ingest``: a dataset layout in, the sharded manifest out.

:func:`build_manifest` is the one entry point the ingest rule calls; :func:`dataset_root`
says where a dataset's image paths are relative to.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from facecast.datasets.celeba import read_celeba
from facecast.datasets.folder import read_folder
from facecast.datasets.insightface_bin import read_insightface_bin
from facecast.datasets.lfw import read_lfw_pairs
from facecast.datasets.manifest import DatasetError, finalize_manifest, write_manifest
from facecast.datasets.recordio import read_recordio
from facecast.datasets.table import read_table_manifest

__all__ = ["DatasetError", "build_manifest", "dataset_root", "read_raw_rows", "read_lfw_pairs"]


def dataset_root(spec: dict[str, Any], dataset_dir: str | os.PathLike) -> Path:
    """The directory image paths of dataset ``spec`` are relative to.

    ``dataset_dir`` is ``results/<name>/dataset`` (where the synthetic generator writes).
    """
    if spec["kind"] == "synthetic":
        return Path(dataset_dir)
    container = {"recordio": "rec", "insightface_bin": "path"}.get(spec["kind"])
    if container and "root" not in spec:
        if container not in spec:
            raise DatasetError(f"dataset kind {spec['kind']!r} needs a '{container}' file")
        return Path(spec[container]).parent  # locators are relative to the file's folder
    if "root" not in spec:
        raise DatasetError(f"dataset kind {spec['kind']!r} needs a 'root' directory in the config")
    root = Path(spec["root"])
    if not root.is_dir():
        raise DatasetError(f"dataset root {root} does not exist or is not a directory")
    return root


def read_raw_rows(spec: dict[str, Any], root: Path) -> pd.DataFrame:
    """Raw rows of a dataset per its ``kind``."""
    kind = spec["kind"]
    if kind in ("folder", "lfw"):
        return read_folder(root, extensions=spec.get("extensions"))
    if kind == "table":
        if "manifest" not in spec:
            raise DatasetError("dataset kind 'table' needs a 'manifest' file (CSV or Parquet)")
        return read_table_manifest(spec["manifest"])
    if kind == "celeba":
        return read_celeba(root, images_dir=spec.get("images_dir"))
    if kind == "recordio":
        if "rec" not in spec:
            raise DatasetError("dataset kind 'recordio' needs 'rec' (and 'idx') files")
        return read_recordio(spec["rec"], spec.get("idx"))
    if kind == "insightface_bin":
        if "path" not in spec:
            raise DatasetError("dataset kind 'insightface_bin' needs 'path' (the .bin file)")
        return read_insightface_bin(spec["path"])
    if kind == "synthetic":
        truth = root / "truth.parquet"
        if not truth.is_file():
            raise DatasetError(f"synthetic dataset not generated yet: {truth} is missing")
        return read_table_manifest(truth)
    raise DatasetError(f"unknown dataset kind {kind!r}")


def _read_exclude_list(path: str | None) -> list[str]:
    if not path:
        return []
    p = Path(path)
    if not p.is_file():
        raise DatasetError(f"exclude list {p} does not exist")
    return [line.strip() for line in p.read_text().splitlines() if line.strip()
            and not line.startswith("#")]


def build_manifest(spec: dict[str, Any], dataset_dir: str | os.PathLike,
                   out_path: str | os.PathLike, *,
                   provenance: dict[str, Any] | None = None) -> pd.DataFrame:
    """Read dataset ``spec``, finalize and write the sharded manifest; return it."""
    from facecast.datasets.sources import CONTAINER_KINDS, container_spec

    root = dataset_root(spec, dataset_dir)
    raw = read_raw_rows(spec, root)
    shard_size = int(spec.get("shard_size", 10_000))
    excluded = _read_exclude_list(spec.get("exclude"))
    by = spec.get("exclude_by", "path")
    if by == "identity":
        raw["exclude"] = raw["identity"].astype(str).isin(set(excluded)).to_numpy() | (
            raw["exclude"].fillna(False).astype(bool).to_numpy() if "exclude" in raw else False)
        excluded = []
    elif by == "record":
        if "record_id" not in raw:
            raise DatasetError("exclude_by: record needs a dataset of kind recordio")
        bad = [e for e in excluded if not e.isdigit()]
        if bad:
            raise DatasetError(f"exclude list {spec.get('exclude')}: {bad[0]!r} is not a "
                               "record id (exclude_by: record)")
        excluded = [f"{Path(spec['rec']).name}#{int(e)}" for e in excluded]
    containers = container_spec(spec) if spec["kind"] in CONTAINER_KINDS else {}
    manifest = finalize_manifest(
        raw.drop(columns=["record_id"], errors="ignore"), root, shard_size=shard_size,
        check_files=spec.get("check_files", True) and not containers,
        exclude_paths=excluded,
    )
    prov = dict(provenance or {})
    prov.update({"stage": "manifest", "dataset_kind": spec["kind"],
                 "dataset_root": str(root)})  # as configured: byte-stable across run folders
    if containers:
        prov["containers"] = containers
    write_manifest(manifest, out_path, shard_size=shard_size, provenance=prov)
    return manifest
