# Attributes: per-shard scorers (native quality/geometry, pyiqa, age_gender, fairface,
# celeba40) -> results/{ds}/attributes/{scorer}/{shard}.parquet; one streamed merge ->
# results/{ds}/attributes.parquet; optional trainer of a multi-label attribute head.
# Logic: facecast.attributes; file lists: facecast.attributes.targets.
import facecast.attributes.targets as attr_targets


rule attributes_score:
    input:
        unpack(
            lambda wc: attr_targets.score_inputs(config, wc.ds, wc.scorer, wc.shard)
        ),
    output:
        "results/{ds}/attributes/{scorer}/{shard}.parquet",
    wildcard_constraints:
        scorer=attr_targets.SCORER_REGEX,
    params:
        cfg=config["attributes"],
        weights=lambda wc: attr_targets.head_weights(config, wc.ds, wc.scorer),
    threads: 2
    resources:
        gpu=1 if attr_targets.uses_gpu(config) else 0,
    log:
        "results/{ds}/logs/attributes/{scorer}/{shard}.log",
    benchmark:
        "results/{ds}/runtime/attributes/{scorer}/{shard}.tsv"
    conda:
        "../../envs/gpu.yaml" if attr_targets.uses_gpu(config) else "../../envs/cpu.yaml"
    script:
        "../../scripts/attributes_score.py"


rule attributes_merge:
    wildcard_constraints:
        ds=name_regex(IMAGE_DATASETS),
    input:
        unpack(lambda wc: attr_targets.merge_inputs(config, wc.ds, per_shard)),
    output:
        "results/{ds}/attributes.parquet",
    params:
        scorers=attr_targets.active_scorers(config["attributes"]),
    log:
        "results/{ds}/logs/attributes_merge.log",
    benchmark:
        "results/{ds}/runtime/attributes_merge.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/attributes_merge.py"


rule attribute_model:
    input:
        manifest="results/{ds}/manifest.parquet",
        faces=FACES_INDEX,
    output:
        checkpoint="results/{ds}/attribute_model/checkpoint.pt",
        evaluation="results/{ds}/attribute_model/evaluation.parquet",
        report="results/{ds}/attribute_model/evaluation.md",
    params:
        cfg=config["attributes"]["trainer"],
        device=config["attributes"]["device"],
    threads: 2
    resources:
        gpu=1 if attr_targets.uses_gpu(config) else 0,
    log:
        "results/{ds}/logs/attribute_model.log",
    benchmark:
        "results/{ds}/runtime/attribute_model.tsv"
    conda:
        "../../envs/gpu.yaml" if attr_targets.uses_gpu(config) else "../../envs/cpu.yaml"
    script:
        "../../scripts/train_attributes.py"


# cast_arrays datasets: CAST's precomputed attributes, as they are (nothing is scored)
rule cast_attributes:
    wildcard_constraints:
        ds=name_regex(ARRAY_DATASETS),
    input:
        unpack(lambda wc: datasets_targets.cast_array_inputs(config, wc.ds)),
        manifest="results/{ds}/manifest.parquet",
    output:
        "results/{ds}/attributes.parquet",
    log:
        "results/{ds}/logs/cast_attributes.log",
    benchmark:
        "results/{ds}/runtime/cast_attributes.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/cast_attributes.py"


DEFAULT_TARGETS.append(lambda ds: attr_targets.default_targets(config, ds))
ARRAY_TARGETS.append(lambda ds: [f"results/{ds}/attributes.parquet"])
