"""Rule audit: the label audit of one dataset (facecast.labels.stage.run_audit)."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.io.shard_index import shard_files
    from facecast.labels.stage import run_audit

    run_audit(
        snakemake.input.attributes,
        snakemake.params.out_dir,
        snakemake.params.cfg,
        embeddings=(shard_files(snakemake.input.embeddings)
                    if snakemake.input.get("embeddings") else []),
        faces=shard_files(snakemake.input.faces),
        features=snakemake.input.get("features") or None,
        protected=snakemake.params.protected,
        seed=int(snakemake.params.seed),
        provenance=ctx.provenance,
    )
