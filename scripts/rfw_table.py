"""Rule rfw_table: accuracy per RFW set, its std across sets and SER (Parquet, Markdown, HTML)."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.evaluate.stage import write_rfw_table

    write_rfw_table(snakemake.params.entries, snakemake.params.models, snakemake.params.sets,
                    snakemake.output.table, snakemake.output.markdown, snakemake.output.html,
                    ds=ctx.wildcards["ds"], provenance=ctx.provenance)
