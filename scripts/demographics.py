"""Rule demographics: cross-group FMR matrices, per-group thresholds, bands."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.fairness.stage import run_demographics

    summary = run_demographics(
        snakemake.input.scores,
        snakemake.input.attributes,
        Path(snakemake.output.group_thresholds).parent,
        snakemake.params.demographics,
        snakemake.params.fairness,
        model=ctx.wildcards["model"],
        protocol=ctx.wildcards["protocol"],
        seed=int(snakemake.params.seed),
        provenance=ctx.provenance,
    )
    ctx.log.info("demographics summary: %s", summary)
