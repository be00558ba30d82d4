"""Rule correlations: attribute correlation tables and clustered heatmaps."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.analysis.stage import write_correlations

    write_correlations(snakemake.input.attributes, snakemake.params.out_dir,
                       snakemake.params.cfg, provenance=ctx.provenance)
