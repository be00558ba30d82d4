"""Rule bfw_table: BFW's per-subgroup thresholds and deviations (Parquet, Markdown, HTML)."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.fairness.stage import write_bfw_table

    write_bfw_table(dict(zip(snakemake.params.models, snakemake.input.tables, strict=True)),
                    snakemake.output.table, snakemake.output.markdown, snakemake.output.html,
                    ds=ctx.wildcards["ds"], provenance=ctx.provenance)
