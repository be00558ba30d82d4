"""Rule templates_groups: FMR / FNMR per demographic group of one model's IJB templates."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.templates.stage import run_template_groups

    run_template_groups(snakemake.params.root, snakemake.params.variant,
                        snakemake.input.scored, snakemake.input.attributes,
                        Path(snakemake.output.rates).parent, snakemake.params.protected,
                        snakemake.params.cfg, model=ctx.wildcards["model"],
                        provenance=ctx.provenance)
