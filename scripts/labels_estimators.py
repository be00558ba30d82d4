"""Rule estimators: the estimator report of an attribute benchmark."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.labels.stage import run_estimators

    run_estimators(snakemake.input.attributes, snakemake.input.manifest,
                   snakemake.params.out_dir, snakemake.params.cfg,
                   seed=int(snakemake.params.seed), dataset=ctx.wildcards["ds"],
                   kind=str(snakemake.params.kind), root=str(snakemake.params.root),
                   provenance=ctx.provenance)
