# Stage rules: fairness (issue 6). Demographic bias of every configured model on every
# configured protocol: the ChaLearn FairFace 2020 metric (Bias+/Bias-), fairness at global
# thresholds (FMR/FNMR per group, NIST ratios, FDR, GARBE, inequity rate), an
# identity-clustered bootstrap, CAST probabilistic accuracy, hardest pairs; plus a
# leaderboard per protocol and an import of scores in the challenge CSV format.
# Outputs: results/{ds}/fairness/{model}/{protocol}/ and results/{ds}/fairness/leaderboard/.
# Which models/protocols: facecast.fairness.targets (fairness.models/protocols, else evaluate's).
from facecast.fairness import targets as fairness_targets

FAIRNESS_FILES = [
    "pairs.parquet", "summary.csv", "cells.parquet", "cells.csv", "subsets.parquet",
    "subsets.csv", "rates.parquet", "rates.csv", "bootstrap.parquet", "uncertainty.parquet",
    "soft_accuracy.parquet", "soft_accuracy.csv", "hard_pairs.parquet", "hard_pairs.csv",
    "predictions.csv", "pairs.csv", "estimator_trust.parquet", "estimator_trust.csv",
]
FAIRNESS_DIR = "results/{ds}/fairness/{model}/{protocol}"


rule fairness_import:
    input:
        predictions=lambda wc: fairness_targets.imports(config)[wc.model]["predictions"],
        pairs=lambda wc: fairness_targets.imports(config)[wc.model]["pairs"],
        attributes="results/{ds}/attributes.parquet",
    output:
        scores="results/{ds}/fairness/imported/{model}/{protocol}.parquet",
    wildcard_constraints:
        model=r"[^/]+",  # imported systems are not embed models (embed.smk constrains those)
        protocol=r"[^/]+",
    params:
        label_column=lambda wc: fairness_targets.imports(config)[wc.model]["label_column"],
    log:
        "results/{ds}/logs/fairness/import_{model}_{protocol}.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/fairness_import.py"


rule fairness:
    input:
        unpack(
            lambda wc: fairness_targets.rule_inputs(config, wc.ds, wc.model, wc.protocol)
        ),
    output:
        [f"{FAIRNESS_DIR}/{name}" for name in FAIRNESS_FILES],
        summary="results/{ds}/fairness/{model}/{protocol}/summary.parquet",
        groups="results/{ds}/fairness/{model}/{protocol}/groups.parquet",
        thresholds="results/{ds}/fairness/{model}/{protocol}/thresholds.parquet",
        report="results/{ds}/fairness/{model}/{protocol}/report.md",
        report_html=report(
            f"{FAIRNESS_DIR}/report.html",
            **fairness_targets.report_kw("report.html", "fairness_tables"),
        ),
        groups_csv=report(
            f"{FAIRNESS_DIR}/groups.csv",
            **fairness_targets.report_kw("groups.csv", "fairness_tables"),
        ),
        thresholds_csv=report(
            f"{FAIRNESS_DIR}/thresholds.csv",
            **fairness_targets.report_kw("thresholds.csv", "fairness_tables"),
        ),
        uncertainty_csv=report(
            f"{FAIRNESS_DIR}/uncertainty.csv",
            **fairness_targets.report_kw("uncertainty.csv", "fairness_tables"),
        ),
        rates_png=report(
            f"{FAIRNESS_DIR}/rates_vs_threshold.png",
            **fairness_targets.report_kw("rates_vs_threshold.png", "fairness_plots"),
        ),
        fdr_png=report(
            f"{FAIRNESS_DIR}/fdr_vs_fmr.png",
            **fairness_targets.report_kw("fdr_vs_fmr.png", "fairness_plots"),
        ),
        hard_png=report(
            f"{FAIRNESS_DIR}/hard_pairs.png",
            **fairness_targets.report_kw("hard_pairs.png", "fairness_plots"),
        ),
    wildcard_constraints:
        model=r"(?!leaderboard$|imported$)[^/]+",
        protocol=r"[^/]+",
    params:
        fairness=config["fairness"],
        failed=config["evaluate"].get("failed", "nonmatch"),  # the one failure rule
        seed=config["seed"],
        estimators=config.get("estimators", {}),
        # a BFW dataset read without images: the hard-pairs grid reads no image either
        read_images=lambda wc: wc.ds not in SCORE_DATASETS,
    threads: 1
    log:
        "results/{ds}/logs/fairness/{model}_{protocol}.log",
    benchmark:
        "results/{ds}/runtime/fairness/{model}_{protocol}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/fairness.py"


rule fairness_leaderboard:
    input:
        summaries=lambda wc: expand(
            "results/{ds}/fairness/{model}/{protocol}/summary.parquet", ds=wc.ds,
            model=fairness_targets.dataset_models(config, wc.ds, wc.protocol),
            protocol=wc.protocol),
        groups=lambda wc: expand(
            "results/{ds}/fairness/{model}/{protocol}/groups.parquet", ds=wc.ds,
            model=fairness_targets.dataset_models(config, wc.ds, wc.protocol),
            protocol=wc.protocol),
    output:
        "results/{ds}/fairness/leaderboard/{protocol}/leaderboard.parquet",
        report(
            "results/{ds}/fairness/leaderboard/{protocol}/leaderboard.csv",
            caption="../report/fairness_tables.rst", category="Fairness",
            subcategory="{ds} / {protocol}", labels={"model": "all", "file": "leaderboard.csv"},
        ),
        "results/{ds}/fairness/leaderboard/{protocol}/most_discriminated.parquet",
        "results/{ds}/fairness/leaderboard/{protocol}/most_discriminated.csv",
        markdown="results/{ds}/fairness/leaderboard/{protocol}/leaderboard.md",
        html=report(
            "results/{ds}/fairness/leaderboard/{protocol}/leaderboard.html",
            caption="../report/fairness_tables.rst", category="Fairness",
            subcategory="{ds} / {protocol}", labels={"model": "all", "file": "leaderboard"},
        ),
    wildcard_constraints:
        protocol=r"[^/]+",
    log:
        "results/{ds}/logs/fairness/leaderboard_{protocol}.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/fairness_leaderboard.py"


DEFAULT_TARGETS.append(lambda ds: fairness_targets.targets(config, ds, DATASETS))
