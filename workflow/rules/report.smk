# Report: `snakemake --report report.html` after a run collects every output wrapped in
# report(...) (captions and categories under workflow/report/). This file adds the
# dataset summary (category "Dataset") and the report's front page. The summary reads
# the faces shards too when some rule produces them (the faces stage is optional here).


report: "../report/workflow.rst"


FACES_PATTERN = "results/{ds}/faces/{shard}.parquet"


rule dataset_summary:
    input:
        manifest="results/{ds}/manifest.parquet",
        faces=lambda wc: (
            per_shard(FACES_PATTERN, wc.ds)
            if any(r.is_producer(FACES_PATTERN.format(ds=wc.ds, shard="00000"))
                   for r in workflow.rules)
            else []
        ),
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


DEFAULT_TARGETS.append(
    lambda ds: [f"results/{ds}/report/dataset_summary.{ext}" for ext in ("tsv", "png")]
)


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


DEFAULT_TARGETS.append(
    lambda ds: (
        [f"results/{ds}/report/attribute_distributions.png"]
        if any(r.is_producer(f"results/{ds}/attributes.parquet") for r in workflow.rules)
        else []
    )
)
