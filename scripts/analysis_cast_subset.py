"""Rule cast_benchmark_subset: a benchmark of a cast_arrays dataset from CAST's arrays."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.analysis.stage import build_array_subset

    report = build_array_subset(ctx.dataset(), snakemake.input.manifest,
                                snakemake.params.bench_cfg, snakemake.output.subset,
                                snakemake.output.description, bench=ctx.wildcards["bench"],
                                statuses=snakemake.params.statuses, workers=ctx.threads,
                                provenance=ctx.provenance)
    ctx.log.info("subset %s: %s", ctx.wildcards["bench"], report)
