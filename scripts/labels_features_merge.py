"""Rule features_merge: identity shrinkage, percentiles, reliability, prominent labels."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.labels.stage import run_features_merge

    run_features_merge(list(snakemake.input.shards), snakemake.input.attributes,
                       snakemake.params.out_dir, snakemake.params.cfg,
                       protected=snakemake.params.protected, provenance=ctx.provenance)
