# Attribute labels you can trust (issue 14): stages audit, features and describe.
# audit    -> results/{ds}/audit/     label metrics, contradictions, kappa, ranked suspects
# features -> results/{ds}/features/  dlib 68-point landmarks (the ofiq scorer's landmark
#                                     shards, or one features_shard job per faces shard),
#                                     identity shrinkage, percentiles, prominent labels
# describe -> results/{ds}/describe/  template descriptions + rater-free evaluation
# estimators -> results/{ds}/labels/  estimator report of an attribute benchmark (issue 42)
# Logic: facecast.labels.stage; file lists: facecast.labels.targets.
import facecast.labels.targets as labels_targets


rule audit:
    input:
        unpack(lambda wc: labels_targets.audit_inputs(config, wc.ds)),
    output:
        [f"results/{{ds}}/audit/{f}" for f in labels_targets.AUDIT_FILES],
        html=report(
            "results/{ds}/audit/report.html",
            **labels_targets.report_kw("labels_audit", "report.html"),
        ),
        kappa_png=report(
            "results/{ds}/audit/kappa.png",
            **labels_targets.report_kw("labels_audit", "kappa.png"),
        ),
        f1_png=report(
            "results/{ds}/audit/f1_vs_prevalence.png",
            **labels_targets.report_kw("labels_audit", "f1_vs_prevalence.png"),
        ),
        grid_png=report(
            "results/{ds}/audit/suspects_grid.png",
            **labels_targets.report_kw("labels_audit", "suspects_grid.png"),
        ),
        phi_png=report(
            "results/{ds}/audit/phi.png",
            **labels_targets.report_kw("labels_audit", "phi.png"),
        ),
        meas_png=report(
            "results/{ds}/audit/measurements.png",
            **labels_targets.report_kw("labels_audit", "measurements.png"),
        ),
    params:
        cfg=config.get("audit", {}),
        out_dir="results/{ds}/audit",
        protected=config.get("fairness", {}).get("protected", {}),
        seed=config["seed"],
    threads: 1
    # only describe waits for it: started early, the audit -> describe chain does not run
    # alone at the end of the run (Snakemake otherwise prefers jobs that unlock others)
    priority: 10
    log:
        "results/{ds}/logs/audit.log",
    benchmark:
        "results/{ds}/runtime/audit.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/labels_audit.py"


# only where the ofiq scorer does not write the landmark shards (labels_targets.feature_shards)
rule features_shard:
    input:
        faces="results/{ds}/faces/{shard}.parquet",
    output:
        labels_targets.FEATURES_SHARD,
    threads: 1
    log:
        "results/{ds}/logs/features/{shard}.log",
    benchmark:
        "results/{ds}/runtime/features/{shard}.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/labels_features_shard.py"


rule features_merge:
    input:
        shards=lambda wc: labels_targets.feature_shards(config, wc.ds, per_shard),
        attributes="results/{ds}/attributes.parquet",
    output:
        [f"results/{{ds}}/features/{f}" for f in labels_targets.FEATURES_FILES],
        html=report(
            "results/{ds}/features/report.html",
            **labels_targets.report_kw("labels_features", "report.html"),
        ),
    params:
        cfg=config.get("features", {}),
        out_dir="results/{ds}/features",
        protected=config.get("fairness", {}).get("protected", {}),
    log:
        "results/{ds}/logs/features/merge.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/labels_features_merge.py"


rule describe:
    input:
        unpack(lambda wc: labels_targets.describe_inputs(config, wc.ds)),
    output:
        [f"results/{{ds}}/describe/{f}" for f in labels_targets.DESCRIBE_FILES],
        html=report(
            "results/{ds}/describe/report.html",
            **labels_targets.report_kw("labels_describe", "report.html"),
        ),
    params:
        cfg=config.get("describe", {}),
        audit_cfg=config.get("audit", {}),
        out_dir="results/{ds}/describe",
        seed=config["seed"],
    priority: 10  # nothing waits for it: started early, not left to the end (see audit)
    log:
        "results/{ds}/logs/describe.log",
    benchmark:
        "results/{ds}/runtime/describe.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/labels_describe.py"


# The estimator report of an attribute benchmark (issue 42; kinds fairface, utkface):
# accuracy of every estimator that groups people, per true group; imported classifiers'
# predictions files (estimators.imports, issue 47) are inputs.
rule estimators:
    wildcard_constraints:
        ds=name_regex(ATTRIBUTE_DATASETS),
    input:
        unpack(lambda wc: labels_targets.estimator_inputs(config, wc.ds)),
    output:
        [f"results/{{ds}}/labels/{f}" for f in labels_targets.ESTIMATOR_FILES],
        html=report(
            "results/{ds}/labels/estimators.html",
            **labels_targets.report_kw("labels_estimators", "estimators.html"),
        ),
        png=report(
            "results/{ds}/labels/estimators.png",
            **labels_targets.report_kw("labels_estimators", "estimators.png"),
        ),
    params:
        cfg=config.get("estimators", {}),
        out_dir="results/{ds}/labels",
        seed=config["seed"],
        kind=lambda wc: (config["datasets"][wc.ds] or {}).get("kind", ""),
        root=lambda wc: str((config["datasets"][wc.ds] or {}).get("root", "")),
    log:
        "results/{ds}/logs/estimators.log",
    benchmark:
        "results/{ds}/runtime/estimators.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/labels_estimators.py"


DEFAULT_TARGETS.append(lambda ds: labels_targets.default_targets(config, ds))
ATTRIBUTE_TARGETS.append(lambda ds: labels_targets.estimator_targets(config, ds))
