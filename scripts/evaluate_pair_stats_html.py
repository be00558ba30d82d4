"""Rule pair_stats_html: a benchmark's pair_stats.tsv as an HTML table for the report."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.evaluate.stage import write_pair_stats_html

    write_pair_stats_html(snakemake.input.stats, snakemake.output.html,
                          bench=ctx.wildcards["bench"], ds=ctx.wildcards["ds"])
