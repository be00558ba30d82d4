"""Rule evaluate_summary: models x benchmarks tables (Parquet + Markdown + HTML)."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.evaluate.stage import write_summary

    write_summary(snakemake.input.metrics, snakemake.output.table, snakemake.output.markdown,
                  benchmarks=snakemake.params.benchmarks, models=snakemake.params.models,
                  fars=snakemake.params.fars, out_html=snakemake.output.html,
                  provenance=ctx.provenance)
