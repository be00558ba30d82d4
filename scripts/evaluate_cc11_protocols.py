"""Rule cc11_protocols: the eleven block protocols of a CC11 .bin (one read of the file)."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.evaluate.stage import import_cc11_blocks

    import_cc11_blocks(snakemake.params.path, snakemake.input.manifest,
                       list(snakemake.output.pairs), provenance=ctx.provenance)
