# Faces: detect (MTCNN) and align every image of a shard; one job per manifest shard.
# Logic: facecast.faces.stage.run_faces_shard. Output columns: docs/CONTRACTS.md.
from facecast.datasets.stage import dataset_root


rule faces:
    input:
        manifest="results/{ds}/manifest.parquet",
    output:
        faces="results/{ds}/faces/{shard}.parquet",
    params:
        root=lambda wc: str(dataset_root(dataset_cfg(wc.ds), f"results/{wc.ds}/dataset")),
        faces=config["faces"],
    threads: config["faces"]["threads"]
    resources:
        gpu=1 if str(config["faces"]["device"]).startswith("cuda") else 0,
    log:
        "results/{ds}/logs/faces/{shard}.log",
    benchmark:
        "results/{ds}/runtime/faces/{shard}.tsv"
    conda:
        (
            "../../envs/gpu.yaml"
            if str(config["faces"]["device"]).startswith("cuda")
            else "../../envs/cpu.yaml"
        )
    script:
        "../../scripts/faces.py"


# The faces index stands for every shard: stages that read all shards take it as input
# (one DAG edge instead of one per shard; see facecast.io.shard_index).
rule faces_index:
    input:
        shards=lambda wc: per_shard("results/{ds}/faces/{shard}.parquet", wc.ds),
    output:
        index=FACES_INDEX,
    log:
        "results/{ds}/logs/faces/index.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/shard_index.py"


DEFAULT_TARGETS.append(lambda ds: [FACES_INDEX.format(ds=ds)])
