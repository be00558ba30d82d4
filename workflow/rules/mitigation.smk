# Bias mitigation measured, not claimed (issue 35): score normalisation (Z/T/ZT/S/adaptive
# S-norm), Fair Score Normalization, FairCal and its oracle, per-group thresholds and
# score fusion, each learned on calibration identities disjoint from the evaluated pairs,
# side by side with identity-clustered intervals and paired tests against raw
#   -> results/{ds}/mitigation/{model}/{protocol}/ (each method's scores in
#      <method>/pairs.parquet: slices and compare read `<model>+<method>` from there)
# Which models/protocols/methods/inputs: facecast.mitigation.targets.
# Logic: facecast.mitigation.stage.run_mitigation.
import facecast.mitigation.targets as mitigation_targets

MITIGATION_DIR = mitigation_targets.MITIGATION_DIR


rule mitigation:
    input:
        unpack(
            lambda wc: mitigation_targets.rule_inputs(config, wc.ds, wc.model, wc.protocol)
        ),
    output:
        [f"{MITIGATION_DIR}/{name}" for name in mitigation_targets.method_files(config)],
        table=f"{MITIGATION_DIR}/table.parquet",
        table_csv=f"{MITIGATION_DIR}/table.csv",
        differences=f"{MITIGATION_DIR}/differences.parquet",
        differences_csv=f"{MITIGATION_DIR}/differences.csv",
        calibration=f"{MITIGATION_DIR}/calibration.parquet",
        split=f"{MITIGATION_DIR}/split.parquet",
        learned=f"{MITIGATION_DIR}/learned.json",
        table_md=f"{MITIGATION_DIR}/table.md",
        html=report(f"{MITIGATION_DIR}/report.html", **mitigation_targets.report_kw("report")),
        png=report(
            f"{MITIGATION_DIR}/pareto.png", **mitigation_targets.report_kw("accuracy vs bias")
        ),
    wildcard_constraints:
        model=r"[^/+]+",
        protocol=r"[^/]+",
    params:
        mitigation=config.get("mitigation", {}),
        fairness=mitigation_targets.fairness_section(config),
        methods=mitigation_targets.methods(config),
        partners=lambda wc: mitigation_targets.partners(config, wc.model),
        source=lambda wc: mitigation_targets.calibration_source(config, wc.ds, wc.protocol),
        fars=config["evaluate"]["fars"],
        seed=config["seed"],
    log:
        "results/{ds}/logs/mitigation/{model}_{protocol}.log",
    benchmark:
        "results/{ds}/runtime/mitigation/{model}_{protocol}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/mitigation.py"


DEFAULT_TARGETS.append(lambda ds: mitigation_targets.targets(config, ds))
