"""Rule identification: 1:N search of one model on the pool, overall and per group."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.identification.stage import run_identification
    from facecast.io.shard_index import shard_files

    summary = run_identification(
        snakemake.input.pool,
        shard_files(snakemake.input.embeddings),
        snakemake.input.attributes,
        Path(snakemake.output.cmc).parent,
        snakemake.params.identification,
        snakemake.params.fairness,
        model=ctx.wildcards["model"],
        seed=int(snakemake.params.seed),
        failed=str(snakemake.params.failed),
        provenance=ctx.provenance,
    )
    ctx.log.info("identification summary: %s", summary)
