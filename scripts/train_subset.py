"""Rules train_subset_*: a training subset of a benchmark's pool (export.train_subsets)."""

from pathlib import Path

from facecast.workflow_glue import script_context

with script_context(snakemake) as ctx:
    from facecast.analysis.stage import build_train_subset

    build_train_subset(snakemake.input.subset, snakemake.input.manifest,
                       snakemake.input.get("attributes"), ctx.dataset(), snakemake.params.cfg,
                       Path(snakemake.output.selection).parent, name=ctx.wildcards["name"],
                       dataset_dir=f"results/{ctx.wildcards['ds']}/dataset",
                       seed=snakemake.params.seed, provenance=ctx.provenance)
