"""Rules faces_index / embed_index: the index that stands for every shard of a stage."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.io.shard_index import write_shard_index

    index = write_shard_index(snakemake.input.shards, snakemake.output.index,
                              provenance=ctx.provenance)
    ctx.log.info("%d shards, %d rows (%s ok)", len(index), index["n_rows"].sum(),
                 index["n_ok"].sum())
