"""Rule attributes_score: one scorer over one faces shard."""

from facecast.attributes.stage import score_shard
from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    embed = {k.removeprefix("embed_"): v for k, v in snakemake.input.items()
             if k.startswith("embed_")}
    score_shard(snakemake.wildcards.scorer, snakemake.input.faces, snakemake.output[0],
                snakemake.params.cfg, embed_paths=embed, weights=snakemake.params.weights or None,
                threads=ctx.threads, provenance=ctx.provenance,
                ofiq_csv=snakemake.input.get("ofiq_csv"), ofiq_map=snakemake.input.get("ofiq_map"))
