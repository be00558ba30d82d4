"""Rule templates_identify: 1:N of one model's IJB templates (G1, G2, G1+G2)."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.templates.stage import run_template_identification

    run_template_identification(
        snakemake.input.templates,
        {role: snakemake.input[role] for role in ("G1", "G2", "probe")},
        Path(snakemake.output.table).parent, snakemake.params.cfg,
        model=ctx.wildcards["model"],
        groups_path=getattr(snakemake.input, "template_groups", None),
        provenance=ctx.provenance)
