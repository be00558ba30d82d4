# Shared helpers for every stage: dataset names, shard lists, default targets.
# File lists and regexes: facecast.datasets.targets (name_regex serves every rule file).
import facecast.datasets.targets as datasets_targets
from facecast.datasets.targets import name_regex
from facecast.io.shard_index import EMBED_INDEX, FACES_INDEX

DATASETS = list(config["datasets"])


wildcard_constraints:
    ds=name_regex(DATASETS),
    shard=r"\d{5}",


# Each stage file appends callables ds -> list[str] of the outputs `rule all` builds.
DEFAULT_TARGETS = []
# The same for cast_arrays datasets (facecast.datasets.cast_arrays): only the stages that
# work from CAST's arrays (ingest, attributes from the arrays, benchmarks) append here.
ARRAY_TARGETS = []
ARRAY_DATASETS = datasets_targets.array_datasets(config)
# The same for attribute-only datasets (kinds fairface, utkface: images without
# identities): ingest, faces, attributes, the dataset report and the estimator report
# append here; no embedding or verification stage does.
ATTRIBUTE_TARGETS = []
ATTRIBUTE_DATASETS = datasets_targets.attribute_datasets(config)
# The same for BFW datasets read without their images (no embed model: the datatable's
# score columns are the models): ingest, the label attribute table, evaluate, fairness,
# demographics, slices and compare append here; no faces, embed or scorer job runs.
SCORE_TARGETS = []
SCORE_DATASETS = datasets_targets.score_datasets(config)
IMAGE_DATASETS = [
    ds
    for ds in datasets_targets.array_datasets(config, want=False)
    if ds not in SCORE_DATASETS
]
# cast_arrays datasets with their images (root): faces and embed run on the union of their
# benchmark pools (checkpoint pool_manifest), never on all N rows
POOLED_DATASETS = [ds for ds in ARRAY_DATASETS if datasets_targets.pooled(config, ds)]


# Shard indexes (facecast.io.shard_index: FACES_INDEX, EMBED_INDEX) stand for every shard of
# a stage. Gathering shard footers is cheap: on a cluster the indexes run on the submit host.
localrules:
    faces_index,
    embed_index,


def dataset_cfg(ds):
    """The config block of dataset `ds`."""
    return config["datasets"][ds]


def shards(ds):
    """Shard ids of dataset `ds`, read from the manifest checkpoint's footer (no row scan);
    a pooled cast_arrays dataset's from its pool manifest."""
    if ds in POOLED_DATASETS:
        return datasets_targets.shard_ids(checkpoints.pool_manifest.get(ds=ds).output.manifest)
    return datasets_targets.shard_ids(checkpoints.manifest.get(ds=ds).output.manifest)


def per_shard(pattern, ds, **wildcards):
    """Expand `pattern` (with {ds} and {shard}) over every shard of dataset `ds`."""
    return expand(pattern, ds=ds, shard=shards(ds), **wildcards)


def all_targets(wildcards):
    """The run's plan, plus every stage's default outputs of every dataset."""
    return [f"results/{ds}/plan.md" for ds in DATASETS] + [
        t
        for ds in DATASETS
        for fn in (
            ARRAY_TARGETS
            if ds in ARRAY_DATASETS
            else ATTRIBUTE_TARGETS
            if ds in ATTRIBUTE_DATASETS
            else SCORE_TARGETS if ds in SCORE_DATASETS else DEFAULT_TARGETS
        )
        for t in fn(ds)
    ]
