"""Rule import_protocol: a CAST .list folder or an LFW pairs.txt -> protocol Parquet."""

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.evaluate.stage import import_protocol

    import_protocol(snakemake.params.spec, snakemake.input.manifest, snakemake.output.pairs,
                    n_folds=snakemake.params.n_folds, seed=snakemake.params.seed,
                    provenance=ctx.provenance)
