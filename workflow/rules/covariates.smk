# Stage rules: covariates (issue 13). Verification performance over continuous covariates:
# a Bayesian model of the match and non-match score distributions given the covariates of
# both images (McCurrie et al., arXiv 2009.09583), fitted with Pyro; surfaces, thresholds
# t(x) and intervals. Outputs: results/{ds}/covariates/{model}/{protocol}/.
# Which models/protocols: facecast.covariates.targets (covariates.models/protocols).
from facecast.covariates import targets as covariates_targets

COVARIATES_DIR = "results/{ds}/covariates/{model}/{protocol}"


rule covariates:
    input:
        scores="results/{ds}/eval/{model}/{protocol}.parquet",
        attributes="results/{ds}/attributes.parquet",
    output:
        fit=f"{COVARIATES_DIR}/fit.json",
        posterior=f"{COVARIATES_DIR}/posterior.parquet",
        surface=f"{COVARIATES_DIR}/surface.parquet",
        thresholds=f"{COVARIATES_DIR}/thresholds.parquet",
        binned=f"{COVARIATES_DIR}/binned.parquet",
        population=f"{COVARIATES_DIR}/population.parquet",
        surface_csv=report(
            f"{COVARIATES_DIR}/surface.csv",
            **covariates_targets.report_kw("surface.csv", "covariates_tables"),
        ),
        thresholds_csv=report(
            f"{COVARIATES_DIR}/thresholds.csv",
            **covariates_targets.report_kw("thresholds.csv", "covariates_tables"),
        ),
        tar_png=report(
            f"{COVARIATES_DIR}/tar_vs_covariate.png",
            **covariates_targets.report_kw("tar_vs_covariate.png", "covariates_tar"),
        ),
        heatmaps_png=report(
            f"{COVARIATES_DIR}/heatmaps.png",
            **covariates_targets.report_kw("heatmaps.png", "covariates_heatmaps"),
        ),
        bands_png=report(
            f"{COVARIATES_DIR}/score_bands.png",
            **covariates_targets.report_kw("score_bands.png", "covariates_bands"),
        ),
        checks_png=report(
            f"{COVARIATES_DIR}/checks.png",
            **covariates_targets.report_kw("checks.png", "covariates_checks"),
        ),
    wildcard_constraints:
        model=r"[^/]+",
        protocol=r"[^/]+",
    params:
        covariates=config["covariates"],
        failed=config["evaluate"].get("failed", "nonmatch"),  # the one failure rule
        seed=config["seed"],
    threads: 1
    # a long job (model fits) nothing else waits for: started as soon as it can, it does
    # not run alone at the end of the run (Snakemake otherwise prefers jobs that unlock others)
    priority: 10
    log:
        "results/{ds}/logs/covariates/{model}_{protocol}.log",
    benchmark:
        "results/{ds}/runtime/covariates/{model}_{protocol}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/covariates_fit.py"


DEFAULT_TARGETS.append(lambda ds: covariates_targets.targets(config, ds, DATASETS))
