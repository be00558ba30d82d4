"""Rule correlations: attribute correlation tables and clustered heatmaps."""

from facecast.analysis.stage import write_correlations
from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    write_correlations(snakemake.input.attributes, snakemake.params.out_dir,
                       snakemake.params.cfg, provenance=ctx.provenance)
