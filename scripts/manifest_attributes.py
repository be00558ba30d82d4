"""Rule manifest_attributes: a BFW dataset read without images -> attributes.parquet."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.attributes.stage import write_manifest_attributes

    write_manifest_attributes(snakemake.input.manifest, snakemake.output[0],
                              provenance=ctx.provenance)
