"""Rules attributes_score (one scorer over one faces shard) and attributes_ofiq (the ofiq
scorer, writing its dlib fit as the landmark shard too)."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.attributes.stage import head_weights, score_shard

    embed = {k.removeprefix("embed_"): v for k, v in snakemake.input.items()
             if k.startswith("embed_")}
    scorer = snakemake.params.get("scorer") or snakemake.wildcards.scorer  # attributes_ofiq: ofiq
    # a head's checkpoint, worked out here rather than by a params function per job (each
    # costs the DAG build at 42M): the same path the inputs name (celeba40) or cfg holds
    weights = head_weights(snakemake.config, snakemake.wildcards.ds, scorer) or None
    score_shard(scorer, snakemake.input.faces, snakemake.output[0],
                snakemake.params.cfg, embed_paths=embed, weights=weights,
                threads=ctx.threads, provenance=ctx.provenance,
                ofiq_csv=snakemake.input.get("ofiq_csv"), ofiq_map=snakemake.input.get("ofiq_map"),
                landmarks_out=snakemake.output.get("landmarks"))
