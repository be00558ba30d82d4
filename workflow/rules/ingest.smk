# Ingest: dataset layout -> sharded manifest (+ fixed protocols such as LFW pairs.txt).


rule synthetic_dataset:
    output:
        truth="results/{ds}/dataset/truth.parquet",
    params:
        synthetic=lambda wc: dataset_cfg(wc.ds).get("synthetic", {}),
        seed=lambda wc: dataset_cfg(wc.ds).get("synthetic", {}).get("seed", config["seed"]),
    threads: 2
    log:
        "results/{ds}/logs/synthetic_dataset.log",
    benchmark:
        "results/{ds}/runtime/synthetic_dataset.tsv"
    script:
        "../../scripts/synthetic_dataset.py"


def manifest_inputs(wildcards):
    if dataset_cfg(wildcards.ds)["kind"] == "synthetic":
        return {"truth": f"results/{wildcards.ds}/dataset/truth.parquet"}
    return {}


checkpoint manifest:
    input:
        unpack(manifest_inputs),
    output:
        manifest="results/{ds}/manifest.parquet",
    params:
        spec=lambda wc: dataset_cfg(wc.ds),
    log:
        "results/{ds}/logs/manifest.log",
    script:
        "../../scripts/manifest.py"


rule lfw_protocol:
    input:
        manifest="results/{ds}/manifest.parquet",
    output:
        pairs="results/{ds}/protocols/pairs.parquet",
    params:
        pairs_file=lambda wc: dataset_cfg(wc.ds).get("pairs", ""),
    log:
        "results/{ds}/logs/lfw_protocol.log",
    script:
        "../../scripts/lfw_protocol.py"


def _ingest_targets(ds):
    out = [f"results/{ds}/manifest.parquet"]
    if dataset_cfg(ds).get("pairs"):
        out.append(f"results/{ds}/protocols/pairs.parquet")
    return out


DEFAULT_TARGETS.append(_ingest_targets)
