"""Rule faces: detect and align the faces of one manifest shard."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.faces.stage import run_faces_shard

    run_faces_shard(snakemake.input.manifest, ctx.wildcards["shard"], snakemake.params.root,
                    snakemake.output.faces, snakemake.params.faces, provenance=ctx.provenance,
                    threads=ctx.threads)
