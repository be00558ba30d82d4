"""What the datasets rules call: a dataset layout in, the sharded manifest out, plus the
synthetic demo dataset, fixed LFW protocols and the dataset's report figures.

Entries (one per rule): :func:`build_manifest` (checkpoint ``manifest``),
:func:`generate_dataset` (``synthetic_dataset``), :func:`write_lfw_protocol`
(``lfw_protocol``), :func:`dataset_summary` (``dataset_summary``) and
:func:`plot_attribute_distributions` (``attribute_distributions``).
:func:`~facecast.datasets.targets.dataset_root` (where a dataset's image paths are relative
to) lives on the DAG side, in :mod:`facecast.datasets.targets`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from facecast.datasets.celeba import read_celeba
from facecast.datasets.fairface import read_fairface
from facecast.datasets.folder import read_folder
from facecast.datasets.ijb import read_ijb
from facecast.datasets.insightface_bin import read_insightface_bin
from facecast.datasets.label_noise import DEMO_LABEL_NOISE
from facecast.datasets.lfw import read_lfw_pairs, write_lfw_protocol
from facecast.datasets.manifest import (
    DatasetError,
    finalize_manifest,
    resolve_shard_size,
    write_manifest,
)
from facecast.datasets.recordio import read_recordio
from facecast.datasets.summary import dataset_summary, plot_attribute_distributions
from facecast.datasets.table import read_table_manifest
from facecast.datasets.targets import dataset_root
from facecast.datasets.utkface import read_utkface
from facecast.io.paths import portable_path

__all__ = ["DEMO_LABEL_NOISE", "DatasetError", "build_manifest", "build_pool_manifest", "dataset_root",
           "dataset_summary", "generate_dataset", "plot_attribute_distributions",
           "read_lfw_pairs", "read_raw_rows", "write_lfw_protocol"]


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
        return read_insightface_bin(spec["path"], layout=spec.get("layout") or "pairs")
    if kind == "ijb":
        return read_ijb(root, spec.get("variant") or "ijbc")
    if kind in ("rfw", "bfw"):
        return _read_fair_set(spec, root)
    if kind == "fairface":
        return read_fairface(root, spec.get("splits"))
    if kind == "utkface":
        return read_utkface(root, extensions=spec.get("extensions"))
    if kind == "cast_arrays":
        raise DatasetError("dataset kind 'cast_arrays' is read by "
                           "facecast.datasets.cast_manifest, not as raw rows")
    if kind == "synthetic":
        truth = root / "truth.parquet"
        if not truth.is_file():
            raise DatasetError(f"synthetic dataset not generated yet: {truth} is missing")
        return read_table_manifest(truth)
    raise DatasetError(f"unknown dataset kind {kind!r}")


def _read_fair_set(spec: dict[str, Any], root: Path) -> pd.DataFrame:
    """Raw rows of an RFW release (or its ``.bin`` files) or a BFW datatable
    (:mod:`facecast.datasets.rfw`, :mod:`facecast.datasets.bfw`)."""
    from facecast.config.fair_sets import rfw_sets
    from facecast.datasets.bfw import read_bfw
    from facecast.datasets.rfw import read_rfw, read_rfw_bins

    if spec["kind"] == "bfw":
        return read_bfw(spec["table"])
    if spec.get("bins"):
        return read_rfw_bins({s: spec["bins"][s] for s in rfw_sets(spec)})
    return read_rfw(root, rfw_sets(spec))


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

    if spec["kind"] == "cast_arrays":  # straight from the mapped arrays, no row objects
        from facecast.datasets.cast_manifest import build_cast_manifest

        build_cast_manifest(spec, out_path, provenance=provenance)
        return pd.read_parquet(out_path, columns=["status"])
    root = dataset_root(spec, dataset_dir)
    raw = read_raw_rows(spec, root)
    shard_size = resolve_shard_size(spec.get("shard_size"), len(raw))
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
    containers = container_spec(spec, root) if spec["kind"] in CONTAINER_KINDS else {}
    manifest = finalize_manifest(
        raw.drop(columns=["record_id"], errors="ignore"), root, shard_size=shard_size,
        check_files=(spec.get("check_files", True) and not containers
                     and not (spec["kind"] == "bfw" and "root" not in spec)),
        exclude_paths=excluded,
    )
    prov = dict(provenance or {})
    prov.update({"stage": "manifest", "dataset_kind": spec["kind"],
                 "dataset_root": portable_path(root)})  # relative as configured or to cwd
    if containers:
        prov["containers"] = containers
    write_manifest(manifest, out_path, shard_size=shard_size, provenance=prov)
    return manifest


def build_pool_manifest(spec: dict[str, Any], manifest_path: str | os.PathLike,
                        subset_paths: list[str], out_path: str | os.PathLike, *,
                        provenance: dict[str, Any] | None = None) -> int:
    """The union of a ``cast_arrays`` dataset's benchmark pools as a manifest of its own
    (checkpoint ``pool_manifest``: faces and embed run on it, not on all N rows)."""
    from facecast.datasets.cast_manifest import write_pool_manifest

    return write_pool_manifest(manifest_path, list(subset_paths), out_path,
                               shard_size=spec.get("shard_size"), provenance=provenance)


def generate_dataset(out_dir: str | os.PathLike, *, seed: int, n_jobs: int = 1,
                     provenance: dict[str, Any] | None = None, **options: Any) -> pd.DataFrame:
    """Render the synthetic demo dataset into ``out_dir``; return its truth table.

    ``options`` are the sizes and ``label_noise`` of
    :func:`facecast.datasets.synthetic.generate.generate_dataset` (imported here, when the
    rule runs, so the manifest jobs do not load the renderer).
    """
    from facecast.datasets.synthetic.generate import generate_dataset as render

    return render(Path(out_dir), seed=seed, n_jobs=n_jobs, provenance=provenance, **options)
