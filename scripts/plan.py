"""Rule plan: the run's derived defaults and skipped stages (facecast.config.prepare)."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.report.plan import write_plan

    text = write_plan(snakemake.params.plan, snakemake.output.md, snakemake.output.html)
    ctx.log.info("%s", text)
