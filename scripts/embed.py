"""Rule embed: embed one faces shard with one model."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.embed.stage import embed_shard

    embed_shard(
        snakemake.input.faces,
        snakemake.output.embeddings,
        snakemake.wildcards.model,
        dict(snakemake.params.model),
        dict(snakemake.params.embed),
        fit_path=snakemake.input.get("fit"),
        provenance=ctx.provenance,
        threads=ctx.threads,
    )
