"""Rule features_shard: dlib 68-point landmarks and measurements of one faces shard."""

from facecast.labels.stage import run_features_shard
from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    run_features_shard(snakemake.input.faces, snakemake.output[0],
                       margin=float(snakemake.params.margin), provenance=ctx.provenance)
