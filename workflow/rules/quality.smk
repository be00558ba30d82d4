# Quality vs error and demographics beyond one threshold (issue 15):
#  - quality_edc: EDC of every quality measure (ISO/IEC 29794-1:2024) per model and protocol
#    -> results/{ds}/quality/{model}/{protocol}/
#  - demographics: cross-group impostor FMR matrices (NISTIR 8280), per-group thresholds
#    (BFW), bootstrap bands on ROC/DET and per-group rate curves
#    -> results/{ds}/demographics/{model}/{protocol}/
#  - identification: 1:N per group (ISO/IEC 19795-1) on a benchmark pool
#    -> results/{ds}/identification/{model}/
# Which models/protocols: facecast.quality.config (config sections quality, demographics,
# identification; each has `enabled`).
import facecast.quality.config as quality_cfg

QUALITY_DIR = "results/{ds}/quality/{model}/{protocol}"
DEMO_DIR = "results/{ds}/demographics/{model}/{protocol}"
IDENT_DIR = "results/{ds}/identification/{model}"


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
        html=report(f"{QUALITY_DIR}/ranking.html",
                    **quality_cfg.report_kw("quality_edc", "Quality (EDC)", "{ds} / {protocol}",
                                 "ranking")),
        fnm_png=report(f"{QUALITY_DIR}/edc_fnm.png",
                       **quality_cfg.report_kw("quality_edc", "Quality (EDC)", "{ds} / {protocol}",
                                    "FNM-EDC")),
        fm_png=report(f"{QUALITY_DIR}/edc_fm.png",
                      **quality_cfg.report_kw("quality_edc", "Quality (EDC)", "{ds} / {protocol}",
                                   "FM-EDC")),
    wildcard_constraints:
        model=r"[^/]+",
        protocol=r"[^/]+",
    params:
        quality=config.get("quality", {}),
        fairness=quality_cfg.fairness_groups(config),
        seed=config["seed"],
    log:
        "results/{ds}/logs/quality/edc_{model}_{protocol}.log",
    benchmark:
        "results/{ds}/runtime/quality/edc_{model}_{protocol}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/quality_edc.py"


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
        html=report(f"{DEMO_DIR}/tables.html",
                    **quality_cfg.report_kw("demographics", "Demographics", "{ds} / {protocol}",
                                 "tables")),
        cross_png=report(f"{DEMO_DIR}/cross_fmr.png",
                         **quality_cfg.report_kw("demographics", "Demographics", "{ds} / {protocol}",
                                      "cross-group FMR")),
        deviation_png=report(f"{DEMO_DIR}/group_thresholds.png",
                             **quality_cfg.report_kw("demographics", "Demographics",
                                          "{ds} / {protocol}", "per-group thresholds")),
        roc_png=report(f"{DEMO_DIR}/roc_bands.png",
                       **quality_cfg.report_kw("bands", "Demographics", "{ds} / {protocol}",
                                    "ROC/DET bands")),
        rates_png=report(f"{DEMO_DIR}/rate_bands.png",
                         **quality_cfg.report_kw("bands", "Demographics", "{ds} / {protocol}",
                                      "rate bands")),
    wildcard_constraints:
        model=r"[^/]+",
        protocol=r"[^/]+",
    params:
        demographics=config.get("demographics", {}),
        fairness=quality_cfg.fairness_groups(config),
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
        pool=lambda wc: f"results/{wc.ds}/benchmarks/"
        f"{quality_cfg.identification_pool(config)}/subset.parquet",
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
        html=report(f"{IDENT_DIR}/tables.html",
                    **quality_cfg.report_kw("identification", "Identification (1:N)", "{ds}",
                                 "tables")),
        cmc_png=report(f"{IDENT_DIR}/cmc.png",
                       **quality_cfg.report_kw("identification", "Identification (1:N)", "{ds}", "CMC")),
        det_png=report(f"{IDENT_DIR}/det.png",
                       **quality_cfg.report_kw("identification", "Identification (1:N)", "{ds}", "DET")),
    wildcard_constraints:
        model=r"[^/]+",
    params:
        identification=config.get("identification", {}),
        fairness=quality_cfg.fairness_groups(config),
        seed=config["seed"],
    resources:
        gpu=int(str(config.get("identification", {}).get("device", "auto")).startswith("cuda")),
    log:
        "results/{ds}/logs/identification/{model}.log",
    benchmark:
        "results/{ds}/runtime/identification/{model}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/identification.py"


DEFAULT_TARGETS.append(lambda ds: quality_cfg.targets(config, ds))
