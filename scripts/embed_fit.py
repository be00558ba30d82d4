"""Rule embed_fit: fit a fitted backend's per-dataset transform (LBP PCA whitening)."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.embed.stage import fit_model
    from facecast.io.shard_index import shard_files

    fit_model(
        snakemake.input.manifest,
        shard_files(snakemake.input.faces),
        snakemake.output.fit,
        snakemake.wildcards.model,
        dict(snakemake.params.model),
        dict(snakemake.params.embed),
        threads=ctx.threads,
    )
