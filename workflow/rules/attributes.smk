# Attributes: per-shard scorers (native quality/geometry, ofiq, pyiqa, age_gender, fairface,
# celeba40) -> results/{ds}/attributes/{scorer}/{shard}.parquet; the ofiq scorer's dlib fit
# as the landmark shard the features read (rule attributes_ofiq); one streamed merge ->
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
        scorer=attr_targets.score_regex(config),
    params:
        cfg=config["attributes"],  # (the heads' weight paths: inputs or in cfg)
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


# facecast's ofiq scorer when the labels stage's features are on: one dlib 68-point fit per
# shard serves both, written as the landmark shard too (facecast.attributes.landmarks68),
# so no features_shard job fits the same points again (issue 40.7: 4,200 jobs fewer at 42M)
if attr_targets.ofiq_writes_landmarks(config):

    rule attributes_ofiq:
        input:
            faces="results/{ds}/faces/{shard}.parquet",
        output:
            scores="results/{ds}/attributes/ofiq/{shard}.parquet",
            landmarks=attr_targets.LANDMARKS,
        params:
            scorer="ofiq",
            cfg=config["attributes"],
        threads: 2
        log:
            "results/{ds}/logs/attributes/ofiq/{shard}.log",
        benchmark:
            "results/{ds}/runtime/attributes/ofiq/{shard}.tsv"
        conda:
            "../../envs/cpu.yaml"
        script:
            "../../scripts/attributes_score.py"


# The real OFIQ (attributes.ofiq.models_dir set): the shard's images as a folder ofiqpy
# reads, then ofiqpy in its own environment (numpy < 2, OpenCV 4.5.5, onnxruntime 1.18);
# attributes_score merges its CSV (facecast.attributes.ofiq_real).
rule attributes_ofiq_inputs:
    wildcard_constraints:
        ds=name_regex(IMAGE_DATASETS),
    input:
        manifest=lambda wc: datasets_targets.faces_manifest(config, wc.ds),
    output:
        folder=directory(attr_targets.OFIQ_INPUTS),
        map=attr_targets.OFIQ_MAP,
    params:
        root=lambda wc: faces_targets.image_root(config, wc.ds),
    log:
        "results/{ds}/logs/attributes/ofiq/{shard}.inputs.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/ofiq_inputs.py"


rule attributes_ofiq_run:
    input:
        folder=attr_targets.OFIQ_INPUTS,
    output:
        attr_targets.OFIQ_CSV,
    params:
        models_dir=attr_targets.ofiq_models_dir(config),
    threads: 1
    log:
        "results/{ds}/logs/attributes/ofiq/{shard}.run.log",
    benchmark:
        "results/{ds}/runtime/attributes/ofiq/{shard}.run.tsv"
    conda:
        "../../envs/ofiq.yaml"
    shell:
        "(if [ -z \"$(ls -A {input.folder})\" ]; then"
        " python -c 'from ofiqpy.output import header; print(header())' > {output};"
        " else OFIQPY_OFIQ_DATA={params.models_dir:q} ofiqpy -i {input.folder} -o {output};"
        " fi) > {log} 2>&1"


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
ATTRIBUTE_TARGETS.append(lambda ds: [f"results/{ds}/attributes.parquet"])
