"""Rule cc11_table: CAST's CC11 table of one layout: cc11 dataset (Parquet + Markdown + HTML)."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.evaluate.stage import write_cc11_table

    write_cc11_table(snakemake.params.entries, snakemake.output.table,
                     snakemake.output.markdown, snakemake.output.html,
                     models=snakemake.params.models, dataset=snakemake.wildcards.ds,
                     source=snakemake.params.source, provenance=ctx.provenance)
