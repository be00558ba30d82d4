# Shared helpers for every stage: dataset names, shard lists, default targets.
import re

from facecast.datasets.manifest import read_shard_ids
from facecast.io.shard_index import EMBED_INDEX, FACES_INDEX

DATASETS = list(config["datasets"])


wildcard_constraints:
    ds="|".join(re.escape(d) for d in DATASETS),
    shard=r"\d{5}",


# Each stage file appends callables ds -> list[str] of the outputs `rule all` builds.
DEFAULT_TARGETS = []


# Shard indexes (facecast.io.shard_index: FACES_INDEX, EMBED_INDEX) stand for every shard of
# a stage. Gathering shard footers is cheap: on a cluster the indexes run on the submit host.
localrules:
    faces_index,
    embed_index,


def dataset_cfg(ds):
    """The config block of dataset `ds`."""
    return config["datasets"][ds]


def shards(ds):
    """Shard ids of dataset `ds`, read from the manifest checkpoint's footer (no row scan)."""
    return read_shard_ids(checkpoints.manifest.get(ds=ds).output.manifest)


def per_shard(pattern, ds, **wildcards):
    """Expand `pattern` (with {ds} and {shard}) over every shard of dataset `ds`."""
    return expand(pattern, ds=ds, shard=shards(ds), **wildcards)


def all_targets(wildcards):
    return ["results/plan.md"] + [t for ds in DATASETS for fn in DEFAULT_TARGETS for t in fn(ds)]


def manifest_inputs(wildcards):
    """The synthetic dataset's truth table, for kind `synthetic` (else nothing)."""
    if dataset_cfg(wildcards.ds)["kind"] == "synthetic":
        return {"truth": f"results/{wildcards.ds}/dataset/truth.parquet"}
    return {}


def ingest_targets(ds):
    """The manifest, plus the LFW protocol when the dataset has a pairs file."""
    out = [f"results/{ds}/manifest.parquet"]
    if dataset_cfg(ds).get("pairs"):
        out.append(f"results/{ds}/protocols/pairs.parquet")
    return out
