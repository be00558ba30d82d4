"""Rule templates_summary: every model's IJB TAR at FAR (and 1:N) in one table."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.templates.stage import summarise_templates

    summarise_templates(list(snakemake.input.tables), snakemake.output.csv,
                        snakemake.output.html, list(snakemake.input.identification),
                        title=f"{ctx.wildcards['ds']} templates")
