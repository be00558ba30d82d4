"""Rule attribute_distributions: one histogram per attribute column, for the report."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.datasets.stage import plot_attribute_distributions

    plot_attribute_distributions(snakemake.input.attributes, snakemake.output.plot,
                                 title=f"{ctx.wildcards['ds']}: attribute distributions")
