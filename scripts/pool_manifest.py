"""Checkpoint pool_manifest: the union of a cast_arrays dataset's benchmark pools."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.datasets.stage import build_pool_manifest

    n = build_pool_manifest(ctx.dataset(), snakemake.input.manifest,
                            list(snakemake.input.subsets), snakemake.output.manifest,
                            provenance=ctx.provenance)
    ctx.log.info("pool manifest: %d rows", n)
