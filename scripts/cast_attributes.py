"""Rule cast_attributes: a cast_arrays dataset's arrays -> results/{ds}/attributes.parquet."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.attributes.stage import write_cast_attributes

    write_cast_attributes(ctx.dataset(), snakemake.input.manifest, snakemake.output[0],
                          provenance=ctx.provenance)
