"""Rule attributes_ofiq_inputs: one manifest shard's images as the folder ofiqpy reads."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.attributes.stage import write_ofiq_inputs

    write_ofiq_inputs(snakemake.input.manifest, ctx.wildcards["shard"], snakemake.params.root,
                      snakemake.output.folder, snakemake.output.map)
