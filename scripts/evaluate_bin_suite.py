"""Rule bin_suite: every verification .bin set of the run in one table (Parquet + Markdown + HTML)."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.evaluate.stage import write_bin_suite

    write_bin_suite(snakemake.params.entries, snakemake.output.table, snakemake.output.markdown,
                    snakemake.output.html, models=snakemake.params.models,
                    flips=snakemake.params.flips, provenance=ctx.provenance)
