"""Rule pair_stats_html: a benchmark's pair_stats.tsv as an HTML table for the report."""

from facecast.report.html_tables import write_tsv_html
from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    write_tsv_html(snakemake.input.stats, snakemake.output.html,
                   f"Pairs per fold: {ctx.wildcards['bench']} ({ctx.wildcards['ds']})",
                   note="Genuine and impostor pairs, images, identities and reference scores "
                        "per fold of the mined benchmark (fold 'all': every fold).")
