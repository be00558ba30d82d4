"""Rule attributes_merge: stream every scorer's shards into results/{ds}/attributes.parquet."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.attributes.stage import merge_attributes
    from facecast.io.shard_index import shard_files

    scorer_files = {s: list(snakemake.input[s]) for s in snakemake.params.scorers}
    merge_attributes(snakemake.input.manifest, shard_files(snakemake.input.faces), scorer_files,
                     snakemake.output[0], provenance=ctx.provenance)
