"""Rule dataset_summary: counts and statuses of a dataset for the Snakemake report."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.datasets.stage import dataset_summary
    from facecast.io.shard_index import shard_files

    summary = dataset_summary(snakemake.input.manifest, shard_files(snakemake.input.faces),
                              snakemake.output.table, snakemake.output.plot,
                              title=ctx.wildcards["ds"])
    ctx.log.info("dataset summary: %d rows", len(summary))
