# Templates (IJB-B / IJB-C, datasets of kind ijb): image features pooled into templates as
# insightface's ijb_11.py does, 1:1 TAR at FAR of the template pairs, ROC; 1:N with the
# release's 1:N CSVs; every model in one table.
#   -> results/{ds}/templates/{model}/, results/{ds}/templates/tar_at_far.csv, summary.html
# Logic: facecast.templates.stage; DAG side: facecast.templates.targets.
import facecast.templates.targets as templates_targets

TEMPLATES_DIR = templates_targets.TEMPLATES_DIR


rule templates_verify:
    input:
        unpack(lambda wc: templates_targets.meta_inputs(config, wc.ds)),
        embeddings=EMBED_INDEX,
    output:
        templates=f"{TEMPLATES_DIR}/templates.parquet",
        pairs=f"{TEMPLATES_DIR}/pairs.parquet",
        table=f"{TEMPLATES_DIR}/tar_at_far.parquet",
        csv=f"{TEMPLATES_DIR}/tar_at_far.csv",
        roc=report(f"{TEMPLATES_DIR}/roc.png", **templates_targets.report_kw("ROC")),
    wildcard_constraints:
        ds=templates_targets.dataset_regex(config),
    params:
        root=lambda wc: config["datasets"][wc.ds]["root"],
        variant=lambda wc: templates_targets.variant(config, wc.ds),
        cfg=templates_targets.job_config(config),
        model_cfg=lambda wc: config["embed"]["models"][wc.model],
    threads: 2
    resources:
        mem_mb=6000,
    log:
        "results/{ds}/logs/templates/{model}/verify.log",
    benchmark:
        "results/{ds}/runtime/templates/{model}/verify.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/templates_verify.py"


rule templates_identify:
    input:
        unpack(lambda wc: templates_targets.one_n_inputs(config, wc.ds, wc.model)),
        templates=f"{TEMPLATES_DIR}/templates.parquet",
    output:
        table=f"{TEMPLATES_DIR}/identification.parquet",
        csv=f"{TEMPLATES_DIR}/identification.csv",
    wildcard_constraints:
        ds=templates_targets.dataset_regex(config),
    params:
        cfg=templates_targets.job_config(config),
    threads: 2
    log:
        "results/{ds}/logs/templates/{model}/identify.log",
    benchmark:
        "results/{ds}/runtime/templates/{model}/identify.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/templates_identify.py"


rule templates_summary:
    input:
        unpack(lambda wc: templates_targets.summary_inputs(config, wc.ds)),
    output:
        csv="results/{ds}/templates/tar_at_far.csv",
        html=report(
            "results/{ds}/templates/summary.html",
            caption="../report/templates.rst",
            category="IJB templates",
            subcategory="{ds}",
            labels={"table": "all models"},
        ),
    wildcard_constraints:
        ds=templates_targets.dataset_regex(config),
    log:
        "results/{ds}/logs/templates/summary.log",
    benchmark:
        "results/{ds}/runtime/templates/summary.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/templates_summary.py"


DEFAULT_TARGETS.append(lambda ds: templates_targets.targets(config, ds))


rule templates_groups:
    input:
        unpack(lambda wc: templates_targets.meta_inputs(config, wc.ds)),
        scored=f"{TEMPLATES_DIR}/pairs.parquet",
        attributes="results/{ds}/attributes.parquet",
    output:
        groups=f"{TEMPLATES_DIR}/groups.parquet",
        rates=f"{TEMPLATES_DIR}/group_rates.parquet",
        csv=report(f"{TEMPLATES_DIR}/group_rates.csv", **templates_targets.report_kw("FMR/FNMR per group")),
    wildcard_constraints:
        ds=templates_targets.dataset_regex(config),
    params:
        root=lambda wc: config["datasets"][wc.ds]["root"],
        variant=lambda wc: templates_targets.variant(config, wc.ds),
        protected=templates_targets.protected(config),
        cfg=templates_targets.job_config(config),
    threads: 1
    log:
        "results/{ds}/logs/templates/{model}/groups.log",
    benchmark:
        "results/{ds}/runtime/templates/{model}/groups.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/templates_groups.py"
