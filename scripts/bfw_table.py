"""Rule bfw_table: BFW's per-subgroup thresholds and deviations (Parquet, Markdown, HTML)."""

from facecast.fairness.stage import write_bfw_table
from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    write_bfw_table(dict(zip(snakemake.params.models, snakemake.input.tables, strict=True)),
                    snakemake.output.table, snakemake.output.markdown, snakemake.output.html,
                    ds=ctx.wildcards["ds"], provenance=ctx.provenance)
