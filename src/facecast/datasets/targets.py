"""The DAG side of the datasets stage (workflow/rules/common.smk, ingest.smk, report.smk).

Pure functions of the (validated) config: where a dataset's images lie, which ingest and
dataset-report files a config asks for, the shard list of a written manifest (read from
its footer, no row scan) and the wildcard regex every rule file uses. Imported when the
Snakefile is parsed (by every Snakemake process, cluster jobs too), so no row is read here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from facecast.config.fair_sets import score_only
from facecast.config.util import attribute_only
from facecast.datasets.manifest import DatasetError, read_shard_ids

__all__ = ["DATASET_DIR", "MANIFEST", "array_datasets", "arrays_only", "attribute_datasets", "dataset_root", "distribution_targets", "image_root",
           "ingest_targets", "manifest_inputs", "name_regex", "score_datasets", "shard_ids",
           "summary_targets"]

#: where the synthetic generator writes (and image paths of a synthetic dataset start)
DATASET_DIR = "results/{ds}/dataset"
#: the sharded manifest (checkpoint ``manifest``)
MANIFEST = "results/{ds}/manifest.parquet"


def arrays_only(config: Mapping[str, Any], ds: str) -> bool:
    """Whether ``ds`` is a ``cast_arrays`` dataset: its attributes come from CAST's arrays,
    so no faces, embed or attribute-scoring job runs for it."""
    return (config.get("datasets", {}) or {}).get(ds, {}).get("kind") == "cast_arrays"


#: the union of a cast_arrays dataset's benchmark pools (checkpoint ``pool_manifest``)
POOL_MANIFEST = "results/{ds}/pool_manifest.parquet"


def pooled(config: Mapping[str, Any], ds: str) -> bool:
    """Whether ``ds`` is a ``cast_arrays`` dataset with its images (``root``): its faces and
    embeddings are computed for the union of its benchmark pools only."""
    return arrays_only(config, ds) and bool(config["datasets"][ds].get("root"))


def faces_manifest(config: Mapping[str, Any], ds: str) -> str:
    """The manifest the faces and embed jobs of ``ds`` read: the pool manifest of a
    ``cast_arrays`` dataset, else the manifest."""
    return (POOL_MANIFEST if pooled(config, ds) else MANIFEST).format(ds=ds)


def pool_inputs(config: Mapping[str, Any], ds: str) -> dict[str, Any]:
    """Inputs of checkpoint ``pool_manifest``: the manifest and the subset of every
    benchmark (their union is what the faces and embed stages see)."""
    benches = list(config.get("benchmarks", {}) or {})
    return {"manifest": MANIFEST.format(ds=ds),
            "subsets": [f"results/{ds}/benchmarks/{b}/subset.parquet" for b in benches]}


def attribute_datasets(config: Mapping[str, Any]) -> list[str]:
    """Datasets of an attribute-only kind (``fairface``, ``utkface``: images without
    identities, with truth labels): their default targets are the ingest, faces,
    attributes, dataset report and estimator report, never embeddings or verification."""
    return [ds for ds in (config.get("datasets", {}) or {}) if attribute_only(config, ds)]


def array_datasets(config: Mapping[str, Any], want: bool = True) -> list[str]:
    """The ``cast_arrays`` datasets (``want=False``: every other dataset)."""
    return [ds for ds in (config.get("datasets", {}) or {}) if arrays_only(config, ds) == want]


def score_datasets(config: Mapping[str, Any]) -> list[str]:
    """The BFW datasets whose images are not read (no embed model: the datatable's score
    columns are the models; :func:`facecast.config.fair_sets.score_only`)."""
    return [ds for ds in (config.get("datasets", {}) or {}) if score_only(config, ds)]


def name_regex(names: Iterable[str]) -> str:
    """A wildcard constraint matching exactly ``names`` (never matches when empty)."""
    return "|".join(re.escape(n) for n in names) or "(?!)"


def dataset_root(spec: Mapping[str, Any], dataset_dir: str | os.PathLike) -> Path:
    """The directory image paths of dataset ``spec`` are relative to.

    ``dataset_dir`` is ``results/<name>/dataset`` (where the synthetic generator writes).
    """
    if spec["kind"] == "synthetic":
        return Path(dataset_dir)
    if "root" not in spec and (spec["kind"] == "bfw" and spec.get("table")
                               or spec["kind"] == "rfw" and spec.get("bins")):
        # BFW without its images (score models only) / RFW as .bin files: the table's or
        # the first .bin's folder
        first = spec["table"] if spec["kind"] == "bfw" else next(iter(dict(spec["bins"]).values()))
        return Path(first).parent
    container = {"recordio": "rec", "insightface_bin": "path",
                 "cast_arrays": "paths"}.get(spec["kind"])
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


def image_root(config: Mapping[str, Any], ds: str) -> str:
    """The root of dataset ``ds``'s images, as the per-shard jobs receive it."""
    return str(dataset_root(config["datasets"][ds], DATASET_DIR.format(ds=ds)))


def shard_ids(manifest: str | os.PathLike) -> list[str]:
    """Shard ids of a written manifest, from its footer (reads no rows)."""
    return read_shard_ids(manifest)


def manifest_inputs(config: Mapping[str, Any], ds: str) -> dict[str, str]:
    """Inputs of checkpoint ``manifest``: the synthetic dataset's truth table, for kind
    ``synthetic``; CAST's arrays for kind ``cast_arrays`` (else nothing)."""
    spec = config["datasets"][ds]
    if spec["kind"] == "synthetic":
        return {"truth": f"{DATASET_DIR.format(ds=ds)}/truth.parquet"}
    if spec["kind"] == "cast_arrays":
        return cast_array_inputs(config, ds)
    return {}


def cast_array_inputs(config: Mapping[str, Any], ds: str) -> dict[str, str]:
    """CAST's array files of a ``cast_arrays`` dataset, as rule inputs."""
    spec = config["datasets"][ds]
    return {k: str(spec[k]) for k in ("attributes", "paths", "columns", "exclude_mask")
            if spec.get(k)}


def ingest_targets(config: Mapping[str, Any], ds: str) -> list[str]:
    """The manifest, plus the LFW protocol when the dataset has a pairs file."""
    out = [MANIFEST.format(ds=ds)]
    if config["datasets"][ds].get("pairs"):
        out.append(f"results/{ds}/protocols/pairs.parquet")
    return out


def summary_targets(ds: str) -> list[str]:
    """The dataset summary the report shows (rule ``dataset_summary``)."""
    return [f"results/{ds}/report/dataset_summary.{ext}" for ext in ("tsv", "png")]


def distribution_targets(ds: str) -> list[str]:
    """The attribute histograms the report shows (rule ``attribute_distributions``)."""
    return [f"results/{ds}/report/attribute_distributions.png"]
