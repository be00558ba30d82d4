# RFW and BFW (issue 41): the fairness benchmarks researchers hold, from one dataset block.
# - set_protocol: an RFW set's pairs (or every set's, `rfw`), BFW's datatable (`bfw`,
#   with its score columns) -> results/{ds}/protocols/{proto}.parquet
# - evaluate_scores: a BFW score column as a model (no image, no embedding) -> the files of
#   evaluate_benchmark, so every later stage reads it like an embed model's scores
# - manifest_attributes: the attribute table of a BFW dataset read without its images
# - rfw_table: accuracy per set, std across sets, SER -> results/{ds}/eval/rfw.*
# - bfw_table: BFW's per-subgroup thresholds -> results/{ds}/demographics/bfw_table.*
# Logic: facecast.evaluate.stage, facecast.fairness.stage, facecast.attributes.stage;
# file lists: facecast.evaluate.targets, facecast.fairness.targets (eval_targets and
# fairness_targets are imported by evaluate.smk and fairness.smk).


rule set_protocol:
    input:
        manifest="results/{ds}/manifest.parquet",
    output:
        pairs="results/{ds}/protocols/{proto}.parquet",
    wildcard_constraints:
        ds=eval_targets.set_dataset_regex(config),
        proto=eval_targets.set_protocol_regex(config),
    log:
        "results/{ds}/logs/evaluate/set_protocol_{proto}.log",
    benchmark:
        "results/{ds}/runtime/evaluate/set_protocol_{proto}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/set_protocol.py"


ruleorder: set_protocol > import_protocol


rule evaluate_scores:
    input:
        protocol="results/{ds}/protocols/{bench}.parquet",
    output:
        scores="results/{ds}/eval/{model}/{bench}.parquet",
        metrics="results/{ds}/eval/{model}/{bench}/metrics.parquet",
        roc="results/{ds}/eval/{model}/{bench}/roc.parquet",
        roc_png=report(
            "results/{ds}/eval/{model}/{bench}/roc.png",
            caption="../report/roc_det.rst",
            category="Evaluation",
            subcategory="{ds} / {bench}",
            labels={"model": "{model}", "plot": "ROC"},
        ),
        det_png=report(
            "results/{ds}/eval/{model}/{bench}/det.png",
            caption="../report/roc_det.rst",
            category="Evaluation",
            subcategory="{ds} / {bench}",
            labels={"model": "{model}", "plot": "DET"},
        ),
    params:
        cfg=eval_targets.job_config(config["evaluate"], config["seed"]),
        out_dir=lambda wc: f"results/{wc.ds}/eval/{wc.model}/{wc.bench}",
    wildcard_constraints:
        model=eval_targets.score_model_regex(config),
        bench="bfw",
    log:
        "results/{ds}/logs/evaluate/{model}/{bench}.log",
    benchmark:
        "results/{ds}/runtime/evaluate/{model}/{bench}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/evaluate_scores.py"


rule manifest_attributes:
    input:
        manifest="results/{ds}/manifest.parquet",
    output:
        "results/{ds}/attributes.parquet",
    wildcard_constraints:
        ds=name_regex(SCORE_DATASETS),
    log:
        "results/{ds}/logs/manifest_attributes.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/manifest_attributes.py"


rule rfw_table:
    input:
        metrics=lambda wc: [it["path"] for it in eval_targets.rfw_items(config, wc.ds)],
    output:
        table="results/{ds}/eval/rfw.parquet",
        markdown=report(
            "results/{ds}/eval/rfw.md",
            caption="../report/rfw_table.rst",
            category="Evaluation",
            subcategory="{ds}",
            labels={"table": "RFW (Markdown)"},
        ),
        html=report(
            "results/{ds}/eval/rfw.html",
            caption="../report/rfw_table.rst",
            category="Evaluation",
            subcategory="{ds}",
            labels={"table": "RFW"},
        ),
    params:
        entries=lambda wc: eval_targets.rfw_items(config, wc.ds),
        models=lambda wc: list(
            dict.fromkeys(it["model"] for it in eval_targets.rfw_items(config, wc.ds))
        ),
        sets=lambda wc: eval_targets.rfw_sets_of(config, wc.ds),
    log:
        "results/{ds}/logs/evaluate/rfw_table.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/rfw_table.py"


rule bfw_table:
    input:
        tables=lambda wc: list(fairness_targets.bfw_table_paths(config, wc.ds).values()),
    output:
        table="results/{ds}/demographics/bfw_table.parquet",
        markdown=report(
            "results/{ds}/demographics/bfw_table.md",
            caption="../report/bfw_table.rst",
            category="Demographics",
            subcategory="{ds} / bfw",
            labels={"model": "all", "file": "BFW thresholds (Markdown)"},
        ),
        html=report(
            "results/{ds}/demographics/bfw_table.html",
            caption="../report/bfw_table.rst",
            category="Demographics",
            subcategory="{ds} / bfw",
            labels={"model": "all", "file": "BFW thresholds"},
        ),
    params:
        models=lambda wc: list(fairness_targets.bfw_table_paths(config, wc.ds)),
    log:
        "results/{ds}/logs/demographics/bfw_table.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/bfw_table.py"


DEFAULT_TARGETS.append(lambda ds: eval_targets.rfw_targets(config, ds))
DEFAULT_TARGETS.append(lambda ds: fairness_targets.bfw_table_targets(config, ds))
# a BFW dataset read without its images: the stages that read scored pairs only
SCORE_TARGETS.append(lambda ds: datasets_targets.ingest_targets(config, ds))
SCORE_TARGETS.append(lambda ds: [f"results/{ds}/attributes.parquet"])
SCORE_TARGETS.append(lambda ds: eval_targets.evaluate_targets(config, ds))
SCORE_TARGETS.append(lambda ds: fairness_targets.targets(config, ds, DATASETS))
SCORE_TARGETS.append(lambda ds: fairness_targets.demographics_targets(config, ds))
SCORE_TARGETS.append(lambda ds: fairness_targets.bfw_table_targets(config, ds))
SCORE_TARGETS.append(lambda ds: slices_targets.targets(config, ds))
SCORE_TARGETS.append(lambda ds: compare_targets.targets(config, ds))
