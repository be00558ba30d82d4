"""Rule benchmark_subset: CAST filters -> subset.parquet + description.txt."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.analysis.stage import build_benchmark_subset

    report = build_benchmark_subset(snakemake.input.attributes, snakemake.params.filters,
                                    snakemake.output.subset, snakemake.output.description,
                                    bench=ctx.wildcards["bench"],
                                    rank_method=snakemake.params.rank_method,
                                    cast_filters=snakemake.params.cast_filters,
                                    cast_ties=snakemake.params.cast_ties,
                                    statuses=snakemake.params.statuses,
                                    provenance=ctx.provenance)
    ctx.log.info("subset %s: %s", ctx.wildcards["bench"], report)
