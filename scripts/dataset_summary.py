"""Rule dataset_summary: counts and statuses of a dataset for the Snakemake report."""

from facecast.dataset_summary import dataset_summary
from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    summary = dataset_summary(snakemake.input.manifest, list(snakemake.input.faces),
                              snakemake.output.table, snakemake.output.plot,
                              title=ctx.wildcards["ds"])
    ctx.log.info("dataset summary: %d rows", len(summary))
