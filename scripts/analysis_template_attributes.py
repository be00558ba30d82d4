"""Rule template_attributes: an IJB dataset's templates with their images' attributes."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.analysis.stage import write_template_attributes

    write_template_attributes(snakemake.input.tid_mid, snakemake.input.attributes,
                              snakemake.output.table,
                              majority_columns=snakemake.params.majority_columns,
                              statuses=snakemake.params.statuses, provenance=ctx.provenance)
