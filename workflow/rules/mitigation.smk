# Bias mitigation measured, not claimed (issue 35): score normalisation (Z/T/ZT/S/adaptive
# S-norm), Fair Score Normalization, FairCal and its oracle, per-group thresholds and
# score fusion, each learned on calibration identities disjoint from the evaluated pairs,
# side by side with identity-clustered intervals and paired tests against raw
#   -> results/{ds}/mitigation/{model}/{protocol}/ (each method's scores in
#      <method>/pairs.parquet: slices and compare read `<model>+<method>` from there)
# - mitigation_scores: the same for a BFW datatable's score column (no image, no embedding):
#   the score-level methods run, the embedding methods are table rows that say n/a
# Which models/protocols/methods/inputs: facecast.mitigation.targets.
# Logic: facecast.mitigation.stage.run_mitigation.
import facecast.mitigation.targets as mitigation_targets

MITIGATION_DIR = mitigation_targets.MITIGATION_DIR
# the named outputs of rules mitigation and mitigation_scores (they differ in methods)
MITIGATION_OUTPUTS = dict(
    table=f"{MITIGATION_DIR}/table.parquet",
    table_csv=f"{MITIGATION_DIR}/table.csv",
    differences=f"{MITIGATION_DIR}/differences.parquet",
    differences_csv=f"{MITIGATION_DIR}/differences.csv",
    calibration=f"{MITIGATION_DIR}/calibration.parquet",
    split=f"{MITIGATION_DIR}/split.parquet",
    learned=f"{MITIGATION_DIR}/learned.json",
    fits=f"{MITIGATION_DIR}/fits.parquet",
    fits_csv=f"{MITIGATION_DIR}/fits.csv",
    faircal=f"{MITIGATION_DIR}/faircal.parquet",
    faircal_csv=f"{MITIGATION_DIR}/faircal.csv",
    table_md=f"{MITIGATION_DIR}/table.md",
    html=report(f"{MITIGATION_DIR}/report.html", **mitigation_targets.report_kw("report")),
    png=report(
        f"{MITIGATION_DIR}/pareto.png", **mitigation_targets.report_kw("accuracy vs bias")
    ),
)


rule mitigation:
    input:
        unpack(
            lambda wc: mitigation_targets.rule_inputs(config, wc.ds, wc.model, wc.protocol)
        ),
    output:
        [f"{MITIGATION_DIR}/{name}" for name in mitigation_targets.method_files(config)],
        **MITIGATION_OUTPUTS,
    wildcard_constraints:
        model=mitigation_targets.embed_model_regex(config),
        protocol=r"[^/]+",
    params:
        mitigation=config.get("mitigation", {}),
        fairness=mitigation_targets.fairness_section(config),
        methods=lambda wc: mitigation_targets.run_methods(config, wc.model),
        unavailable=lambda wc: mitigation_targets.unavailable(config, wc.model),
        partners=lambda wc: mitigation_targets.partners(config, wc.model, wc.ds),
        source=lambda wc: mitigation_targets.calibration_source(config, wc.ds, wc.protocol),
        fars=config["evaluate"]["fars"],
        seed=config["seed"],
        failed=mitigation_targets.failure_rule(config),
    threads: 2
    log:
        "results/{ds}/logs/mitigation/{model}_{protocol}.log",
    benchmark:
        "results/{ds}/runtime/mitigation/{model}_{protocol}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/mitigation.py"


use rule mitigation as mitigation_scores with:
    output:
        [
            f"{MITIGATION_DIR}/{name}"
            for name in mitigation_targets.method_files(config, score=True)
        ],
        **MITIGATION_OUTPUTS,
    wildcard_constraints:
        model=eval_targets.score_model_regex(config),  # BFW's score columns
        protocol=r"[^/]+",


DEFAULT_TARGETS.append(lambda ds: mitigation_targets.targets(config, ds))
# a BFW dataset read without its images: its score columns' tables
SCORE_TARGETS.append(lambda ds: mitigation_targets.targets(config, ds))
