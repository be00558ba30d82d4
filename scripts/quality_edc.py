"""Rule quality_edc: EDC of every quality measure for one model on one protocol."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.quality.stage import run_edc

    ranking = run_edc(
        snakemake.input.scores,
        snakemake.input.attributes,
        Path(snakemake.output.ranking).parent,
        snakemake.params.quality,
        snakemake.params.fairness,
        model=ctx.wildcards["model"],
        protocol=ctx.wildcards["protocol"],
        seed=int(snakemake.params.seed),
        provenance=ctx.provenance,
    )
    ctx.log.info("EDC ranking:\n%s", ranking.head(30).to_string())
