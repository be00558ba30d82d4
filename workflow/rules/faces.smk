# Faces: detect (MTCNN) and align every image of a shard; one job per manifest shard.
# Logic: facecast.faces.stage.run_faces_shard; DAG side: facecast.faces.targets. Output
# columns: docs/CONTRACTS.md.
import facecast.faces.targets as faces_targets


rule faces:
    wildcard_constraints:
        ds=name_regex(IMAGE_DATASETS + POOLED_DATASETS),
    input:
        manifest=lambda wc: datasets_targets.faces_manifest(config, wc.ds),
    output:
        faces=faces_targets.FACES_SHARD,
    params:
        root=lambda wc: faces_targets.image_root(config, wc.ds),
        faces=config["faces"],
    threads: config["faces"]["threads"]
    resources:
        gpu=int(faces_targets.uses_gpu(config)),
    log:
        "results/{ds}/logs/faces/{shard}.log",
    benchmark:
        "results/{ds}/runtime/faces/{shard}.tsv"
    conda:
        "../../envs/gpu.yaml" if faces_targets.uses_gpu(config) else "../../envs/cpu.yaml"
    script:
        "../../scripts/faces.py"


# The faces index stands for every shard: stages that read all shards take it as input
# (one DAG edge instead of one per shard; see facecast.io.shard_index).
rule faces_index:
    input:
        shards=lambda wc: per_shard(faces_targets.FACES_SHARD, wc.ds),
    output:
        index=FACES_INDEX,
    log:
        "results/{ds}/logs/faces/index.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/shard_index.py"


DEFAULT_TARGETS.append(faces_targets.default_targets)
ATTRIBUTE_TARGETS.append(faces_targets.default_targets)
