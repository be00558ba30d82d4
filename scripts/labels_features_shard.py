"""Rule features_shard: the landmark shard (dlib 68 points, measurements, pose) of one faces
shard, where the ofiq scorer does not fit the points."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.labels.stage import run_features_shard

    run_features_shard(snakemake.input.faces, snakemake.output[0], provenance=ctx.provenance)
