# Ingest: dataset layout -> sharded manifest (+ fixed protocols such as LFW pairs.txt).
# Logic: facecast.datasets.stage; file lists: facecast.datasets.targets.


rule synthetic_dataset:
    output:
        truth="results/{ds}/dataset/truth.parquet",
    params:
        synthetic=lambda wc: dataset_cfg(wc.ds).get("synthetic", {}),
        seed=lambda wc: dataset_cfg(wc.ds).get("synthetic", {}).get("seed", config["seed"]),
    threads: 2
    log:
        "results/{ds}/logs/synthetic_dataset.log",
    conda:
        "../../envs/cpu.yaml"
    benchmark:
        "results/{ds}/runtime/synthetic_dataset.tsv"
    script:
        "../../scripts/synthetic_dataset.py"


checkpoint manifest:
    input:
        unpack(lambda wc: datasets_targets.manifest_inputs(config, wc.ds)),
    output:
        manifest="results/{ds}/manifest.parquet",
    params:
        spec=lambda wc: dataset_cfg(wc.ds),
    log:
        "results/{ds}/logs/manifest.log",
    benchmark:
        "results/{ds}/runtime/manifest.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/manifest.py"


# cast_arrays datasets with root: the union of the benchmark pools, re-sharded; the faces
# and embed jobs of the dataset run on it (facecast.datasets.cast_manifest)
checkpoint pool_manifest:
    input:
        unpack(lambda wc: datasets_targets.pool_inputs(config, wc.ds)),
    output:
        manifest=datasets_targets.POOL_MANIFEST,
    wildcard_constraints:
        ds=name_regex(POOLED_DATASETS),
    log:
        "results/{ds}/logs/pool_manifest.log",
    benchmark:
        "results/{ds}/runtime/pool_manifest.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/pool_manifest.py"


rule lfw_protocol:
    input:
        manifest="results/{ds}/manifest.parquet",
    output:
        pairs="results/{ds}/protocols/pairs.parquet",
    params:
        pairs_file=lambda wc: dataset_cfg(wc.ds).get("pairs", ""),
    log:
        "results/{ds}/logs/lfw_protocol.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/lfw_protocol.py"


DEFAULT_TARGETS.append(lambda ds: datasets_targets.ingest_targets(config, ds))
ARRAY_TARGETS.append(lambda ds: datasets_targets.ingest_targets(config, ds))
ATTRIBUTE_TARGETS.append(lambda ds: datasets_targets.ingest_targets(config, ds))
