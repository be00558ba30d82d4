# Quality vs error and demographics beyond one threshold (issue 15):
#  - quality_edc: EDC of every quality measure (ISO/IEC 29794-1:2024) per model and protocol
#    -> results/{ds}/quality/{model}/{protocol}/
#  - quality_bias: quality per protected group and rejection by group (issue 36), same folder
#  - demographics: cross-group impostor FMR matrices (NISTIR 8280), per-group thresholds
#    (BFW), bootstrap bands on ROC/DET and per-group rate curves
#    -> results/{ds}/demographics/{model}/{protocol}/
#  - identification: 1:N per group (ISO/IEC 19795-1) on a benchmark pool
#    -> results/{ds}/identification/{model}/
# Which models/protocols (config sections quality, demographics, identification; each has
# `enabled`): facecast.quality.targets, facecast.fairness.targets (demographics_*) and
# facecast.identification.targets. Logic: facecast.quality.stage, facecast.fairness.stage
# (run_demographics), facecast.identification.stage.
import facecast.fairness.targets as fairness_targets
import facecast.identification.targets as ident_targets
import facecast.quality.targets as quality_targets

QUALITY_DIR = quality_targets.QUALITY_DIR
DEMO_DIR = fairness_targets.DEMOGRAPHICS_DIR
IDENT_DIR = ident_targets.IDENTIFICATION_DIR


rule quality_edc:
    input:
        scores="results/{ds}/eval/{model}/{protocol}.parquet",
        attributes="results/{ds}/attributes.parquet",
    output:
        edc=f"{QUALITY_DIR}/edc.parquet",
        ranking_parquet=f"{QUALITY_DIR}/ranking.parquet",
        ranking=f"{QUALITY_DIR}/ranking.csv",
        bands=f"{QUALITY_DIR}/bands.parquet",
        threshold=f"{QUALITY_DIR}/threshold.parquet",
        html=report(f"{QUALITY_DIR}/ranking.html", **quality_targets.report_kw("ranking")),
        fnm_png=report(f"{QUALITY_DIR}/edc_fnm.png", **quality_targets.report_kw("FNM-EDC")),
        fm_png=report(f"{QUALITY_DIR}/edc_fm.png", **quality_targets.report_kw("FM-EDC")),
    wildcard_constraints:
        model=r"[^/]+",
        protocol=r"[^/]+",
    params:
        quality=config.get("quality", {}),
        fairness=fairness_targets.fairness_groups(config),
        seed=config["seed"],
    log:
        "results/{ds}/logs/quality/edc_{model}_{protocol}.log",
    benchmark:
        "results/{ds}/runtime/quality/edc_{model}_{protocol}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/quality_edc.py"


rule quality_bias:
    input:
        scores="results/{ds}/eval/{model}/{protocol}.parquet",
        attributes="results/{ds}/attributes.parquet",
    output:
        bias=f"{QUALITY_DIR}/bias.parquet",
        bias_csv=f"{QUALITY_DIR}/bias.csv",
        rejection=f"{QUALITY_DIR}/rejection.parquet",
        rejection_csv=f"{QUALITY_DIR}/rejection.csv",
        html=report(f"{QUALITY_DIR}/bias.html", **quality_targets.report_kw("quality bias")),
        png=report(f"{QUALITY_DIR}/bias.png", **quality_targets.report_kw("bias by group")),
    wildcard_constraints:
        model=r"[^/]+",
        protocol=r"[^/]+",
    params:
        quality=config.get("quality", {}),
        fairness=fairness_targets.fairness_groups(config),
        seed=config["seed"],
    log:
        "results/{ds}/logs/quality/bias_{model}_{protocol}.log",
    benchmark:
        "results/{ds}/runtime/quality/bias_{model}_{protocol}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/quality_bias.py"


rule demographics:
    input:
        scores="results/{ds}/eval/{model}/{protocol}.parquet",
        attributes="results/{ds}/attributes.parquet",
    output:
        thresholds=f"{DEMO_DIR}/thresholds.parquet",
        cross=f"{DEMO_DIR}/cross_fmr.parquet",
        cross_csv=f"{DEMO_DIR}/cross_fmr.csv",
        group_thresholds=f"{DEMO_DIR}/group_thresholds.csv",
        group_thresholds_parquet=f"{DEMO_DIR}/group_thresholds.parquet",
        roc=f"{DEMO_DIR}/roc_bands.parquet",
        roc_csv=f"{DEMO_DIR}/roc_bands.csv",
        rates=f"{DEMO_DIR}/rate_bands.parquet",
        html=report(
            f"{DEMO_DIR}/tables.html",
            **fairness_targets.demographics_report_kw("demographics", "tables"),
        ),
        cross_png=report(
            f"{DEMO_DIR}/cross_fmr.png",
            **fairness_targets.demographics_report_kw("demographics", "cross-group FMR"),
        ),
        deviation_png=report(
            f"{DEMO_DIR}/group_thresholds.png",
            **fairness_targets.demographics_report_kw("demographics", "per-group thresholds"),
        ),
        roc_png=report(
            f"{DEMO_DIR}/roc_bands.png",
            **fairness_targets.demographics_report_kw("bands", "ROC/DET bands"),
        ),
        rates_png=report(
            f"{DEMO_DIR}/rate_bands.png",
            **fairness_targets.demographics_report_kw("bands", "rate bands"),
        ),
    wildcard_constraints:
        model=r"[^/]+",
        protocol=r"[^/]+",
    params:
        demographics=lambda wc: fairness_targets.demographics_config(config, wc.ds),
        fairness=fairness_targets.fairness_groups(config),
        seed=config["seed"],
    log:
        "results/{ds}/logs/demographics/{model}_{protocol}.log",
    benchmark:
        "results/{ds}/runtime/demographics/{model}_{protocol}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/demographics.py"


rule identification:
    input:
        pool=lambda wc: ident_targets.pool_subset(config, wc.ds),
        embeddings=EMBED_INDEX,
        attributes="results/{ds}/attributes.parquet",
    output:
        protocol=f"{IDENT_DIR}/protocol.parquet",
        searches=f"{IDENT_DIR}/searches.parquet",
        cmc=f"{IDENT_DIR}/cmc.csv",
        cmc_parquet=f"{IDENT_DIR}/cmc.parquet",
        fnir=f"{IDENT_DIR}/fnir.parquet",
        fnir_csv=f"{IDENT_DIR}/fnir.csv",
        det=f"{IDENT_DIR}/det.parquet",
        html=report(f"{IDENT_DIR}/tables.html", **ident_targets.report_kw("tables")),
        cmc_png=report(f"{IDENT_DIR}/cmc.png", **ident_targets.report_kw("CMC")),
        det_png=report(f"{IDENT_DIR}/det.png", **ident_targets.report_kw("DET")),
    wildcard_constraints:
        model=r"[^/]+",
    params:
        identification=config.get("identification", {}),
        fairness=fairness_targets.fairness_groups(config),
        failed=config["evaluate"].get("failed", "nonmatch"),  # the one failure rule
        seed=config["seed"],
    resources:
        gpu=int(ident_targets.uses_gpu(config)),
    log:
        "results/{ds}/logs/identification/{model}.log",
    benchmark:
        "results/{ds}/runtime/identification/{model}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/identification.py"


DEFAULT_TARGETS.append(
    lambda ds: [
        *quality_targets.targets(config, ds),
        *fairness_targets.demographics_targets(config, ds),
        *ident_targets.targets(config, ds),
    ]
)
