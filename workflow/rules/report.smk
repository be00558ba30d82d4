# Report: `snakemake --report report.html` after a run collects every output wrapped in
# report(...) (captions and categories under workflow/report/). This file adds the
# dataset summary (category "Dataset") and the report's front page. Logic:
# facecast.datasets.stage (dataset_summary, plot_attribute_distributions), facecast.report.plan;
# targets: facecast.datasets.targets.


report: "../report/workflow.rst"


# The plan (PLAN, from the Snakefile): derived defaults and skipped stages, with the key
# that turns each on. A change of plan reruns this rule (params are a rerun trigger). One
# per dataset of the config (results/<ds>/plan.md), beside the outputs it explains: a
# second config's run in the same folder on other datasets keeps this one's plan.
rule plan:
    output:
        md="results/{ds}/plan.md",
        html=report(
            "results/{ds}/plan.html",
            caption="../report/plan.rst",
            category="Run",
            subcategory="{ds}",
            labels={"file": "plan"},
        ),
    params:
        plan=PLAN,
    localrule: True
    log:
        "results/{ds}/logs/plan.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/plan.py"


rule dataset_summary:
    input:
        manifest="results/{ds}/manifest.parquet",
        faces=FACES_INDEX,
    output:
        table=report(
            "results/{ds}/report/dataset_summary.tsv",
            caption="../report/dataset_summary.rst",
            category="Dataset",
            subcategory="{ds}",
            labels={"dataset": "{ds}", "figure": "summary table"},
        ),
        plot=report(
            "results/{ds}/report/dataset_summary.png",
            caption="../report/dataset_summary.rst",
            category="Dataset",
            subcategory="{ds}",
            labels={"dataset": "{ds}", "figure": "summary plot"},
        ),
    log:
        "results/{ds}/logs/dataset_summary.log",
    benchmark:
        "results/{ds}/runtime/dataset_summary.tsv"
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/dataset_summary.py"


DEFAULT_TARGETS.append(datasets_targets.summary_targets)
ATTRIBUTE_TARGETS.append(datasets_targets.summary_targets)


rule attribute_distributions:
    input:
        attributes="results/{ds}/attributes.parquet",
    output:
        plot=report(
            "results/{ds}/report/attribute_distributions.png",
            caption="../report/attribute_distributions.rst",
            category="Attributes",
            subcategory="{ds}",
            labels={"dataset": "{ds}", "figure": "distributions"},
        ),
    log:
        "results/{ds}/logs/attribute_distributions.log",
    conda:
        "../../envs/cpu.yaml"
    script:
        "../../scripts/attribute_distributions.py"


DEFAULT_TARGETS.append(datasets_targets.distribution_targets)
ATTRIBUTE_TARGETS.append(datasets_targets.distribution_targets)
